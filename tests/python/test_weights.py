"""sample_weight in the Python module: scikit-learn's weighted KMeans (centroids, labels,
inertia, iterations), the CLI's --weights, the accepted forms, score, and every bad weight.
Run by ctest with the module's other tests."""

import json
import os
import subprocess
import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import make_blobs

from kmeans_gpu import KMeans

KMEANS_BIN = os.environ.get("KMEANS_BIN", os.path.join(os.path.dirname(__file__), "../../build/kmeans"))


def data(n=3000, d=6, k=5, seed=0):
    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=1.5, random_state=seed)
    rng = np.random.default_rng(seed)
    w = rng.random(n) * 3
    w[rng.random(n) < 0.1] = 0
    return np.ascontiguousarray(X), w


@pytest.mark.parametrize("impl", ["seq", "omp"])
def test_agrees_with_scikit_learn(impl):
    """Same init, n_init=1, tol=0: the same iterations and labels; centroids and inertia to 1e-9."""
    X, w = data()
    init = X[::600][:5].copy()
    ours = KMeans(5, init=init, max_iter=100, tol=0, impl=impl).fit(X, sample_weight=w)
    ref = SkKMeans(5, init=init, n_init=1, max_iter=100, tol=0, algorithm="lloyd").fit(X, sample_weight=w)
    assert ours.n_iter_ == ref.n_iter_
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert abs(ours.inertia_ - ref.inertia_) <= 1e-9 * ref.inertia_
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-9 * np.abs(X).max())
    assert ours.report_["sample_weights"] is True
    # The weights make a difference here (else the test could not fail).
    plain = KMeans(5, init=init, max_iter=100, tol=0, impl=impl).fit(X)
    assert np.abs(plain.cluster_centers_ - ours.cluster_centers_).max() > 1e-3
    # score: minus the weighted inertia, as scikit-learn's.
    assert ours.score(X, sample_weight=w) == pytest.approx(ref.score(X, sample_weight=w), rel=1e-9)


def test_forms_of_sample_weight():
    """A list, a number, integers and another float dtype are taken; weights of 1 give the
    unweighted bits; fit_predict and fit_transform pass them on."""
    X, w = data(n=800, seed=3)
    km = dict(n_clusters=4, random_state=1, impl="omp", max_iter=30)
    ref = KMeans(**km).fit(X, sample_weight=w)
    assert np.array_equal(KMeans(**km).fit(X, sample_weight=list(w)).cluster_centers_, ref.cluster_centers_)
    assert np.array_equal(KMeans(**km).fit_predict(X, sample_weight=w), ref.labels_)
    assert KMeans(**km).fit_transform(X, sample_weight=w).shape == (800, 4)
    plain = KMeans(**km).fit(X)
    for ones in (np.ones(800), 1, 1.0, np.ones(800, np.int64), np.ones(800, np.float32)):
        got = KMeans(**km).fit(X, sample_weight=ones)
        assert np.array_equal(got.cluster_centers_, plain.cluster_centers_)
        assert got.inertia_ == plain.inertia_
    # A float32 fit takes its weights in float32.
    X32 = X.astype(np.float32)
    got = KMeans(**km).fit(X32, sample_weight=w)
    assert got.cluster_centers_.dtype == np.float32 and got.report_["sample_weights"] is True


def test_same_as_the_cli(tmp_path):
    """--weights=PATH is sample_weight: the same bits."""
    X, w = data(n=2000, seed=5)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "w.npy", w)
    km = KMeans(5, random_state=7, max_iter=40, tol=0, impl="omp").fit(X, sample_weight=w)
    r = subprocess.run([KMEANS_BIN, "--impl=omp", f"--input={tmp_path / 'x.npy'}", f"--weights={tmp_path / 'w.npy'}",
                        "--clusters=5", "--init=kmeans++", "--seed=7", "--loops=40", "--report=json"],
                       capture_output=True, text=True, timeout=120, check=True)
    cli = json.loads(r.stdout)
    assert cli["iterations"] == km.n_iter_ and cli["inertia"] == km.inertia_ and cli["sample_weights"] is True


@pytest.mark.parametrize("bad,message", [
    (lambda n: -np.ones(n), "sample weight 0 is -1"),
    (lambda n: np.r_[np.ones(n - 1), np.nan], f"sample weight 299 is nan"),
    (lambda n: np.r_[np.ones(n - 1), np.inf], "sample weight 299 is inf"),
    (lambda n: np.zeros(n), "the sample weights are all 0"),
    (lambda n: np.ones(n - 1), "sample_weight has shape (299,), not (300,)"),
    (lambda n: np.ones((n, 1)), "sample_weight has shape (300, 1), not (300,)"),
])
def test_bad_weights_raise_one_line(bad, message):
    X, _ = data(n=300)
    with pytest.raises(ValueError) as e:
        KMeans(3, impl="omp").fit(X, sample_weight=bad(300))
    assert message in str(e.value)


def test_not_a_number_type():
    X, w = data(n=300)
    with pytest.raises(TypeError, match="not a real number type"):
        KMeans(3, impl="omp").fit(X, sample_weight=np.array(["a"] * 300))
    with pytest.raises(TypeError, match="complex128 is not a real number type"):
        KMeans(3, impl="omp").fit(X, sample_weight=1 + 2j)


def test_a_number_beyond_float32_is_named_without_a_warning():
    X, w = data(n=300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (NumPy's overflow warning would be one)
        with pytest.raises(ValueError, match="1e\\+300 does not fit X's float32"):
            KMeans(3, impl="omp").fit(X.astype(np.float32), sample_weight=1e300)
