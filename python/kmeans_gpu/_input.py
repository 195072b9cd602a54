"""What the estimator does to X before scikit-learn's checks: a CUDA array the engines read in
place is described (device_array: through ``__cuda_array_interface__``, or DLPack alone, as JAX's
arrays describe themselves), 16-bit floats become float32 exactly, and an array in GPU memory that
neither the engines nor NumPy can read is refused with one clear error.

float16 (NumPy's) and bfloat16 (a dtype named 'bfloat16', as ml_dtypes and JAX register it) are
subsets of float32: every value converts exactly, so the labels and inertia are those of the
data converted to float32 and the fit runs in float unless ``precision`` says otherwise. The
conversion makes one new float32 array; the caller's array is never modified. Nothing here
imports torch, CuPy or ml_dtypes: objects are read through ``__array__``, ``dtype``,
``__cuda_array_interface__`` and ``__dlpack_device__``.
"""

import ctypes

import numpy as np

# DLPack device types whose memory the host reads: CPU, CUDA pinned host memory, ROCm host memory.
_HOST_DEVICES = (1, 3, 11)
# DLPack device types the engines read in place: CUDA memory, CUDA managed memory.
_CUDA_DEVICES = (2, 13)
_SIXTEEN = ("float16", "bfloat16")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    """DLPack's DLTensor (dlpack.h, ABI-stable since 0.1): the first member of the DLManagedTensor
    an unversioned "dltensor" capsule points at."""
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_view(X):
    """What X's DLPack capsule describes: dict(capsule, address, shape, strides (in bytes, None when
    C-contiguous by omission), dtype (a NumPy dtype, or None for other types), device (type, id)).
    The capsule is kept unconsumed (its destructor frees the tensor once it is dropped), so it must
    outlive every read of the address."""
    capsule = X.__dlpack__()  # (the producer's pending work: DeviceArray.ready waits for the device)
    try:
        tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    except Exception as e:  # (not a capsule, or a versioned or used one: another name)
        raise TypeError(f"X's __dlpack__() did not give an unconsumed DLPack 'dltensor' capsule ({e}); pass a CuPy "
                        f"array or a PyTorch tensor, or copy X to the host") from None
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    dtype = np.dtype(f"<f{bits // 8}") if code == 2 and bits in (16, 32, 64) and lanes == 1 else None
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    strides = None
    if tensor.strides and dtype is not None:
        strides = tuple(int(tensor.strides[i]) * dtype.itemsize for i in range(tensor.ndim))
    return dict(capsule=capsule, address=(tensor.data or 0) + tensor.byte_offset, shape=shape, strides=strides,
                dtype=dtype, device=(tensor.device.device_type, tensor.device.device_id))


def _sixteen_bit_name(dtype):
    """'float16' or 'bfloat16' when dtype is one of them (a NumPy dtype, or another library's
    dtype object such as torch.float16 by its name), else None."""
    if dtype is None:
        return None
    if isinstance(dtype, np.dtype):
        if dtype == np.float16:
            return "float16"
        if dtype.kind == "V" and dtype.itemsize == 2 and dtype.fields is None:  # np.load of a bfloat16 .npy
            return "bfloat16"  # (without ml_dtypes: a plain two-byte void, as the CLI reads '|V2')
        return "bfloat16" if dtype.name == "bfloat16" and dtype.itemsize == 2 else None
    name = str(dtype).rsplit(".", 1)[-1]  # torch.float16, torch.bfloat16, jax's dtype('bfloat16')...
    return name if name in _SIXTEEN else None


def _in_device_memory(X):
    """Whether X says its data lives in GPU (or other device) memory."""
    try:
        X.__cuda_array_interface__
        return True
    except AttributeError:
        pass
    except Exception:  # a CUDA tensor that refuses the interface (torch: one that requires grad)
        return True
    device = getattr(X, "__dlpack_device__", None)
    if callable(device):
        try:
            return int(device()[0]) not in _HOST_DEVICES
        except Exception:
            return False
    return False


def _dlpack_on_cuda(X):
    """Whether X describes itself through DLPack as an array in CUDA memory."""
    device = getattr(X, "__dlpack_device__", None)
    if not callable(device) or not callable(getattr(X, "__dlpack__", None)):
        return False
    try:
        return int(device()[0]) in _CUDA_DEVICES
    except Exception:
        return False


class DeviceArray:
    """A C-contiguous float32/float64 array in CUDA memory (CuPy, PyTorch, JAX...), read in place by
    the engines through its ``__cuda_array_interface__`` or its DLPack capsule (``keep``): n x d
    (2-D), or a batch of ``batch`` problems of n rows each (3-D); ``owner`` keeps it alive.
    ``input_dtype``: 'float16' or 'bfloat16' where owner is the float32 conversion of such an array,
    else None."""

    def __init__(self, owner, pointer, n, d, dtype, input_dtype=None, batch=None, keep=None):
        self.owner, self.pointer, self.n, self.d, self.dtype = owner, pointer, n, d, dtype
        self.input_dtype, self.batch = input_dtype, batch
        self.keep = keep  # a DLPack capsule: alive while the engines read its memory

    def ready(self, core):
        """Refuses memory of another GPU, memory that is not the device's and a misaligned address
        (ValueError), then waits for the device's pending work (the producer's, on any stream:
        PyTorch's and JAX's interfaces name none), before anything reads the array."""
        core.device_ready(self.pointer, self.n * (self.batch or 1), self.d, self.dtype == np.float32)
        return self

    def mean_variance(self, core, b=None, unit=False):
        """The mean of the columns' variances (of problem b in a batch; unit: of the rows at length
        1, a row of length 0 kept 0), in float64 (scikit-learn's scale for tol): by CuPy or PyTorch
        on the device (their code: not the host fit's bits), or, for other arrays (JAX, DLPack
        alone), the host's sum of a host copy (the host fit's bits)."""
        library = type(self.owner).__module__.split(".")[0]
        if library == "torch":
            X = (self.owner if b is None else self.owner[b]).double()
            if unit:
                norm = X.norm(dim=1, keepdim=True)
                X = X / norm.where(norm > 0, 1.0)
            return float(X.var(dim=0, unbiased=False).mean().item())
        if library == "cupy":
            X = (self.owner if b is None else self.owner[b]).astype("float64")
            if unit:
                norm = (X * X).sum(axis=1, keepdims=True) ** 0.5
                X = X / (norm + (norm == 0))
            return float(X.var(axis=0).mean())
        rows = self.n * self.d * self.dtype.itemsize
        return core.mean_variance_device(self.pointer + (0 if b is None else b * rows), self.n, self.d,
                                         self.dtype == np.float32, unit)


def _device_float32(X):
    """A float16 or bfloat16 array in GPU memory as a new float32 array on the same device, made by
    its own library (PyTorch: X.float(), CuPy: X.astype('float32')): every value exactly, no host
    round trip; the caller's array is not modified. X itself where neither applies (its interface
    then says what is wrong, or that 16 bits cannot be read there)."""
    if callable(getattr(X, "float", None)) and hasattr(X, "is_cuda"):  # PyTorch
        return X.float()
    if callable(getattr(X, "astype", None)):  # CuPy and the like
        return X.astype("float32")
    return X


def device_array(X, dims=2):
    """X as a DeviceArray when it is a CUDA array the engines can read in place (its
    ``__cuda_array_interface__``, else its DLPack capsule), else None (host data, or device memory
    of another kind: host_array says what to do). A float16 or bfloat16 CUDA array is read through
    its float32 conversion, made on the device by its own library. dims: 2 for (n_samples,
    n_features), 3 for a batch (B, N, d)."""
    if isinstance(X, np.ndarray):
        return None
    sixteen = _sixteen_bit_name(getattr(X, "dtype", None))
    if sixteen and _in_device_memory(X):
        X = _device_float32(X)
    name = f"{type(X).__module__}.{type(X).__name__}"
    keep, face = None, None
    try:
        face = X.__cuda_array_interface__
    except AttributeError:
        pass
    except Exception as e:  # PyTorch: a tensor that requires grad
        raise TypeError(f"X in GPU memory cannot be read ({e}); pass X.detach()") from e
    if face is not None:
        try:
            shape, dtype, strides = tuple(int(m) for m in face["shape"]), np.dtype(face["typestr"]), face.get("strides")
            address = int(face["data"][0])
        except Exception as e:  # (a missing key, a shape of text, a typestr NumPy cannot read...)
            raise TypeError(f"X is a {name} whose __cuda_array_interface__ cannot be read ({type(e).__name__}: {e}); "
                            f"it needs 'shape', 'typestr' and 'data' as the interface defines them") from None
    elif _dlpack_on_cuda(X):  # (JAX: an array in GPU memory describes itself through DLPack alone)
        view = dlpack_view(X)
        keep, address, shape, strides, dtype = (view[k] for k in ("capsule", "address", "shape", "strides", "dtype"))
        if dtype is None:
            raise TypeError(f"X is a {name} in GPU memory whose DLPack type is not a float; the engines read "
                            f"float32 or float64 there")
    else:
        return None
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"X is a {name} of {dtype} in GPU memory; the engines read float32 or float64 there (and "
                        f"float16 or bfloat16 CuPy arrays and PyTorch tensors, converted on the device): convert it "
                        f"on the device (CuPy: X.astype('float32'), PyTorch: X.float())")
    if len(shape) != dims:
        needed = "a 2-D (n_samples, n_features)" if dims == 2 else "a 3-D (B, N, d)"
        raise ValueError(f"X in GPU memory has shape {shape}; {needed} array is needed")
    contiguous = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize for i in range(dims))
    if strides is not None and any(s != c for s, c, m in zip(strides, contiguous, shape) if m > 1):
        raise ValueError(f"X in GPU memory is not C-contiguous (strides {tuple(strides)}); make it so on the device "
                         f"(CuPy: cupy.ascontiguousarray(X), PyTorch: X.contiguous())")
    return DeviceArray(X, address, int(shape[-2]), int(shape[-1]), dtype, sixteen if dtype == np.float32 else None,
                       int(shape[0]) if dims == 3 else None, keep)


def _to_float32(array, name):
    """A new C-ordered float32 array of exactly array's 16-bit values."""
    if name == "float16":
        return array.astype(np.float32, order="C")
    # bfloat16 is float32's upper half: its bits shifted up 16 are the float32 of the same value.
    bits = array.view(np.uint16).astype(np.uint32, order="C")
    bits <<= 16
    return bits.view(np.float32)


def host_array(X):
    """X ready for scikit-learn's checks, and the 16-bit type it held ('float16', 'bfloat16' or
    None). Objects that are not 16-bit are returned as they are (a DataFrame keeps its column
    names); an array in device memory that NumPy cannot read raises TypeError."""
    if not isinstance(X, np.ndarray):
        if _in_device_memory(X):
            try:
                X = np.asarray(X)  # some libraries copy to the host themselves (JAX)
                if X.dtype == object:  # (NumPy wrapped the object itself: no values read)
                    raise TypeError("not an array NumPy can read")
            except Exception as e:
                raise TypeError(f"X is a {type(X).__module__}.{type(X).__name__} in GPU memory; kmeans_gpu reads "
                                f"host arrays: copy it to the host first (CuPy: X.get(), PyTorch: X.cpu())") from e
        elif hasattr(X, "columns") and hasattr(X, "dtypes"):  # a DataFrame of 16-bit columns only
            names = {_sixteen_bit_name(t) for t in X.dtypes}
            if len(names) == 1 and None not in names:
                return X.astype(np.float32), names.pop()  # NumPy's (and ml_dtypes') casts are exact
            return X, None
        elif hasattr(type(X), "__array__"):
            dtype = getattr(X, "dtype", None)
            name = _sixteen_bit_name(dtype)
            if dtype is not None and name is None:
                return X, None  # not 16-bit: scikit-learn converts it as usual
            try:
                X = np.asarray(X)
            except Exception as e:
                if name is None:
                    return X, None  # scikit-learn's own check says what is wrong
                raise TypeError(f"X's dtype {dtype} cannot be read by NumPy; convert it to float32 first "
                                f"(exact), e.g. X.float() or X.astype('float32')") from e
        else:
            return X, None
    name = _sixteen_bit_name(X.dtype)
    return (_to_float32(X, name), name) if name else (X, None)


def device_maker(owner):
    """For KMeans(output="device"): a function making a NumPy result an array of owner's library on
    owner's device: CuPy and PyTorch by their own calls; another array in CUDA memory that offers
    DLPack and a ``from_dlpack`` (its ``__array_namespace__``'s, or JAX's) through
    ``_core.DeviceResult``, a copy in CUDA memory its library takes over. ValueError, before any
    fit, for other kinds of array."""
    library = type(owner).__module__.split(".")[0]
    if library == "torch":
        import torch
        return lambda array: torch.as_tensor(array, device=owner.device)
    if library == "cupy":
        import cupy

        def make(array):
            with cupy.cuda.Device(owner.device.id):
                return cupy.asarray(array)
        return make
    from_dlpack = _from_dlpack_of(owner) if _dlpack_on_cuda(owner) else None
    if from_dlpack is not None:
        from . import _core
        device = int(owner.__dlpack_device__()[1])
        return lambda array: from_dlpack(_core.DeviceResult(np.ascontiguousarray(array), device))
    raise ValueError(f"output='device': results as {type(owner).__module__}.{type(owner).__name__} are not made; "
                     "X must be a CuPy array, a PyTorch CUDA tensor or a DLPack array whose library has from_dlpack "
                     "(JAX; the array API's __array_namespace__), or use output='host'")


def _from_dlpack_of(owner):
    """The from_dlpack of owner's library: its array API namespace's, else JAX's; None if neither."""
    namespace = getattr(owner, "__array_namespace__", None)
    if callable(namespace):
        try:
            found = getattr(namespace(), "from_dlpack", None)
        except Exception:
            found = None
        if callable(found):
            return found
    if type(owner).__module__.split(".")[0] in ("jax", "jaxlib"):
        import jax.numpy
        return jax.numpy.from_dlpack
    return None


def _copies_to_host(X):
    """Whether X is a CuPy array or a PyTorch tensor, which to_host copies to the host."""
    return (hasattr(X, "get") and not hasattr(X, "detach")) or (callable(getattr(X, "detach", None))
                                                               and hasattr(X, "is_cuda"))


def device_to_host(X):
    """A CuPy array or PyTorch tensor in GPU memory as a NumPy array (16-bit values as float32,
    exactly); another array in device memory as host_array takes it (one that copies itself to the
    host, as JAX's do), else TypeError naming what to do."""
    if _sixteen_bit_name(getattr(X, "dtype", None)):
        X = _device_float32(X)
    return to_host(X) if _copies_to_host(X) else host_array(X)[0]


def to_host(array):
    """A result made by device_maker (or a NumPy array, a CuPy array, a PyTorch tensor) as a NumPy array."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "get") and not hasattr(array, "detach"):  # CuPy
        return array.get()
    if callable(getattr(array, "detach", None)):  # PyTorch
        return array.detach().cpu().numpy()
    return np.asarray(array)  # (JAX and others copy themselves to the host through __array__)
