"""The Python module: scikit-learn's estimator checks, agreement with scikit-learn's KMeans
and with the CLI, zero-copy input, every bad input, Ctrl-C, and (with a GPU) every GPU
implementation. Run by ctest (PYTHONPATH=build/python, KMEANS_BIN=build/kmeans)."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
import scipy.sparse
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import make_blobs
from sklearn.utils.estimator_checks import check_estimator

import kmeans_gpu
from kmeans_gpu import KMeans

KMEANS_BIN = os.environ.get("KMEANS_BIN", os.path.join(os.path.dirname(__file__), "../../build/kmeans"))
GPU = kmeans_gpu.gpu_available()
NAMES = [i["name"] for i in kmeans_gpu.implementations()]
GPU_NAMES = [i["name"] for i in kmeans_gpu.implementations() if i["where"] == "gpu"]
needs_gpu = pytest.mark.skipif(not GPU, reason="no usable GPU: " + kmeans_gpu._core.gpu_why_absent())


def blobs(n=3000, d=8, k=6, dtype=np.float64, seed=0):
    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=1.5, random_state=seed)
    return np.ascontiguousarray(X, dtype=dtype)


def cli_error(*args):
    """The CLI's one-line message for these options (without 'kmeans: error: '), its option names
    as the module's parameters (--clusters=8 -> n_clusters=8)."""
    r = subprocess.run([KMEANS_BIN, "--quiet", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("kmeans: error: "), line
    return kmeans_gpu._core.python_names(line[len("kmeans: error: "):])


# -- scikit-learn's conventions ---------------------------------------------------------------

def _checks(impl):
    try:  # scikit-learn >= 1.6
        from sklearn.utils.estimator_checks import estimator_checks_generator
        # As scikit-learn's own KMeans: an object of weight 0 is not the same as no object.
        generated = estimator_checks_generator(
            KMeans(impl=impl), legacy=True, mark="skip",
            expected_failed_checks={"check_sample_weights_invariance": "zero weight is not removal"})
    except ImportError:
        generated = check_estimator(KMeans(impl=impl), generate_only=True)
    for est, check in generated:
        yield pytest.param(est, check, id=f"{impl}-{getattr(check, 'func', check).__name__}")


@pytest.mark.parametrize("estimator,check", list(_checks("omp")) + list(_checks("seq")))
def test_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=FutureWarning)
        check(estimator)


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(n_clusters=-1, n_features=3), ValueError, "n_clusters=-1"),
    (dict(n_clusters=4, n_features=2**31), ValueError, "n_features=2147483648"),
    (dict(n_clusters=4.5, n_features=3), TypeError, "n_clusters=4.5"),
    (dict(precision="half"), ValueError, "precision='half'")])
def test_implementations_refuses_bad_arguments(kwargs, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        kmeans_gpu.implementations(**kwargs)


def test_version_is_the_package_version():
    import re
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", kmeans_gpu.__version__)
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml")) as f:
        assert f'version = "{kmeans_gpu.__version__}"' in f.read()


def test_params_roundtrip():
    km = KMeans(5, init="random", max_iter=7, tol=0.5, threshold=0.1, n_init=2, random_state=3, impl="seq",
                precision="float", block=64, n_threads=1)
    p = km.get_params()
    assert p["n_clusters"] == 5 and p["precision"] == "float" and p["n_threads"] == 1
    assert KMeans().set_params(**p).get_params() == p


# -- agreement --------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["seq", "omp"])
def test_agrees_with_scikit_learn_double(impl):
    """Same init array, n_init=1, tol=0: the same iterations, labels and (to 1e-9) inertia."""
    X = blobs()
    init = X[::500][:6].copy()
    ours = KMeans(6, init=init, max_iter=50, tol=0, impl=impl).fit(X)
    ref = SkKMeans(6, init=init, n_init=1, max_iter=50, tol=0, algorithm="lloyd").fit(X)
    assert ours.n_iter_ == ref.n_iter_
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert abs(ours.inertia_ - ref.inertia_) <= 1e-9 * ref.inertia_
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-12, atol=1e-12)
    assert ours.cluster_centers_.dtype == np.float64 and ours.labels_.dtype == np.int32


def test_agrees_with_scikit_learn_float():
    """float32 data runs in float: the same labels; inertia to 1e-4 (float's sums)."""
    X = blobs(dtype=np.float32)
    init = X[::500][:6].copy()
    ours = KMeans(6, init=init, max_iter=50, tol=0, impl="omp").fit(X)
    ref = SkKMeans(6, init=init, n_init=1, max_iter=50, tol=0, algorithm="lloyd").fit(X)
    assert ours.cluster_centers_.dtype == np.float32 and ours.report_["precision"] == "float"
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert abs(ours.inertia_ - ref.inertia_) <= 1e-4 * ref.inertia_


def test_tol_is_scaled_as_scikit_learn_scales_it():
    """With tol > 0 both stop at the same iteration (tol times the mean column variance)."""
    X = blobs(n=4000, d=4, k=12, seed=2) * np.array([1.0, 10.0, 100.0, 0.1])
    init = X[:12].copy()
    for tol in (1e-1, 1e-2, 1e-4):
        ours = KMeans(12, init=init, max_iter=300, tol=tol, impl="omp").fit(X)
        ref = SkKMeans(12, init=init, n_init=1, max_iter=300, tol=tol, algorithm="lloyd").fit(X)
        assert ours.n_iter_ == ref.n_iter_, tol
        assert ours.report_["tol"] == pytest.approx(tol * np.var(X, axis=0).mean(), rel=1e-12)
    # The scale makes a difference here (else the test could not fail).
    assert KMeans(12, init=init, tol=1e-1, impl="omp").fit(X).n_iter_ < KMeans(12, init=init, tol=0).fit(X).n_iter_


def test_same_as_the_cli(tmp_path):
    """An integer random_state is the CLI's --seed: k-means++ gives the same run."""
    X = blobs(n=2000, d=5, k=7, seed=4)
    path = tmp_path / "x.npy"
    np.save(path, X)
    km = KMeans(7, random_state=11, max_iter=40, tol=0, impl="omp").fit(X)
    r = subprocess.run([KMEANS_BIN, "--impl=omp", f"--input={path}", "--clusters=7", "--init=kmeans++", "--seed=11",
                        "--loops=40", "--report=json"], capture_output=True, text=True, timeout=120, check=True)
    cli = json.loads(r.stdout)
    assert cli["iterations"] == km.n_iter_
    assert cli["inertia"] == km.inertia_  # the same bits
    assert set(cli) <= set(km.report_) and km.report_["source"] == "X"


@pytest.mark.parametrize("metric", ["cosine", "dot"])
@pytest.mark.parametrize("impl", ["seq", "omp"])
def test_metrics_exact_and_consistent(metric, impl):
    X = blobs(n=2000, d=6, k=5, seed=4) - 1.0
    km = KMeans(5, metric=metric, impl=impl, random_state=2, max_iter=50).fit(X)
    c = km.cluster_centers_
    assert np.allclose(np.linalg.norm(c, axis=1), 1, atol=1e-14)
    data = X / np.linalg.norm(X, axis=1, keepdims=True) if metric == "cosine" else X
    sims = data @ c.T
    best = sims.max(axis=1)
    assert np.all(sims[np.arange(len(X)), km.labels_] >= best - 1e-12 * np.abs(best).max())
    mine = sims[np.arange(len(X)), km.labels_]
    objective = np.sum(1 - mine) if metric == "cosine" else -np.sum(mine)
    assert km.inertia_ == pytest.approx(objective, rel=1e-12)
    assert np.array_equal(km.predict(X), km.labels_)
    assert km.score(X) == -km.inertia_
    assert km.report_["metric"] == metric
    with pytest.raises(ValueError, match="metric='manhattan'"):
        KMeans(5, metric="manhattan").fit(X)


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_unit_metrics_tol_does_not_depend_on_the_scale(metric):
    # The centroids have length 1: tol is scaled by the variance of the rows at length 1, so data
    # scaled by a power of two (the same unit rows, bit for bit) stops at the same iteration.
    X = np.random.default_rng(0).normal(size=(2000, 4))
    fits = [KMeans(5, metric=metric, impl="omp", init="first", tol=1e-3).fit(X * s) for s in (1.0, 2.0 ** 10)]
    assert fits[0].n_iter_ == fits[1].n_iter_ > 1
    assert np.array_equal(fits[0].labels_, fits[1].labels_)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert kmeans_gpu._core.mean_variance(X, True) == pytest.approx(unit.var(axis=0).mean(), rel=1e-12)
    batch = kmeans_gpu.batch_kmeans(np.stack([X, X * 2.0 ** 10]), 5, metric=metric, impl="omp", init="first",
                                    tol=1e-3)
    assert batch[3][0] == batch[3][1] == fits[0].n_iter_
    if metric == "cosine":  # transform normalises as the fit does: rows of huge values too (NumPy's norm overflows)
        assert np.array_equal(fits[0].transform(X * 2.0 ** 600), fits[0].transform(X))
        assert np.array_equal(fits[0].transform(X).argmin(axis=1), fits[0].labels_)


def test_initial_centroids_beyond_float_range_are_refused():
    X = np.random.default_rng(1).random((40, 4)).astype(np.float32)
    init = np.full((3, 4), 0.5)
    init[2] = 1e300
    with pytest.raises(ValueError, match="initial centroid 2, coordinate 0: 1e\\+300 is outside float's range"):
        KMeans(3, init=init, n_init=1, impl="omp").fit(X)
    assert np.isfinite(KMeans(3, init=init, n_init=1, impl="omp").fit(X.astype(np.float64)).cluster_centers_).all()


@pytest.mark.parametrize("init, kind", [(None, TypeError), (np.ones((3, 4), dtype=complex), ValueError)])
def test_init_neither_a_name_nor_real_values_is_one_line(init, kind):
    """scikit-learn's check said init=None was "Expected 2D array, got scalar array", over lines."""
    with pytest.raises(kind) as e:
        KMeans(3, init=init, impl="omp").fit(np.random.default_rng(1).random((40, 4)))
    assert "\n" not in str(e.value) and "pass 'k-means++'" in str(e.value)


def test_double_beyond_float_range_is_named_in_float():
    X = np.random.default_rng(1).random((40, 3))
    X[7, 1] = -1e39
    with pytest.raises(ValueError, match="X: value -1e\\+39 at object 7, coordinate 1 is beyond float's range; "
                                         "use precision='double'"):
        KMeans(3, impl="omp", precision="float").fit(X)
    assert np.isfinite(KMeans(3, impl="omp").fit(X).inertia_)


def test_complex_data_is_one_line():
    with pytest.raises(ValueError) as e:
        KMeans(2, impl="omp").fit(np.zeros((8, 2), dtype=complex))
    assert str(e.value) == "Complex data not supported"


def test_batch_kmeans_reads_a_contiguous_batch_in_place(monkeypatch):
    X = np.random.default_rng(2).random((3, 200, 4))
    seen = []
    real = kmeans_gpu._core.batch_fit
    monkeypatch.setattr(kmeans_gpu._core, "batch_fit", lambda rows, *a: seen.append(rows) or real(rows, *a))
    kmeans_gpu.batch_kmeans(X, 3, impl="omp")
    assert np.shares_memory(seen[0], X)  # not a concatenated copy
    kmeans_gpu.batch_kmeans(X[:, ::2], 3, impl="omp")  # (strided: copied)
    assert not np.shares_memory(seen[1], X)


@pytest.mark.parametrize("init", ["first", "k-means++", "array"])
def test_batch_kmeans_equals_separate_fits(init):
    rng = np.random.default_rng(8)
    X = np.stack([blobs(n=1500, d=5, k=4, seed=s) for s in range(3)])
    starts = X[:, 100:104].copy() if init == "array" else init
    kwargs = dict(max_iter=30, random_state=5, impl="omp", metric="cosine" if init == "first" else "euclidean")
    centroids, labels, inertia, n_iter = kmeans_gpu.batch_kmeans(X, 4, init=starts, **kwargs)
    assert centroids.shape == (3, 4, 5) and labels.shape == (3, 1500) and labels.dtype == np.int32
    for b in range(3):
        one = KMeans(4, init=starts[b] if init == "array" else init, **kwargs).fit(X[b])
        assert np.array_equal(centroids[b], one.cluster_centers_) and np.array_equal(labels[b], one.labels_)
        assert inertia[b] == one.inertia_ and n_iter[b] == one.n_iter_
    assert len(set(inertia)) == 3  # three different problems
    if init == "k-means++":  # a RandomState draws each problem's seed in turn, as separate fits would
        kw = dict(kwargs, random_state=np.random.RandomState(7))
        centroids, labels, inertia, n_iter = kmeans_gpu.batch_kmeans(X, 4, init=init, **kw)
        kw["random_state"] = np.random.RandomState(7)
        for b in range(3):
            one = KMeans(4, init=init, **kw).fit(X[b])
            assert np.array_equal(centroids[b], one.cluster_centers_) and inertia[b] == one.inertia_
    bad = X.copy()
    bad[2, 7, 1] = np.nan
    with pytest.raises(ValueError, match="problem 2: .*object 7"):
        kmeans_gpu.batch_kmeans(bad, 4, **kwargs)
    with pytest.raises(ValueError, match="3 dimensions"):
        kmeans_gpu.batch_kmeans(X[0], 4)
    with pytest.raises(ValueError, match=r"shape \(B, n_clusters, d\)"):
        kmeans_gpu.batch_kmeans(X, 4, init=X[0, :4])
    del rng


def test_predict_score_transform():
    X = blobs()
    km = KMeans(6, random_state=0, impl="omp").fit(X)
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    assert km.score(X) == pytest.approx(-km.inertia_, rel=1e-12)
    D = km.transform(X[:50])
    assert D.shape == (50, 6)
    np.testing.assert_array_equal(D.argmin(axis=1), km.labels_[:50])
    # Fewer objects than centroids: predict labels them all the same.
    one = km.predict(X[:1])
    assert one.shape == (1,) and one[0] == km.labels_[0]
    assert kmeans_gpu.last_report["init"] == "predict"


def test_report_and_registry():
    X = blobs()
    km = KMeans(6, init="first", max_iter=5, tol=0, impl="seq").fit(X)
    rep = kmeans_gpu.last_report
    assert rep is km.report_ and rep["impl"] == "seq" and rep["iterations"] == km.n_iter_
    assert len(rep["per_iteration"]) == km.n_iter_
    assert {"h2d", "kernel", "cpu", "d2h", "total", "changed"} <= set(rep["per_iteration"][0])
    assert rep["per_iteration"][0]["changed"] == len(X)
    listed = json.loads(subprocess.run([KMEANS_BIN, "--list"], capture_output=True, text=True, check=True).stdout)
    assert [i["name"] for i in listed] == NAMES
    shaped = kmeans_gpu.implementations(16, 4)
    assert all("runs" in i for i in shaped)


def test_data_used_in_place(monkeypatch):
    """C-contiguous float32/float64 reach the engines without a copy; others are converted once."""
    seen = []
    real = kmeans_gpu._core.fit

    def spy(X, *args, **kwargs):
        seen.append(X)
        return real(X, *args, **kwargs)

    monkeypatch.setattr(kmeans_gpu._core, "fit", spy)
    for dtype in (np.float64, np.float32):
        X = blobs(dtype=dtype)
        KMeans(6, impl="omp").fit(X)
        assert seen[-1] is X and kmeans_gpu._core.data_address(X) == X.ctypes.data
    F = np.asfortranarray(blobs())
    KMeans(6, impl="omp").fit(F)
    assert seen[-1].flags.c_contiguous and not np.shares_memory(seen[-1], F)
    I = (blobs() * 10).astype(np.int64)
    KMeans(6, impl="omp").fit(I)
    assert seen[-1].dtype == np.float64
    X = blobs(dtype=np.float32)
    KMeans(6, impl="omp", precision="double").fit(X)
    assert seen[-1].dtype == np.float64 and kmeans_gpu.last_report["precision"] == "double"
    ro = blobs()
    ro.setflags(write=False)
    assert KMeans(6, impl="omp").fit(ro).labels_.shape == (len(ro),)


def test_reproducible():
    X = blobs(dtype=np.float32)
    a = KMeans(6, random_state=1, n_init=3, init="random", impl="omp").fit(X)
    b = KMeans(6, random_state=1, n_init=3, init="random", impl="omp", n_threads=1).fit(X)
    assert a.cluster_centers_.tobytes() == b.cluster_centers_.tobytes() and a.inertia_ == b.inertia_


def test_kmeans_parallel_init():
    X = blobs()
    a = KMeans(6, random_state=1, init="k-means||", impl="omp").fit(X)
    b = KMeans(6, random_state=1, init="kmeans||", impl="omp", n_threads=1).fit(X)
    assert a.report_["init"] == "kmeans||"
    assert a.cluster_centers_.tobytes() == b.cluster_centers_.tobytes() and a.inertia_ == b.inertia_
    sk = SkKMeans(6, random_state=0, n_init=1).fit(X)
    assert a.inertia_ <= sk.inertia_ * (1 + 1e-6)


# -- bad input --------------------------------------------------------------------------------

def test_bad_values_name_the_object():
    for bad, word in ((np.nan, "NaN"), (np.inf, "Inf")):
        X = blobs()
        X[17, 3] = bad
        with pytest.raises(ValueError, match=f"X: value {word} at object 17, coordinate 3"):
            KMeans(6, impl="omp").fit(X)
        with pytest.raises(ValueError, match=word):
            KMeans(6, impl="omp", tol=0).fit(X)
    km = KMeans(6, impl="omp").fit(blobs())
    X = blobs()[:10]
    X[2, 0] = np.nan
    for method in (km.predict, km.transform, km.score):
        with pytest.raises(ValueError, match="X: value NaN at object 2, coordinate 0"):
            method(X)


@pytest.mark.parametrize("params,cli_args", [
    (dict(n_clusters=6, block=100), ["--block=100"]),
    (dict(n_clusters=6, threshold=2.0), ["--threshold=2"]),
    (dict(n_clusters=6, impl="nope"), ["--impl=nope"]),
])
def test_bad_parameters_give_the_cli_message(params, cli_args):
    with pytest.raises(ValueError) as e:
        KMeans(**params).fit(blobs())
    assert str(e.value) == cli_error(*cli_args)


def test_more_clusters_than_objects_gives_the_cli_message():
    with pytest.raises(ValueError) as e:
        KMeans(8, impl="omp").fit(blobs()[:5])
    assert str(e.value) == cli_error("--objects=5", "--clusters=8", "--impl=omp")


@pytest.mark.parametrize("message,want", [
    ("--clusters=8: must be between 1 and the number of objects (n_samples = 5)",
     "n_clusters=8: must be between 1 and the number of objects (n_samples = 5)"),
    ("--impl=omp cannot read data on the GPU", "impl=omp cannot read data on the GPU"),
    ("--loops=0 and --n-init=0, --seed: 'x', --device-memory=1 --weights --threads=2 --gpus=3",
     "max_iter=0 and n_init=0, random_state: 'x', device_memory=1 sample_weight n_threads=2 n_gpus=3"),
    ("--init-rounds=0, --fused-config=x, --input, a--clusters, --clustersx", None),
])
def test_messages_name_the_parameters(message, want):
    """The core's messages name the command line's options; the module shows its parameters."""
    assert kmeans_gpu._core.python_names(message) == (message if want is None else want)
    with pytest.raises(ValueError) as e:
        KMeans(8, impl="omp").fit(blobs()[:5])
    assert "n_clusters=8" in str(e.value) and "--" not in str(e.value)


@pytest.mark.parametrize("params,exc,match", [
    (dict(n_clusters=0), ValueError, "n_clusters=0"),
    (dict(n_clusters=2.5), TypeError, "n_clusters"),
    (dict(max_iter=0), ValueError, "max_iter=0"),
    (dict(n_init=0), ValueError, "n_init=0"),
    (dict(tol=-1.0), ValueError, "tol"),
    (dict(tol=float("nan")), ValueError, "tol"),
    (dict(n_threads=0), ValueError, "n_threads=0"),
    (dict(init="kmeans+++"), ValueError, "init="),
    (dict(init=lambda X, k, random_state: X[:k]), TypeError, "callable"),
    (dict(init=np.zeros((3, 8))), ValueError, r"shape \(3, 8\)"),
    (dict(init=np.zeros((6, 2))), ValueError, r"shape \(6, 2\)"),
    (dict(precision="half"), ValueError, "precision"),
    (dict(impl=3), TypeError, "impl"),
    (dict(random_state=-1), ValueError, "random_state"),
    (dict(n_gpus=0), ValueError, "n_gpus=0"),
    (dict(n_gpus=1.5), TypeError, "n_gpus"),
    (dict(n_gpus=2), ValueError, "n_gpus=2: impl=omp runs on the CPU"),
    (dict(device_memory=0), ValueError, "device_memory=0"),
    (dict(device_memory="8G"), TypeError, "device_memory"),
])
def test_bad_parameters(params, exc, match):
    with pytest.raises(exc, match=match):
        KMeans(**{"n_clusters": 6, "impl": "omp", **params}).fit(blobs())


def test_bad_data():
    with pytest.raises(ValueError, match="invalid shape 0 x 8"):
        KMeans(2, impl="omp").fit(np.zeros((0, 8)))
    with pytest.raises(ValueError, match="0 feature"):
        KMeans(2, impl="omp").fit(np.zeros((8, 0)))
    with pytest.raises(ValueError, match="2D|2-dimensional"):
        KMeans(2, impl="omp").fit(np.zeros(8))
    with pytest.raises(TypeError, match="[Ss]parse"):
        KMeans(2, impl="omp").fit(scipy.sparse.random(20, 4, density=0.5, format="csr"))
    with pytest.raises(ValueError, match="[Cc]omplex"):
        KMeans(2, impl="omp").fit(np.zeros((8, 2), dtype=complex))
    with pytest.raises(ValueError):
        KMeans(2, impl="omp").fit(np.array([["a", "b"]] * 8))
    with pytest.raises(ValueError, match="too large"):
        KMeans(2, impl="omp").fit(np.full((8, 2), 1e200))
    km = KMeans(2, impl="omp").fit(blobs())
    with pytest.raises(ValueError, match="X has 3 features, but KMeans is expecting 8"):
        km.predict(np.zeros((4, 3)))


@pytest.mark.skipif(GPU, reason="a GPU is present")
def test_gpu_implementation_without_gpu():
    with pytest.raises(ValueError, match="needs a CUDA GPU") as e:
        KMeans(6, impl="fused").fit(blobs())
    assert str(e.value) == cli_error("--impl=fused", "--objects=100")


def test_ctrl_c_interrupts_a_long_fit():
    """SIGINT during a fit that would run for minutes: KeyboardInterrupt within seconds."""
    code = textwrap.dedent("""
        import sys, numpy as np, kmeans_gpu
        X = np.random.default_rng(0).random((400_000, 8))
        print("fitting", flush=True)
        try:
            kmeans_gpu.KMeans(64, init="first", max_iter=100_000, tol=0, threshold=0, impl="seq").fit(X)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(3)
        print("finished", flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert p.stdout.readline().strip() == "fitting"
    time.sleep(1.5)
    start = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3 and "interrupted" in out, out
    assert time.monotonic() - start < 20


def test_verbose_progress_only_on_a_terminal():
    """verbose > 0: the CLI's progress line on stderr when it is a terminal; verbose=0 or another
    stderr: nothing."""
    code = textwrap.dedent("""
        import os, numpy as np, kmeans_gpu
        X = np.random.default_rng(0).random((20_000, 4))
        for verbose in (1, 0):
            kmeans_gpu.KMeans(12, init="k-means++", max_iter=3, tol=0, impl="omp", verbose=verbose).fit(X)
            os.write(2, b"|fitted|")
    """)
    env = dict(os.environ, KMEANS_PROGRESS_AFTER="0")
    master, terminal = os.openpty()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=terminal, env=env)
    os.close(terminal)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the interpreter has closed the terminal
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    assert p.wait(timeout=60) == 0, got
    verbose, quiet, rest = got.decode().split("|fitted|")
    assert "\rkmeans_gpu: k-means++ " in verbose and "\rkmeans_gpu: iterations 100%  3 of 3" in verbose, verbose
    assert quiet == "" and rest == "", got
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stderr == "|fitted||fitted|", r.stderr


# -- GPU ----------------------------------------------------------------------------------------

@needs_gpu
@pytest.mark.parametrize("impl", GPU_NAMES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gpu_implementations_equal_seq(impl, dtype):
    X = blobs(n=20000, d=16, k=20, dtype=dtype, seed=5)
    init = X[:20].copy()
    ref = KMeans(20, init=init, max_iter=30, tol=0, impl="seq").fit(X)
    got = KMeans(20, init=init, max_iter=30, tol=0, impl=impl).fit(X)
    again = KMeans(20, init=init, max_iter=30, tol=0, impl=impl).fit(X)
    assert got.report_["device"] != "cpu"
    assert got.n_iter_ == ref.n_iter_
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    assert abs(got.inertia_ - ref.inertia_) <= (1e-9 if dtype == np.float64 else 1e-4) * ref.inertia_
    assert got.cluster_centers_.tobytes() == again.cluster_centers_.tobytes()
    np.testing.assert_array_equal(got.predict(X[:3]), ref.labels_[:3])


@needs_gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gpu_several_and_streamed(dtype):
    # Every GPU of the machine (n_gpus), and a device_memory cap below the data (streamed): the
    # one-GPU, in-memory bits.
    import subprocess
    X = blobs(n=200000, d=16, k=20, dtype=dtype, seed=7)  # 25.6 MB in double: twice that on the device
    init = X[:20].copy()
    one = KMeans(20, init=init, max_iter=8, tol=0, impl="fused").fit(X)
    gpus = len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines()) or 1
    split = KMeans(20, init=init, max_iter=8, tol=0, impl="fused", n_gpus=gpus).fit(X)
    assert split.report_["gpus"] == gpus
    streamed = KMeans(20, init=init, max_iter=8, tol=0, impl="fused", device_memory=16 << 20).fit(X)
    assert "streamed" in streamed.report_["path"]
    for got in (split, streamed):
        assert got.cluster_centers_.tobytes() == one.cluster_centers_.tobytes()
        np.testing.assert_array_equal(got.labels_, one.labels_)
        assert got.inertia_ == one.inertia_
    np.testing.assert_array_equal(KMeans(20, init=init, max_iter=8, tol=0, impl="fused",
                                         device_memory=16 << 20).fit(X).predict(X), one.labels_)


def test_release_device_memory():
    kmeans_gpu.release_device_memory()  # with or without a GPU: no error
    km = KMeans(4, impl="omp", init="first", max_iter=3).fit(blobs())
    kmeans_gpu.release_device_memory()
    assert km.n_iter_ >= 1


@needs_gpu
def test_gpu_default_and_kmeanspp():
    X = blobs(n=20000, d=16, k=20, seed=6)
    km = KMeans(20, random_state=2).fit(X)
    assert km.report_["impl"] == "fused"
    cpu = KMeans(20, random_state=2, max_iter=1, impl="omp").fit(X)
    gpu = KMeans(20, random_state=2, max_iter=1, impl="fused").fit(X)
    np.testing.assert_array_equal(gpu.labels_, cpu.labels_)  # the same k-means++ centres, then one step
