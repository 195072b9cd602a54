"""float16 and bfloat16 data in the Python module: the results are those of the data converted
exactly to float32 (labels, centroids, inertia, distances), the caller's array is left alone, the
report says what was read, and arrays in GPU memory that cannot be read end in one clear error."""

import math
import re

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import kmeans_gpu
from kmeans_gpu import KMeans
from kmeans_gpu import _input

GPU_NAMES = [i["name"] for i in kmeans_gpu.implementations() if i["where"] == "gpu"]
needs_gpu = pytest.mark.skipif(not kmeans_gpu.gpu_available(), reason="no usable GPU")


def blobs16(n=2000, d=6, seed=0):
    X, _ = make_blobs(n_samples=n, n_features=d, centers=5, cluster_std=1.5, random_state=seed)
    return X.astype(np.float16)


def assert_same_fit(a, b):
    assert a.cluster_centers_.dtype == b.cluster_centers_.dtype
    assert a.cluster_centers_.tobytes() == b.cluster_centers_.tobytes()
    assert np.array_equal(a.labels_, b.labels_)
    assert a.inertia_ == b.inertia_ and a.n_iter_ == b.n_iter_


def reference_value(bits, exponent_bits, fraction_bits):
    """A 16-bit pattern's value by its format's definition, in Python's float (no bit tricks)."""
    bias = (1 << (exponent_bits - 1)) - 1
    e = (bits >> fraction_bits) & ((1 << exponent_bits) - 1)
    f = bits & ((1 << fraction_bits) - 1)
    sign = -1.0 if bits & 0x8000 else 1.0
    if e == (1 << exponent_bits) - 1:
        return sign * math.inf if f == 0 else math.nan
    if e == 0:
        return sign * math.ldexp(f, 1 - bias - fraction_bits)
    return sign * math.ldexp(f + (1 << fraction_bits), e - bias - fraction_bits)


@pytest.mark.parametrize("name,exponent_bits,fraction_bits", [("float16", 5, 10), ("bfloat16", 8, 7)])
def test_every_pattern_converts_exactly(name, exponent_bits, fraction_bits):
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = _input._to_float32(bits.view(np.float16) if name == "float16" else bits, name)
    assert got.dtype == np.float32
    for p in range(65536):
        want = reference_value(p, exponent_bits, fraction_bits)
        value = float(got[p])
        if math.isnan(want):
            assert math.isnan(value), hex(p)
        else:
            assert value == want and math.copysign(1, value) == math.copysign(1, want), hex(p)
    if name == "float16":  # and as numpy converts float16, bit for bit (NaN payloads included)
        assert np.array_equal(got.view(np.uint32), bits.view(np.float16).astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("impl", ["seq", "omp"])
def test_float16_fit_equals_the_float32_fit(impl):
    X = blobs16()
    before = X.copy()
    X.setflags(write=False)  # nothing may write to it (a write would raise)
    params = dict(n_clusters=5, init="k-means++", random_state=2, impl=impl, n_init=2)
    a = KMeans(**params).fit(X)
    b = KMeans(**params).fit(X.astype(np.float32))
    assert_same_fit(a, b)
    assert a.cluster_centers_.dtype == np.float32
    assert a.report_["input_dtype"] == "float16" and a.report_["precision"] == "float"
    assert b.report_["input_dtype"] == "float32"
    assert np.array_equal(X.view(np.uint16), before.view(np.uint16)) and not X.flags.writeable
    Y = blobs16(n=300, seed=5)
    labels = a.predict(Y)
    assert kmeans_gpu.last_report["input_dtype"] == "float16"
    assert np.array_equal(labels, b.predict(Y.astype(np.float32)))
    assert a.score(Y) == b.score(Y.astype(np.float32))
    assert np.array_equal(a.transform(Y), b.transform(Y.astype(np.float32)))
    assert np.array_equal(KMeans(**params).fit_predict(X), a.labels_)
    # precision="double" converts exactly again: the float32 data's double fit.
    c = KMeans(**params, precision="double").fit(X)
    assert_same_fit(c, KMeans(**params, precision="double").fit(X.astype(np.float32)))
    assert c.cluster_centers_.dtype == np.float64 and c.report_["input_dtype"] == "float16"


def test_float16_views_and_fortran_order():
    X = blobs16()
    F = np.asfortranarray(X)
    strided = np.repeat(X, 2, axis=1)[:, ::2]  # not contiguous
    want = KMeans(5, impl="omp", random_state=1).fit(X.astype(np.float32))
    for Z in (F, strided):
        assert_same_fit(KMeans(5, impl="omp", random_state=1).fit(Z), want)


def test_float16_nan_and_inf_give_the_engines_message():
    X = blobs16()
    X[11, 3] = np.inf
    with pytest.raises(ValueError, match="Inf at object 11, coordinate 3"):
        KMeans(5, impl="omp").fit(X)


class _Float16Tensor:
    """A CPU tensor of another library: a dtype that is not NumPy's, data through __array__."""

    class _Dtype:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return f"torch.{self.name}"

    def __init__(self, array, name="float16"):
        self.array, self.dtype = array, self._Dtype(name)

    def __array__(self, dtype=None):
        if self.dtype.name == "bfloat16":
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self.array if dtype is None else self.array.astype(dtype)


def test_objects_read_through_array():
    X = blobs16()
    want = KMeans(5, impl="omp", random_state=1).fit(X.astype(np.float32))
    got = KMeans(5, impl="omp", random_state=1).fit(_Float16Tensor(X))
    assert_same_fit(got, want)
    assert got.report_["input_dtype"] == "float16"
    with pytest.raises(TypeError, match="torch.bfloat16 cannot be read by NumPy; convert it to float32"):
        KMeans(5, impl="omp").fit(_Float16Tensor(X, "bfloat16"))


def test_dataframe_keeps_its_column_names():
    pd = pytest.importorskip("pandas")
    X = blobs16()
    df = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])])
    km = KMeans(5, impl="omp", random_state=1).fit(df)
    assert_same_fit(km, KMeans(5, impl="omp", random_state=1).fit(X.astype(np.float32)))
    assert list(km.feature_names_in_) == list(df.columns) and km.report_["input_dtype"] == "float16"


def test_ml_dtypes_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    X = blobs16().astype(np.float32).astype(ml_dtypes.bfloat16)
    before = X.copy()
    km = KMeans(5, impl="omp", random_state=1).fit(X)
    assert_same_fit(km, KMeans(5, impl="omp", random_state=1).fit(X.astype(np.float32)))
    assert km.report_["input_dtype"] == "bfloat16" and km.cluster_centers_.dtype == np.float32
    assert X.tobytes() == before.tobytes()


def test_plain_two_byte_void_is_bfloat16_as_the_cli_reads_it():
    # np.load of a bfloat16 .npy without ml_dtypes gives a two-byte void ('|V2'): bfloat16's bits
    f32 = blobs16().astype(np.float32)
    bits = (f32.view(np.uint32) >> 16).astype(np.uint16)  # (truncated: each a bfloat16 value)
    X = bits.view(np.dtype("V2"))
    exact = (bits.astype(np.uint32) << 16).view(np.float32)
    km = KMeans(5, impl="omp", random_state=1).fit(X)
    assert_same_fit(km, KMeans(5, impl="omp", random_state=1).fit(exact))
    assert km.report_["input_dtype"] == "bfloat16"


# -- arrays in GPU memory -----------------------------------------------------------------------

class _CupyLike:
    """Like cupy.ndarray: the CUDA array interface, and no implicit copy to NumPy."""
    dtype = np.dtype(np.float32)
    shape = (10, 2)
    __cuda_array_interface__ = {"shape": (10, 2), "typestr": "<f4", "data": (0, False), "version": 3}

    def __array__(self, dtype=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()`")


class _TorchCudaLike:
    """Like a CUDA torch.Tensor that requires grad: the interface itself refuses."""
    dtype = "torch.float16"

    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")

    def __array__(self, dtype=None):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu()")


class _DlpackDevice:
    """A DLPack producer on a CUDA device (device type 2) that NumPy cannot read."""

    def __init__(self, readable=None):
        self.readable = readable

    def __dlpack_device__(self):
        return (2, 0)

    def __array__(self, dtype=None):
        if self.readable is None:
            raise RuntimeError("device memory")
        return self.readable


# A CUDA array is read in place by the rungs that can (tests/python/test_device_arrays.py); omp
# cannot, and says so; one whose interface refuses (a torch tensor that requires grad) and
# DLPack-only device memory are one TypeError each; transform reads host arrays only.
@pytest.mark.parametrize("X,kind,words", [
    (_CupyLike(), ValueError, "impl=omp cannot read data on the GPU"),
    (_TorchCudaLike(), TypeError, "pass X.detach()"),
    (_DlpackDevice(), TypeError, "in GPU memory; kmeans_gpu reads host arrays: copy it to the host")],
    ids=["cupy", "torch", "dlpack"])
def test_gpu_arrays_are_one_clear_error(X, kind, words):
    with pytest.raises(kind, match=re.escape(words)):
        KMeans(2, impl="omp").fit(X)
    km = KMeans(2, impl="omp").fit(np.arange(20, dtype=np.float32).reshape(10, 2))
    for method in (km.predict, km.score):
        with pytest.raises(kind, match=re.escape(words)):
            method(X)
    with pytest.raises(TypeError, match="in GPU memory"):
        km.transform(X)


def test_device_arrays_that_copy_themselves_still_work():
    X = blobs16()  # as JAX's arrays: on the device, and __array__ copies them to the host
    got = KMeans(5, impl="omp", random_state=1).fit(_DlpackDevice(readable=X))
    assert_same_fit(got, KMeans(5, impl="omp", random_state=1).fit(X.astype(np.float32)))


@needs_gpu
@pytest.mark.parametrize("impl", GPU_NAMES)
def test_gpu_implementations_on_float16(impl):
    X = blobs16(n=20000)
    got = KMeans(5, impl=impl, random_state=3).fit(X)
    assert got.report_["device"] != "cpu" and got.report_["input_dtype"] == "float16"
    assert_same_fit(got, KMeans(5, impl=impl, random_state=3).fit(X.astype(np.float32)))
