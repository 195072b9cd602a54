"""X in GPU memory (``__cuda_array_interface__``: CuPy arrays, PyTorch CUDA tensors): what the
estimator accepts and refuses before the engines read it. The rows' address of these stand-ins is
never dereferenced: every case here is refused first (the GPU tests fit real device data)."""

import numpy as np
import pytest

import kmeans_gpu
from kmeans_gpu import KMeans


class OnDevice:
    """A stand-in for a CUDA array: only its interface, pointing at nothing readable."""

    def __init__(self, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (0x1000, False), "version": 3}


def test_refused_where_it_cannot_be_read():
    X = OnDevice((500, 4))
    for impl in ("seq", "omp"):
        with pytest.raises(ValueError, match=f"^impl={impl} cannot read data on the GPU"):
            KMeans(3, impl=impl, tol=0).fit(X)
    with pytest.raises(ValueError, match="sample weights need the data on the host"):
        KMeans(3, impl="omp", tol=0).fit(X, sample_weight=np.ones(500))
    fitted = KMeans(3, impl="omp").fit(np.random.default_rng(0).random((500, 4)))
    with pytest.raises(ValueError, match="cannot read data on the GPU"):
        fitted.predict(X)
    with pytest.raises(ValueError, match="expecting 4 features"):
        fitted.predict(OnDevice((500, 5)))


def test_shapes_and_types_named():
    with pytest.raises(TypeError, match="float32 or float64 there"):
        KMeans(3, tol=0).fit(OnDevice((500, 4), "<f2"))
    with pytest.raises(ValueError, match="not C-contiguous"):
        KMeans(3, tol=0).fit(OnDevice((500, 4), "<f4", (4, 2000)))
    with pytest.raises(ValueError, match="a 2-D"):
        KMeans(3, tol=0).fit(OnDevice((5, 100, 4)))
    with pytest.raises(ValueError, match="precision='double' with X of float32"):
        KMeans(3, tol=0, precision="double").fit(OnDevice((500, 4)))


class Malformed:
    """A stand-in whose __cuda_array_interface__ is not what the interface defines."""

    def __init__(self, face):
        self.__cuda_array_interface__ = face


def test_malformed_interfaces_are_named():
    good = {"shape": (500, 4), "typestr": "<f4", "data": (0x1000, False), "version": 3}
    for broken in ({k: v for k, v in good.items() if k != "data"}, {k: v for k, v in good.items() if k != "shape"},
                   {**good, "shape": "abc"}, {**good, "typestr": "zz"}, {**good, "data": None}, [1, 2], 7):
        with pytest.raises(TypeError, match="__cuda_array_interface__ cannot be read"):
            KMeans(3, tol=0).fit(Malformed(broken))


def test_transform_of_a_device_array_of_no_known_library_says_what_to_do():
    fitted = KMeans(3, impl="omp").fit(np.random.default_rng(0).random((500, 4)))
    with pytest.raises(TypeError, match="in GPU memory; kmeans_gpu reads host arrays"):
        fitted.transform(OnDevice((500, 4)))


def test_batch_parameter_errors_name_no_problem():
    X = np.random.default_rng(0).random((3, 50, 4))
    for kw, needle in [(dict(max_iter=0), "^max_iter=0"), (dict(tol=[1, 2]), r"^tol=\[1, 2\]"),
                       (dict(metric="l1"), "^metric='l1'")]:
        with pytest.raises(ValueError, match=needle):
            kmeans_gpu.batch_kmeans(X, 3, impl="omp", **kw)
    bad = X.copy()
    bad[2, 7, 1] = np.nan
    with pytest.raises(ValueError, match="^problem 2: "):
        kmeans_gpu.batch_kmeans(bad, 3, impl="omp")


class OnDevice16(OnDevice):
    """A float16 stand-in with a CuPy-like dtype and astype: the conversion is made by the array's
    own library (on the device), never through the host."""

    dtype = np.dtype(np.float16)

    def __init__(self, shape):
        super().__init__(shape, "<f2")
        self.converted = []

    def __array__(self, *args, **kwargs):
        raise AssertionError("a device array must not be copied to the host")

    def astype(self, dtype):
        assert dtype == "float32"
        self.converted.append(OnDevice(self.__cuda_array_interface__["shape"]))
        return self.converted[-1]


def test_float16_device_array_read_through_its_float32_conversion():
    from kmeans_gpu import _input
    X = OnDevice16((500, 4))
    got = _input.device_array(X)
    assert len(X.converted) == 1 and got.owner is X.converted[0]
    assert got.dtype == np.float32 and (got.n, got.d) == (500, 4) and got.input_dtype == "float16"
    assert _input.device_array(OnDevice((500, 4))).input_dtype is None
    # an object of float16 in GPU memory whose library this module cannot call: one clear line
    class Opaque(OnDevice):
        dtype = "float16"
    with pytest.raises(TypeError, match="of float16 in GPU memory; the engines read float32 or float64 there"):
        _input.device_array(Opaque((500, 4), "<f2"))


def test_output_device_needs_a_cupy_or_torch_array():
    X = np.random.default_rng(1).random((300, 4))
    with pytest.raises(ValueError, match="output='device': X is not in GPU memory"):
        KMeans(3, impl="omp", output="device").fit(X)
    with pytest.raises(ValueError, match="output='gpu': must be 'host' or 'device'"):
        KMeans(3, impl="omp", output="gpu").fit(X)
    # another kind of CUDA array: refused before the fit reads it (the stand-in's rows are not readable)
    with pytest.raises(ValueError, match="results as .*OnDevice are not made"):
        KMeans(3, impl="fused", tol=0, output="device").fit(OnDevice((500, 4)))
    fitted = KMeans(3, impl="omp").fit(X)
    fitted.output = "device"
    with pytest.raises(ValueError, match="output='device': X is not in GPU memory"):
        fitted.predict(X)
    fitted.output = "host"
    assert np.array_equal(fitted.predict(X), fitted.labels_)


class OnDevice3(OnDevice):
    """A 3-D stand-in whose problems X[b] are 2-D stand-ins (as a CuPy array's or a tensor's are)."""

    shape = property(lambda self: self.__cuda_array_interface__["shape"])

    def __getitem__(self, b):
        assert isinstance(b, int)
        return OnDevice(self.shape[1:])


def test_batch_of_device_arrays_is_checked_before_it_is_read():
    # the whole batch goes to the device batch, which omp cannot read
    with pytest.raises(ValueError, match="^impl=omp cannot read data on the GPU"):
        kmeans_gpu.batch_kmeans(OnDevice3((3, 500, 4)), 3, impl="omp")
    with pytest.raises(ValueError, match=r"has shape \(500, 4\); a 3-D \(B, N, d\) array is needed"):
        kmeans_gpu.batch_kmeans(OnDevice3((500, 4)), 3)
    with pytest.raises(ValueError, match="not C-contiguous"):
        kmeans_gpu.batch_kmeans(OnDevice((3, 500, 4), "<f4", (8000, 4, 2000)), 3)
    with pytest.raises(ValueError, match="precision='double' with X of float32"):
        kmeans_gpu.batch_kmeans(OnDevice3((3, 500, 4)), 3, precision="double")
    with pytest.raises(ValueError, match="no problems"):
        kmeans_gpu.batch_kmeans(OnDevice3((0, 500, 4)), 3)
    with pytest.raises(ValueError, match="results as .*OnDevice3 are not made"):
        kmeans_gpu.batch_kmeans(OnDevice3((3, 500, 4)), 3, impl="fused", output="device")
    with pytest.raises(ValueError, match="output='device': X is not in GPU memory"):
        kmeans_gpu.batch_kmeans(np.zeros((3, 500, 4)), 3, output="device")
    with pytest.raises(ValueError, match="output='gpu': must be"):
        kmeans_gpu.batch_kmeans(np.zeros((3, 500, 4)), 3, output="gpu")
    with pytest.raises(ValueError, match=r"init: an array for a batch has shape .*\(3, 3, 4\)"):
        kmeans_gpu.batch_kmeans(OnDevice3((3, 500, 4)), 3, init=np.zeros((2, 3, 4)))


class DLPackOnly:
    """A stand-in for an array that describes itself through DLPack alone (as JAX's do), over a
    NumPy array's capsule but saying it lives in CUDA memory: never dereferenced here."""

    def __init__(self, array, device_type=2):
        self.array, self.device_type = array, device_type

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return (self.device_type, 0)


def test_dlpack_only_arrays_are_read_in_place():
    from kmeans_gpu import _input
    X = np.arange(2000, dtype=np.float32).reshape(500, 4)
    got = _input.device_array(DLPackOnly(X))
    assert got.pointer == X.ctypes.data and (got.n, got.d, got.dtype) == (500, 4, np.float32)
    assert got.keep is not None  # the capsule, alive while the engines read its memory
    batch = _input.device_array(DLPackOnly(X.reshape(5, 100, 4)), dims=3)
    assert (batch.batch, batch.n, batch.d) == (5, 100, 4)
    # the device path, not a copy to the host (the stand-in has no __array__)
    with pytest.raises(ValueError, match="^impl=omp cannot read data on the GPU"):
        KMeans(3, impl="omp", tol=0).fit(DLPackOnly(X))
    with pytest.raises(ValueError, match="^impl=omp cannot read data on the GPU"):
        kmeans_gpu.batch_kmeans(DLPackOnly(X.reshape(5, 100, 4)), 3, impl="omp", tol=0)
    with pytest.raises(ValueError, match="not C-contiguous"):
        KMeans(3, tol=0).fit(DLPackOnly(X[:, ::2]))
    with pytest.raises(TypeError, match="DLPack type is not a float"):
        KMeans(3, tol=0).fit(DLPackOnly(np.zeros((500, 4), dtype=np.int32)))
    # a host DLPack device is not read in place
    assert _input.device_array(DLPackOnly(X, device_type=1)) is None


def test_output_device_of_dlpack_only_arrays():
    from kmeans_gpu import _input

    class Namespace:
        @staticmethod
        def from_dlpack(x):
            return ("taken", x)

    class WithNamespace(DLPackOnly):
        def __array_namespace__(self, api_version=None):
            return Namespace

    X = np.zeros((500, 4), dtype=np.float32)
    # a library with from_dlpack (its array API namespace): results through _core.DeviceResult
    make = _input.device_maker(WithNamespace(X))
    assert callable(make)
    if not kmeans_gpu.gpu_available():
        with pytest.raises(kmeans_gpu.DeviceError, match="output='device': no usable GPU"):
            make(np.zeros(3))
    # one without: refused before any fit, naming what works
    with pytest.raises(ValueError, match="results as .*DLPackOnly are not made; X must be a CuPy array, a PyTorch "
                                         "CUDA tensor or a DLPack array whose library has from_dlpack"):
        _input.device_maker(DLPackOnly(X))
    # results of other libraries back on the host through __array__ (JAX's arrays copy themselves)
    class Hostable:
        def __array__(self, dtype=None, copy=None):
            return np.arange(3)
    assert np.array_equal(_input.to_host(Hostable()), np.arange(3))


class RecordingCore:
    """A stand-in for _core that records the device calls DeviceArray makes."""

    def __init__(self):
        self.calls = []

    def device_ready(self, *args):
        self.calls.append(("ready", *args))

    def mean_variance_device(self, *args):
        self.calls.append(("variance", *args))
        return 0.25


def test_device_array_waits_and_sums_through_the_module():
    from kmeans_gpu import _input
    X = np.zeros((5, 100, 4), dtype=np.float32)
    batch = _input.device_array(DLPackOnly(X), dims=3)
    core = RecordingCore()
    batch.ready(core)
    assert core.calls == [("ready", X.ctypes.data, 500, 4, True)]  # every problem's rows checked, then waited for
    # an array without CuPy or PyTorch behind it: problem b's rows summed from a host copy
    assert batch.mean_variance(core, 3) == 0.25
    assert core.calls[-1] == ("variance", X.ctypes.data + 3 * 100 * 4 * 4, 100, 4, True, False)
    one = _input.device_array(DLPackOnly(X[0].astype(np.float64)))
    one.mean_variance(core, unit=True)  # (cosine and dot: the variance of the rows at length 1)
    assert core.calls[-1][2:] == (100, 4, False, True)


def test_misaligned_or_null_device_address_is_refused_before_any_read():
    from kmeans_gpu import _core
    with pytest.raises(ValueError, match="not a multiple of its values' size"):
        _core.device_ready(0x1002, 100, 4, True)
    with pytest.raises(ValueError, match="null pointer"):
        _core.device_ready(0, 100, 4, False)


class NotACapsule(DLPackOnly):
    def __dlpack__(self, **kwargs):
        return "not a capsule"


def test_dlpack_without_a_dltensor_capsule_is_named():
    with pytest.raises(TypeError, match="did not give an unconsumed DLPack 'dltensor' capsule"):
        KMeans(3, tol=0).fit(NotACapsule(np.zeros((500, 4), dtype=np.float32)))
