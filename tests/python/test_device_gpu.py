"""The module's device path on a GPU (CuPy arrays, PyTorch CUDA tensors): each fit the host array's
bits, predict, output="device" (and through DLPack, as for JAX), batch_kmeans's problems together equal to their separate fits, a
batch of device arrays and float16 device arrays as the host's.
Skipped, with the reason, without a GPU, CuPy or PyTorch (CI; the refusals: test_device_arrays.py)."""

import numpy as np
import pytest

import kmeans_gpu
from kmeans_gpu import KMeans

cp = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")
if not kmeans_gpu.gpu_available() or not torch.cuda.is_available():
    pytest.skip("no usable GPU", allow_module_level=True)


def libraries(X):
    return (("cupy", cp.asarray(X), cp.ndarray, lambda a: a.get()),
            ("torch", torch.as_tensor(X, device="cuda"), torch.Tensor, lambda a: a.cpu().numpy()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,k", [(20011, 64, 50), (5003, 2, 16), (3001, 128, 300)])
@pytest.mark.parametrize("init", ["k-means++", "random", "first"])
def test_device_fit_is_the_host_fit(dtype, n, d, k, init):
    X = np.random.default_rng(3).random((n, d)).astype(dtype)
    kw = dict(init=init, random_state=4, max_iter=20, impl="fused")
    host = KMeans(k, **kw).fit(X)
    for name, dev, _, _ in libraries(X):
        got = KMeans(k, **kw).fit(dev)
        assert np.array_equal(got.cluster_centers_, host.cluster_centers_), name
        assert np.array_equal(got.labels_, host.labels_) and got.inertia_ == host.inertia_, name
        assert got.n_iter_ == host.n_iter_, name
        assert np.array_equal(np.asarray(got.predict(dev)), host.predict(X)), name


def test_output_device():
    X = np.random.default_rng(5).random((7001, 48)).astype(np.float32)
    host = KMeans(30, init="k-means++", random_state=4, max_iter=20, impl="fused").fit(X)
    for name, dev, kind, back in libraries(X):
        got = KMeans(30, init="k-means++", random_state=4, max_iter=20, impl="fused", output="device").fit(dev)
        assert isinstance(got.cluster_centers_, kind) and isinstance(got.labels_, kind), name
        assert np.array_equal(back(got.cluster_centers_), host.cluster_centers_), name
        assert np.array_equal(back(got.labels_), host.labels_), name
        labels = got.predict(dev)
        assert isinstance(labels, kind) and np.array_equal(back(labels), host.labels_), name
        assert got.score(dev) == host.score(X), name


class DLPackOnly:
    """An array that describes itself through DLPack alone, as JAX's do (no JAX on the GPU machine):
    a CuPy array's capsule, and an array API namespace whose from_dlpack is CuPy's."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __array_namespace__(self, api_version=None):
        return cp


def test_output_device_through_dlpack():
    X = np.random.default_rng(5).random((7001, 48)).astype(np.float32)
    host = KMeans(30, init="k-means++", random_state=4, max_iter=20, impl="fused").fit(X)
    got = KMeans(30, init="k-means++", random_state=4, max_iter=20, impl="fused", output="device").fit(
        DLPackOnly(cp.asarray(X)))
    assert isinstance(got.cluster_centers_, cp.ndarray) and isinstance(got.labels_, cp.ndarray)
    assert np.array_equal(got.cluster_centers_.get(), host.cluster_centers_)
    assert np.array_equal(got.labels_.get(), host.labels_) and got.labels_.dtype == np.int32
    Xb = np.random.default_rng(6).random((3, 2001, 16)).astype(np.float32)
    want = kmeans_gpu.batch_kmeans(Xb, 10, init="k-means++", random_state=2, max_iter=20, impl="fused")
    c, labels, _, _ = kmeans_gpu.batch_kmeans(DLPackOnly(cp.asarray(Xb)), 10, init="k-means++", random_state=2,
                                               max_iter=20, impl="fused", output="device")
    assert np.array_equal(c.get(), want[0]) and np.array_equal(labels.get(), want[1])
    # the values handed over once, to any consumer, on the GPU named
    from kmeans_gpu import _core
    values = np.arange(12, dtype=np.float64).reshape(3, 4)
    result = _core.DeviceResult(values, 0)
    assert tuple(result.__dlpack_device__()) == (2, 0)
    tensor = torch.from_dlpack(result)
    assert tensor.is_cuda and np.array_equal(tensor.cpu().numpy(), values)
    with pytest.raises(BufferError, match="already handed over"):
        result.__dlpack__()
    with pytest.raises(BufferError, match=r"device \(1, 0\) was asked for"):  # (no copy to the host is made)
        _core.DeviceResult(values, 0).__dlpack__(dl_device=(1, 0))
    capsule = _core.DeviceResult(np.zeros(5, np.int32), 0).__dlpack__()
    del capsule  # (a capsule nobody consumed frees its memory)


def test_batch_together_equals_separate_fits():
    Xb = np.random.default_rng(6).random((6, 4099, 32)).astype(np.float32)
    c, l, inertia, n_iter = kmeans_gpu.batch_kmeans(Xb, 20, init="k-means++", random_state=2, max_iter=40, impl="fused")
    assert kmeans_gpu.last_report["together"] is True
    for b in range(6):
        one = KMeans(20, init="k-means++", random_state=2, max_iter=40, impl="fused").fit(Xb[b])
        assert np.array_equal(c[b], one.cluster_centers_) and np.array_equal(l[b], one.labels_), b
        assert inertia[b] == one.inertia_ and n_iter[b] == one.n_iter_, b


@pytest.mark.parametrize("dtype,metric", [(np.float32, "euclidean"), (np.float16, "euclidean"),
                                          (np.float32, "cosine"), (np.float16, "dot")])
def test_batch_of_device_arrays_equals_the_host_batch(dtype, metric):
    Xb = np.random.default_rng(7).random((4, 3001, 64)).astype(dtype)
    kw = dict(init="k-means++", random_state=3, max_iter=30, impl="fused", metric=metric, tol=0)
    want = kmeans_gpu.batch_kmeans(Xb, 20, **kw)
    for name, dev, kind, back in libraries(Xb):
        got = kmeans_gpu.batch_kmeans(dev, 20, **kw)
        assert kmeans_gpu.last_report["together"] is True, name
        for w, g in zip(want, got):
            assert np.array_equal(w, g), name
        c, labels, _, _ = kmeans_gpu.batch_kmeans(dev, 20, output="device", **kw)
        assert isinstance(c, kind) and isinstance(labels, kind), name
        assert np.array_equal(back(c), want[0]) and np.array_equal(back(labels), want[1]), name


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_device_fit_of_each_metric_is_the_host_fit(metric):
    X = np.random.default_rng(9).random((6007, 128)).astype(np.float32) - 0.3
    kw = dict(init="k-means++", random_state=4, max_iter=20, impl="fused", metric=metric, tol=0)
    host = KMeans(64, **kw).fit(X)
    for name, dev, _, _ in libraries(X):
        got = KMeans(64, **kw).fit(dev)
        assert np.array_equal(got.cluster_centers_, host.cluster_centers_), name
        assert np.array_equal(got.labels_, host.labels_) and got.inertia_ == host.inertia_, name
        assert np.array_equal(np.asarray(got.predict(dev)), host.predict(X)), name


class DLPackOnly:
    """A CUDA tensor seen through DLPack alone (as a JAX array on the GPU shows itself)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__()

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_dlpack_only_device_array_is_the_host_fit():
    # (the default tol: its scale summed on the host from a copy, the host fit's bits)
    X = np.random.default_rng(10).random((5003, 64)).astype(np.float32)
    kw = dict(init="k-means++", random_state=4, max_iter=100, impl="fused")
    host = KMeans(40, **kw).fit(X)
    dev = DLPackOnly(torch.as_tensor(X, device="cuda"))
    got = KMeans(40, **kw).fit(dev)
    assert np.array_equal(got.cluster_centers_, host.cluster_centers_)
    assert np.array_equal(got.labels_, host.labels_) and got.inertia_ == host.inertia_
    c, l, inertia, _ = kmeans_gpu.batch_kmeans(DLPackOnly(torch.as_tensor(X.reshape(1, 5003, 64), device="cuda")),
                                               40, **kw)
    assert np.array_equal(c[0], host.cluster_centers_) and np.array_equal(l[0], host.labels_)


def test_array_on_another_gpu_or_host_memory_is_refused():
    with pytest.raises(ValueError, match="not CUDA device memory"):
        kmeans_gpu._core.device_ready(np.zeros((100, 4), np.float32).ctypes.data, 100, 4, True)
    if torch.cuda.device_count() > 1:
        Y = torch.rand((1000, 16), device="cuda:1")
        with pytest.raises(ValueError, match="memory of GPU 1"):
            KMeans(3, impl="fused").fit(Y)


def test_float16_device_array_is_its_float32_fit():
    X = np.random.default_rng(8).random((5003, 64)).astype(np.float16)
    host = KMeans(40, init="k-means++", random_state=4, max_iter=20, impl="fused").fit(X)
    for name, dev, _, _ in libraries(X):
        got = KMeans(40, init="k-means++", random_state=4, max_iter=20, impl="fused").fit(dev)
        assert np.array_equal(got.cluster_centers_, host.cluster_centers_), name
        assert np.array_equal(got.labels_, host.labels_) and got.inertia_ == host.inertia_, name
        assert got.report_["input_dtype"] == "float16", name
