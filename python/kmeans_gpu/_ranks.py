"""``KMeans.fit(X_local, comm=...)``: one fit over the ranks of an mpi4py communicator.

Every rank passes its own rows (rank order is row order; any number each, none included). The
ranks first agree on their arguments; then the rows move so that each rank holds the whole
chunks of 16,384 rows the CLI's ranks hold under ``mpirun`` (``_core.split_rows``), and the
ranks run the CLI's parted fit together (src/kmeans/registry.hpp: run_parted), its collectives
through :class:`Team`; each rank's labels then go back to the rows it passed. An implementation
that cannot hold a part of a problem (``seq``, and the GPU rungs ``naive``, ``transpose``,
``shared``) fits on rank 0 alone, every row moved there. Either way every rank ends with the
single process's centroids, inertia and iteration count, bit for bit.

No rank is left waiting for another. Every collective starts with a header from each rank (go
on, or failed and why), so a rank that fails anywhere (its arguments, its rows, an engine's
error) says so in the collective its peers wait in, and every rank raises the same exception:
the failing rank's type with its message after ``rank R:`` (without it where every rank failed
alike). With a GPU implementation the other ranks may wait on the device instead (NCCL), where
nothing reaches them: a GPU or memory error there ends every rank through ``MPI_Abort``.
"""

import hashlib
import math
import sys

import numpy as np

from . import _core, _core_arguments

# MPI counts are C ints.
_INT_MAX = 2**31 - 1


def ranks_of(comm):
    """The number of ranks of comm, which must be an mpi4py intracommunicator."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise TypeError(f"comm={comm!r}: a communicator needs mpi4py ({e})") from None
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise TypeError(f"comm={comm!r}: must be an mpi4py intracommunicator (e.g. MPI.COMM_WORLD) or None")
    return comm.Get_size()


def _kinds():
    return {k.__name__: k for k in (ValueError, TypeError, MemoryError, OverflowError, RuntimeError,
                                    KeyboardInterrupt, _core.DeviceError)}


def _told(exc):
    """(kind, message) of an exception, as the other ranks raise it."""
    kinds = _kinds()
    for cls in type(exc).__mro__:
        if kinds.get(cls.__name__) is cls:
            return cls.__name__, str(exc)
    return "RuntimeError", f"{type(exc).__name__}: {exc}"


class Team:
    """The collectives of one fit over comm. The engines call sum, min, max, all_gather and
    gather_to_root (src/python/py_team.hpp: PyTeam, km::Team's methods); the fit the others."""

    def __init__(self, comm):
        import mpi4py
        from mpi4py import MPI
        self._mpi, self._comm = MPI, comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.library = f"mpi4py {mpi4py.__version__} ({MPI.Get_library_version().splitlines()[0].strip()})"
        self.over = False  # a failure was told, or MPI failed: no collective after it

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self._mpi.Exception:
            self.over = True
            raise

    # -- the header every collective starts with ---------------------------------------------

    def _begin(self, nbytes=0, failure=None):
        """Every rank's [failed, bytes]: its payload's size, or its failure's; raises every
        failure on every rank."""
        head = np.array([0, nbytes] if failure is None else [1, len(failure)], np.int64)
        heads = np.empty((self.size, 2), np.int64)
        self._call(self._comm.Allgather, [head, self._mpi.INT64_T], [heads, self._mpi.INT64_T])
        if heads[:, 0].any():
            self._raise_failures(heads, failure or b"")
        return [int(b) for b in heads[:, 1]]

    def _raise_failures(self, heads, mine):
        sizes = [int(b) if failed else 0 for failed, b in heads]
        text = bytes(self._gatherv(np.frombuffer(mine, np.uint8), sizes))
        self.over = True
        failures, at = [], 0
        for r, size in enumerate(sizes):
            if heads[r, 0]:
                failures.append((r, text[at:at + size].decode("utf-8", "replace")))
            at += size
        rank, first = failures[0]
        kind, _, why = first.partition("\n")
        if len(failures) < self.size or any(m != first for _, m in failures):
            why = f"rank {rank}: {why}"
        raise _kinds().get(kind, RuntimeError)(why)

    def fail(self, exc):
        """Tells the other ranks (in the collective they wait in) that this rank failed, and
        raises what every rank raises. Where they know already, or MPI itself failed: exc."""
        if self.over or isinstance(exc, self._mpi.Exception):
            raise exc
        kind, why = _told(exc)
        try:
            self._begin(failure=f"{kind}\n{why}".encode())
        except BaseException as told:
            raise told from exc
        raise RuntimeError("internal: a failure was not told")  # _begin always raises here

    def abort(self, code):
        self._comm.Abort(code)

    # -- the engines' collectives (km::Team) -------------------------------------------------

    def sum(self, a):
        self._reduce(a, self._mpi.INT64_T, self._mpi.SUM)

    def min(self, a):
        # The MPI type is named, not taken from NumPy's: NumPy's uint64 is MPI_UNSIGNED_LONG,
        # whose MPI_MIN Open MPI 4.1.2 to 4.1.4 compute as signed (open-mpi/ompi#10525).
        self._reduce(a, self._mpi.UINT64_T, self._mpi.MIN)

    def max(self, a):
        self._reduce(a, self._mpi.DOUBLE, self._mpi.MAX)

    def _reduce(self, a, datatype, op):
        self._begin()
        self._call(self._comm.Allreduce, self._mpi.IN_PLACE, [a, datatype], op)

    def _gatherv(self, mine, sizes):
        total = sum(sizes)
        if total > _INT_MAX:
            raise OverflowError(f"a gather of {total} bytes over the ranks is above MPI's 2^31-byte limit")
        out = np.empty(total, np.uint8)
        displacements = np.cumsum([0] + sizes[:-1]).tolist()
        self._call(self._comm.Allgatherv, [mine, self._mpi.BYTE], [out, (sizes, displacements), self._mpi.BYTE])
        return out

    def all_gather(self, mine):
        """Every rank's bytes, concatenated in rank order, and their counts."""
        sizes = self._begin(mine.size)
        return self._gatherv(mine, sizes), sizes

    def gather_to_root(self, mine):
        sizes = self._begin(mine.size)
        if sum(sizes) > _INT_MAX:
            raise OverflowError(f"a gather of {sum(sizes)} bytes over the ranks is above MPI's 2^31-byte limit")
        out = np.empty(sum(sizes) if self.rank == 0 else 0, np.uint8)
        spec = [out, (sizes, np.cumsum([0] + sizes[:-1]).tolist()), self._mpi.BYTE] if self.rank == 0 else None
        self._call(self._comm.Gatherv, [mine, self._mpi.BYTE], spec, root=0)
        return out

    # -- the fit's own ------------------------------------------------------------------------

    def allgather(self, obj):
        self._begin()
        return self._call(self._comm.allgather, obj)

    def bcast(self, obj):
        self._begin()
        return self._call(self._comm.bcast, obj, root=0)

    def finish(self):
        """The last collective: every rank got through."""
        self._begin()

    def move_rows(self, a, counts, to):
        """Rows laid out over the ranks by `counts` (in rank order; `a` this rank's), laid out by
        `to` instead: this rank's rows of that layout (a itself when the layouts agree)."""
        if list(counts) == list(to):
            return a
        if max(max(counts), max(to)) > _INT_MAX:
            raise OverflowError(f"a rank would hold more than {_INT_MAX} rows: use more ranks")
        out = np.empty((to[self.rank],) + a.shape[1:], a.dtype)  # before the header: a failure is told there
        old, new = np.cumsum([0] + list(counts)).tolist(), np.cumsum([0] + list(to)).tolist()

        def rows(p, q):  # how many of rank p's rows under `counts` are rank q's under `to`
            return max(0, min(old[p + 1], new[q + 1]) - max(old[p], new[q]))

        send = [rows(self.rank, q) for q in range(self.size)]
        receive = [rows(p, self.rank) for p in range(self.size)]
        width = math.prod(a.shape[1:])
        base = {np.dtype(np.float32): self._mpi.FLOAT, np.dtype(np.float64): self._mpi.DOUBLE,
                np.dtype(np.int32): self._mpi.INT32_T}[a.dtype]
        row = base.Create_contiguous(width).Commit()
        try:
            self._begin()
            self._call(self._comm.Alltoallv, [a, (send, np.cumsum([0] + send[:-1]).tolist()), row],
                       [out, (receive, np.cumsum([0] + receive[:-1]).tolist()), row])
        finally:
            row.Free()
        return out


def fit(est, X, comm, sample_weight=None):
    """KMeans.fit(X, sample_weight, comm=comm) for a communicator of several ranks."""
    team = Team(comm)
    try:
        out = _fit(est, X, team, sample_weight)
    except BaseException as e:
        team.fail(e)
    return est._take(out)


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _agree(infos):
    """Raises on every rank alike where a rank's data or parameters differ from rank 0's."""
    ours = infos[0]["settings"]
    for r, info in enumerate(infos[1:], 1):
        for key, theirs in info["settings"].items():
            if _same(theirs, ours[key]):
                continue
            if key == "n_features":
                raise ValueError(f"rank {r}'s X has {theirs} features and rank 0's {ours[key]}: every rank must pass "
                                 f"rows of the same features")
            if key == "dtype":
                raise ValueError(f"rank {r}'s X is {theirs} and rank 0's {ours[key]} (the precision follows it): pass "
                                 f"every rank the same dtype, or set precision")
            if key == "init" and "array" in (str(theirs)[:5], str(ours[key])[:5]):
                raise ValueError(f"rank {r} was given other initial centroids than rank 0: every rank must fit with "
                                 f"the same parameters")
            raise ValueError(f"rank {r} has {key}={theirs!r} and rank 0 {key}={ours[key]!r}: every rank must fit with "
                             f"the same parameters")


def _fit(est, X, team, sample_weight=None):
    X, args = est._arguments(X, stacklevel=5, sample_weight=sample_weight)
    weights = args["sample_weight"]
    _core.check_finite(X)  # here, where the row it names is the caller's
    if weights is not None:  # likewise (the engines see them after the rows move between ranks)
        _core.check_weights(X, weights)
    engine = est._engine_arguments()
    name, parted, on_gpu = _core.resolve_implementation(engine["impl"])
    centroids = args["centroids"]
    settings = dict(
        n_features=X.shape[1], dtype=X.dtype.name, n_clusters=args["k"],
        init=args["init"] if centroids is None else "array " + hashlib.sha256(centroids.tobytes()).hexdigest(),
        max_iter=args["loops"], tol=float(est.tol), threshold=args["threshold"], n_init=args["n_init"],
        random_state=engine["seed"] if est._seed_given() else None, impl=name, block=engine["block"],
        n_gpus=engine["gpus"], sample_weight=weights is not None)
    infos = team.allgather(dict(rows=X.shape[0], seed=engine["seed"], settings=settings))
    _agree(infos)
    engine.update(seed=infos[0]["seed"], impl=name)  # a drawn seed: rank 0's
    counts = [info["rows"] for info in infos]
    total = sum(counts)
    if total == 0:
        raise ValueError(f"X: invalid shape 0 x {X.shape[1]} (both must be positive): no rank has rows")
    if parted:
        to = [_core.split_rows(total, r, team.size)[1] for r in range(team.size)]
        part = team.move_rows(X, counts, to)
        part_weights = None if weights is None else team.move_rows(weights, counts, to)
        tol = est._tol(lambda unit: _core.mean_variance_parted(part, team, total, unit))
        try:
            out = _core.fit_parted(*_core_arguments(part, tol, args, engine), team, total, sample_weight=part_weights)
        except (_core.DeviceError, MemoryError) as e:
            if on_gpu and not team.over:  # the other ranks may be waiting on their GPUs
                print(f"kmeans_gpu: error: rank {team.rank}: {e}", file=sys.stderr, flush=True)
                team.abort(1)
            raise
        out["labels"] = team.move_rows(out["labels"], to, counts)
    else:
        to = [total] + [0] * (team.size - 1)
        whole = team.move_rows(X, counts, to)
        whole_weights = None if weights is None else team.move_rows(weights, counts, to)
        out = None
        if team.rank == 0:
            tol = est._tol(lambda unit: _core.mean_variance(whole, unit))
            out = _core.fit(*_core_arguments(whole, tol, args, engine), sample_weight=whole_weights)
        labels = out.pop("labels") if out else np.empty(0, np.int32)
        out = team.bcast(out)
        out["labels"] = team.move_rows(labels, to, counts)
    team.finish()
    return out
