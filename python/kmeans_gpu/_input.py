"""What the estimator does to X before scikit-learn's checks: a CUDA array the engines read in
place is described (device_array), 16-bit floats become float32 exactly, and an array in GPU memory
that neither the engines nor NumPy can read is refused with one clear error.

float16 (NumPy's) and bfloat16 (a dtype named 'bfloat16', as ml_dtypes and JAX register it) are
subsets of float32: every value converts exactly, so the labels and inertia are those of the
data converted to float32 and the fit runs in float unless ``precision`` says otherwise. The
conversion makes one new float32 array; the caller's array is never modified. Nothing here
imports torch, CuPy or ml_dtypes: objects are read through ``__array__``, ``dtype``,
``__cuda_array_interface__`` and ``__dlpack_device__``.
"""

import numpy as np

# DLPack device types whose memory the host reads: CPU, CUDA pinned host memory, ROCm host memory.
_HOST_DEVICES = (1, 3, 11)
_SIXTEEN = ("float16", "bfloat16")


def _sixteen_bit_name(dtype):
    """'float16' or 'bfloat16' when dtype is one of them (a NumPy dtype, or another library's
    dtype object such as torch.float16 by its name), else None."""
    if dtype is None:
        return None
    if isinstance(dtype, np.dtype):
        if dtype == np.float16:
            return "float16"
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


class DeviceArray:
    """A C-contiguous 2-D float32/float64 array in CUDA memory (CuPy, PyTorch), read in place by
    the engines through its ``__cuda_array_interface__``; ``owner`` keeps it alive. ``input_dtype``:
    'float16' or 'bfloat16' where owner is the float32 conversion of such an array, else None."""

    def __init__(self, owner, pointer, n, d, dtype, input_dtype=None):
        self.owner, self.pointer, self.n, self.d, self.dtype = owner, pointer, n, d, dtype
        self.input_dtype = input_dtype

    def mean_variance(self):
        """The mean of the columns' variances, in float64, by the array's own library (scikit-learn's
        scale for tol; summed on the device, so not the host fit's bits)."""
        X = self.owner
        if hasattr(X, "double") and hasattr(X, "var"):  # PyTorch
            return float(X.double().var(dim=0, unbiased=False).mean().item())
        return float(X.astype("float64").var(axis=0).mean())


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


def device_array(X):
    """X as a DeviceArray when it is a CUDA array the engines can read in place, else None (host
    data, or device memory that only DLPack describes: host_array says what to do). A float16 or
    bfloat16 CUDA array is read through its float32 conversion, made on the device."""
    if isinstance(X, np.ndarray):
        return None
    sixteen = _sixteen_bit_name(getattr(X, "dtype", None))
    if sixteen and _in_device_memory(X):
        X = _device_float32(X)
    try:
        face = X.__cuda_array_interface__
    except AttributeError:
        return None
    except Exception as e:  # PyTorch: a tensor that requires grad
        raise TypeError(f"X in GPU memory cannot be read ({e}); pass X.detach()") from e
    shape, typestr, strides = tuple(face["shape"]), face["typestr"], face.get("strides")
    dtype = np.dtype(typestr)
    name = f"{type(X).__module__}.{type(X).__name__}"
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"X is a {name} of {dtype} in GPU memory; the engines read float32 or float64 there (and "
                        f"float16 or bfloat16 CuPy arrays and PyTorch tensors, converted on the device): convert it "
                        f"on the device (CuPy: X.astype('float32'), PyTorch: X.float())")
    if len(shape) != 2:
        raise ValueError(f"X in GPU memory has shape {shape}; a 2-D (n_samples, n_features) array is needed")
    if strides is not None and tuple(strides) != (shape[1] * dtype.itemsize, dtype.itemsize):
        raise ValueError(f"X in GPU memory is not C-contiguous (strides {tuple(strides)}); make it so on the device "
                         f"(CuPy: cupy.ascontiguousarray(X), PyTorch: X.contiguous())")
    return DeviceArray(X, int(face["data"][0]), int(shape[0]), int(shape[1]), dtype,
                       sixteen if dtype == np.float32 else None)


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
    owner's device (CuPy, PyTorch); ValueError, before any fit, for other kinds of CUDA array."""
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
    raise ValueError(f"output='device': results as {type(owner).__module__}.{type(owner).__name__} are not made; "
                     "X must be a CuPy array or a PyTorch CUDA tensor (or use output='host')")


def to_host(array):
    """A result made by device_maker (or a NumPy array) as a NumPy array."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "get") and not hasattr(array, "detach"):  # CuPy
        return array.get()
    return array.detach().cpu().numpy()  # PyTorch
