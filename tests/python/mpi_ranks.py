"""One rank of test_mpi.py, started by mpirun: KMeans.fit(X_local, comm=MPI.COMM_WORLD) against
one process's fit of all the rows, and the errors. Writes one line per finding to DIR/<rank>.txt
as it goes ("ok ..." or "FAIL ..."), and "DONE" at the end (the ranks' standard outputs, merged
by mpirun, can interleave within a line). Usage: mpi_ranks.py fits|errors DIR"""
import os
import sys

import numpy as np
from mpi4py import MPI

import kmeans_gpu
from kmeans_gpu import _core, _ranks

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []
log = None  # DIR/<rank>.txt


def say(line):
    log.write(line + "\n")
    log.flush()


def expect(cond, what):
    if not cond:
        failures.append(what)
        say(f"FAIL rank {rank}: {what}")


def data(n=40_003, d=3, seed=5):
    """Blobs around 5 centres; n rows split by split_rows into 3 chunks of 16,384 at most."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-6, 6, (5, d))
    return centres[rng.integers(0, 5, n)] + rng.normal(0, 1.5, (n, d))


def uneven_cuts(n):
    """Each rank's rows, not split_rows' (rank 0 none with 3 ranks, the others cut mid-chunk)."""
    if size == 2:
        return [0, n * 31 // 100, n]
    return [0, 0, n // 2 + 1, n] if size == 3 else np.linspace(0, n, size + 1).astype(int).tolist()


def differences(one, many, a, b):
    """How the fit of rows [a, b) over the ranks differs from one process's fit of all of them."""
    out = []
    if one.cluster_centers_.dtype != many.cluster_centers_.dtype or \
            one.cluster_centers_.tobytes() != many.cluster_centers_.tobytes():
        out.append("centroids")
    if float(one.inertia_).hex() != float(many.inertia_).hex():
        out.append(f"inertia {many.inertia_!r} vs {one.inertia_!r}")
    if one.n_iter_ != many.n_iter_:
        out.append(f"n_iter {many.n_iter_} vs {one.n_iter_}")
    if many.labels_.dtype != np.int32 or many.labels_.tobytes() != one.labels_[a:b].tobytes():
        out.append("labels")
    return out


def check_comparison_catches(one, a, b):
    """The comparison itself: a copy of one's result, off by one ulp or one label, must differ."""
    class Fit:
        pass
    for change in ("centroid", "label", "inertia"):
        other = Fit()
        other.cluster_centers_ = one.cluster_centers_.copy()
        other.labels_ = one.labels_[a:b].copy()
        other.inertia_, other.n_iter_ = one.inertia_, one.n_iter_
        if change == "centroid":
            other.cluster_centers_[0, 0] = np.nextafter(other.cluster_centers_[0, 0], np.inf)
        elif change == "label" and b > a:
            other.labels_[-1] = (other.labels_[-1] + 1) % one.cluster_centers_.shape[0]
        elif change == "inertia":
            other.inertia_ = float(np.nextafter(one.inertia_, np.inf))
        else:
            continue
        expect(differences(one, other, a, b), f"the comparison misses a changed {change}")


def fits():
    X = data()
    n = len(X)
    cuts = uneven_cuts(n)
    split = [_core.split_rows(n, r, size) for r in range(size)]
    given = X[[3, 9, 100, 2000, 30_000]]
    cases = []
    for init in ("first", "random", "k-means++", "k-means||", given):
        cases.append(("omp", np.float64, init, cuts))
        cases.append(("omp", np.float32, init, cuts))
        cases.append(("seq", np.float64, init, cuts))
    cases.append(("omp", np.float64, "k-means++", [s[0] for s in split] + [n]))  # split_rows' rows: no move
    cases.append(("omp", np.float64, "random", cuts, 1, "cosine"))  # each rank normalises its own rows
    cases.append(("omp", np.float32, "k-means++", cuts, 1, "dot"))
    cases.append(("omp", np.float64, "random", cuts, 3))  # n_init
    # Sample weights (a tenth of them 0): each rank passes its rows' weights.
    cases.append(("omp", np.float64, "k-means++", cuts, 1, "euclidean", True))
    cases.append(("omp", np.float32, "first", cuts, 1, "euclidean", True))
    cases.append(("seq", np.float64, "k-means++", cuts, 1, "euclidean", True))
    cases.append(("omp", np.float64, "random", cuts, 1, "cosine", True))
    cases.append(("omp", np.float64, "k-means||", cuts, 1, "euclidean", True))
    rng = np.random.default_rng(3)
    weights = rng.random(n) * 2
    weights[rng.random(n) < 0.1] = 0
    for impl, dtype, init, at, *more in cases:
        n_init, metric, weighted = (more + [1, "euclidean", False][len(more):])[:3]
        Xd = X.astype(dtype)
        a, b = at[rank], at[rank + 1]
        w = weights if weighted else None
        params = dict(n_clusters=5, init=init, random_state=7, impl=impl, max_iter=30, n_init=n_init, metric=metric)
        one = kmeans_gpu.KMeans(**params).fit(Xd, sample_weight=w)
        many = kmeans_gpu.KMeans(**params).fit(Xd[a:b], sample_weight=None if w is None else w[a:b], comm=comm)
        name = init if isinstance(init, str) else "array"
        tag = (f"{impl} {np.dtype(dtype).name} init={name} n_init={params['n_init']} {metric}"
               f"{' weighted' if weighted else ''} rows [{a}, {b})")
        diff = differences(one, many, a, b)
        expect(not diff, f"{tag}: differs from one process: {', '.join(diff)}")
        expect(many.report_["ranks"] == (size if impl == "omp" else 1), f"{tag}: report ranks {many.report_['ranks']}")
        say(f"ok rank {rank}: {tag}: inertia {many.inertia_!r}, {many.n_iter_} iterations")
        if name == "first" and impl == "omp" and dtype == np.float64:
            check_comparison_catches(one, a, b)
    # tol's scale: the mean column variance over the ranks, the single process's bits.
    team = _ranks.Team(comm)
    for dtype in (np.float64, np.float32):
        Xd = X.astype(dtype)
        a, b = split[rank][0], split[rank][0] + split[rank][1]
        parted = _core.mean_variance_parted(Xd[a:b], team, n)
        expect(parted.hex() == _core.mean_variance(Xd).hex(),
               f"mean variance over the ranks {parted!r} vs {_core.mean_variance(Xd)!r}")
    # fit_predict over the ranks; a communicator of one rank (an ordinary fit).
    a, b = cuts[rank], cuts[rank + 1]
    one = kmeans_gpu.KMeans(4, init="k-means++", random_state=1, impl="omp").fit(X)
    labels = kmeans_gpu.KMeans(4, init="k-means++", random_state=1, impl="omp").fit_predict(X[a:b], comm=comm)
    expect(labels.tobytes() == one.labels_[a:b].tobytes(), "fit_predict over the ranks: labels differ")
    say(f"ok rank {rank}: fit_predict")
    alone = kmeans_gpu.KMeans(4, init="k-means++", random_state=1, impl="omp").fit(X, comm=MPI.COMM_SELF)
    diff = differences(one, alone, 0, len(X))
    expect(not diff, f"comm=MPI.COMM_SELF differs from an ordinary fit: {', '.join(diff)}")
    say(f"ok rank {rank}: COMM_SELF")
    # A random_state drawn on each rank: rank 0's draw is every rank's.
    km = kmeans_gpu.KMeans(5, init="random", random_state=np.random.RandomState(rank), impl="omp")
    km.fit(X[cuts[rank]:cuts[rank + 1]], comm=comm)
    centres = comm.allgather(km.cluster_centers_.tobytes())
    expect(all(c == centres[0] for c in centres), "random_state drawn per rank: the ranks' centroids differ")


def expect_raise(what, kind, words, fn):
    """fn() must raise kind, its message containing words, on this rank (as on every rank)."""
    try:
        fn()
    except kind as e:
        expect(words in str(e), f"{what}: {kind.__name__} without {words!r}: {e}")
        say(f"ok rank {rank}: {what}: {type(e).__name__}: {e}")
        return
    except BaseException as e:  # noqa: BLE001 - reported as the test's failure
        expect(False, f"{what}: {type(e).__name__} instead of {kind.__name__}: {e}")
        return
    expect(False, f"{what}: no exception")


def errors():
    X = data(n=5_000)
    n = len(X)
    cuts = uneven_cuts(n)
    mine = X[cuts[rank]:cuts[rank + 1]]
    last = size - 1
    fit = lambda Xr, sample_weight=None, **kw: kmeans_gpu.KMeans(  # noqa
        **{"n_clusters": 3, "impl": "omp", "random_state": 0, **kw}).fit(Xr, sample_weight=sample_weight, comm=comm)

    bad = mine.copy()
    if rank == last:
        bad[2, 1] = np.nan
    expect_raise("NaN on one rank", ValueError, f"rank {last}: X: value NaN at object 2, coordinate 1",
                 lambda: fit(bad))
    wide = np.hstack([mine, mine[:, :1]]) if rank == last else mine
    expect_raise("n_features", ValueError, f"rank {last}'s X has 4 features and rank 0's 3", lambda: fit(wide))
    expect_raise("dtype", ValueError, f"rank {last}'s X is float32 and rank 0's float64",
                 lambda: fit(mine.astype(np.float32) if rank == last else mine))
    expect_raise("n_clusters", ValueError, f"rank {last} has n_clusters=4 and rank 0 n_clusters=3",
                 lambda: fit(mine, n_clusters=4 if rank == last else 3))
    expect_raise("init arrays", ValueError, f"rank {last} was given other initial centroids than rank 0",
                 lambda: fit(mine, init=X[:3] + (rank == last)))
    expect_raise("random_state", ValueError, f"rank {last} has random_state=1 and rank 0 random_state=0",
                 lambda: fit(mine, random_state=int(rank == last)))
    text = np.array([["a", "b", "c"]] * 4) if rank == last else mine
    expect_raise("X of text on one rank", ValueError, f"rank {last}: ", lambda: fit(text))
    expect_raise("every rank alike", ValueError, "n_clusters=6000", lambda: fit(mine, n_clusters=6000))
    ones = np.ones(len(mine))
    expect_raise("weights on one rank only", ValueError, f"rank {last} has sample_weight=True and rank 0",
                 lambda: fit(mine, sample_weight=ones if rank == last else None))
    negative = ones.copy()
    if rank == last:
        negative[2] = -1
    expect_raise("a negative weight on one rank", ValueError, f"rank {last}: sample weight 2 is -1",
                 lambda: fit(mine, sample_weight=negative))
    # In the engines, on one rank: run_parted's range check finds the NaN this rank's part holds
    # (the estimator's own check bypassed) before the first collective, which the others wait in.
    total, (first, count) = n, _core.split_rows(n, rank, size)
    part = X[first:first + count].copy()
    if rank == last:
        part[0, 0] = np.nan

    def engines_alone():
        team = _ranks.Team(comm)
        try:
            _core.fit_parted(part, "omp", 3, 10, 0.0, None, "first", 0, 0, 0, 1, None, 1, 0, "euclidean", team, total)
        except BaseException as e:
            team.fail(e)

    expect_raise("the engines' error on one rank", ValueError, f"rank {last}: X: value NaN at object 0", engines_alone)
    # A collective that fails on one rank in the middle of the loop (the engines unwind there
    # while the others wait in their next collective).
    calls = {"sum": 0}
    real_sum = _ranks.Team.sum

    def failing_sum(team, a):
        calls["sum"] += 1
        if rank == last and calls["sum"] == 6:
            raise RuntimeError("injected failure")
        real_sum(team, a)

    _ranks.Team.sum = failing_sum
    try:
        expect_raise("mid-loop failure on one rank", RuntimeError, f"rank {last}: injected failure",
                     lambda: fit(mine, init="k-means++", max_iter=50, tol=0))
    finally:
        _ranks.Team.sum = real_sum
    expect(calls["sum"] >= 6, f"the injected failure never ran ({calls['sum']} sums)")
    # seq fits on rank 0 alone: its error reaches every rank.
    real_fit = _core.fit

    def failing_fit(*args, **kwargs):
        raise MemoryError("injected on rank 0")

    if rank == 0:
        _core.fit = failing_fit
    try:
        expect_raise("seq's error on rank 0", MemoryError, "rank 0: injected on rank 0", lambda: fit(mine, impl="seq"))
    finally:
        _core.fit = real_fit
    expect_raise("comm of the wrong type", TypeError, "intracommunicator",
                 lambda: kmeans_gpu.KMeans(3).fit(mine, comm="world"))
    # The communicator still works after all that.
    one = kmeans_gpu.KMeans(3, impl="omp", random_state=0).fit(X)
    many = fit(mine)
    diff = differences(one, many, cuts[rank], cuts[rank + 1])
    expect(not diff, f"a fit after the errors differs from one process: {', '.join(diff)}")


if __name__ == "__main__":
    with open(os.path.join(sys.argv[2], f"{rank}.txt"), "w") as log:
        {"fits": fits, "errors": errors}[sys.argv[1]]()
        say("DONE")
    sys.exit(1 if failures else 0)
