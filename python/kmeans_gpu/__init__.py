"""kmeans-gpu's engines from Python, with scikit-learn's ``KMeans`` interface.

    >>> import numpy as np, kmeans_gpu
    >>> X = np.random.default_rng(0).random((100_000, 16))
    >>> km = kmeans_gpu.KMeans(n_clusters=16, random_state=0).fit(X)   # fused with a GPU, else omp
    >>> km.cluster_centers_, km.labels_, km.inertia_, km.n_iter_
    >>> kmeans_gpu.last_report["per_iteration"][0]                      # where the first iteration's time went

The data is used in place when it is a C-contiguous float32 or float64 array (other arrays
are converted once, as scikit-learn converts them); the precision follows its dtype unless
``precision`` says otherwise. float16 and bfloat16 arrays (a dtype named 'bfloat16', as
ml_dtypes registers it) are converted exactly to a new float32 array and run in float: the
result is that of ``X.astype(np.float32)``, ``cluster_centers_`` included (float32). Labels
are the CLI's: exactly ``seq``'s, the same bits on every run. Errors in the data or the
parameters raise ValueError (TypeError for types that cannot be clusters' data) with the CLI's
message; a GPU failure raises ``kmeans_gpu.DeviceError`` (a
RuntimeError); Ctrl-C raises KeyboardInterrupt within about a second (docs/configuration.md).

Under mpirun, ``fit(X_local, comm=MPI.COMM_WORLD)`` (mpi4py) fits the rows every rank passes, in
rank order, as one process would fit them all: the same centroids, inertia and iterations on
every rank, bit for bit, and each rank's ``labels_`` for its own rows (kmeans_gpu/_ranks.py).

Differences from scikit-learn, on purpose:
- an empty cluster keeps its previous centroid (scikit-learn moves it to a far point);
- ``threshold`` (the lab's rule) also stops the loop: when at most that fraction of the
  objects changed cluster (0: none changed, scikit-learn's "strict convergence");
- ``init="first"`` (the first K objects) is the lab's initialisation;
- an integer ``random_state`` is the CLI's ``--seed`` (the same centres as the CLI's run);
- ``sample_weight`` (``fit``, ``fit_predict``, ``fit_transform``, ``score``) is scikit-learn's
  (weighted means and inertia), but ``init="random"`` draws its objects uniformly, not by
  weight; ``n_init`` defaults to 1;
- ``tol`` is scaled as scikit-learn scales it (by the mean of the columns' variances); the
  CLI's ``--tol`` is the raw threshold on the summed squared centroid shift;
- ``verbose`` > 0 shows the CLI's progress line on stderr, and only when stderr is a terminal
  (nothing in a notebook); scikit-learn prints its own lines on stdout.
"""

import contextlib
import inspect
import json
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _core, _input
from ._core import DeviceError
from ._input import host_array as _host_array

__version__ = _core.__version__

__all__ = ["KMeans", "DeviceError", "batch_kmeans", "implementations", "gpu_available", "last_report"]

#: The JSON report of the last fit or predict in this process, as a dict: the CLI's
#: ``--report=json`` (implementation, device, path, seconds by stage, and ``per_iteration``:
#: h2d, kernel, cpu, d2h, total seconds, changed, shift, inertia of every iteration).
last_report = None

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # older: the estimator's own method
    def _validate_data(estimator, X, **kwargs):
        return estimator._validate_data(X, **kwargs)

# The engines check finiteness themselves (with the CLI's message); scikit-learn renamed the
# switch in 1.6.
_FINITE = ("ensure_all_finite" if "ensure_all_finite" in inspect.signature(check_array).parameters
           else "force_all_finite")

_INITS = {"k-means++": "kmeans++", "kmeans++": "kmeans++", "k-means||": "kmeans||", "kmeans||": "kmeans||",
          "random": "random", "first": "first"}
# The CLI's ranges: its integer options are C ints; --seed is 64-bit; --device-memory at most
# 1.8e19 bytes (kmeans_options.cpp).
_INT_MAX = 2**31 - 1
_UINT64_MAX = 2**64 - 1
_MAX_BYTES = 1.8e19
_PRECISIONS = {None: None, "double": np.float64, "float64": np.float64, "float": np.float32,
               "float32": np.float32}


def _float(value):
    """A real number as a float; an integer beyond float's range as +-inf (then refused)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else -float("inf")


def _core_arguments(X, tol, args, engine):
    """_core.fit's arguments, in order, from KMeans._arguments and _engine_arguments."""
    return (X, engine["impl"], args["k"], args["loops"], args["threshold"], tol, args["init"], engine["seed"],
            engine["block"], engine["threads"], args["n_init"], args["centroids"], engine["gpus"],
            engine["device_memory"], args["metric"])


def _sample_weight(sample_weight, X):
    """scikit-learn's sample_weight for X: None, or a C-contiguous 1-D array of X's dtype and length
    (a number: that weight for every object). The engines check the values (finite, >= 0, not all
    0) and name the first bad one."""
    if sample_weight is None:
        return None
    n = X.shape[0]
    if isinstance(sample_weight, numbers.Number) and not isinstance(sample_weight, bool):
        sample_weight = np.full(n, sample_weight)  # (checked below as an array of them: float32's range)
    if not isinstance(sample_weight, np.ndarray) and (hasattr(sample_weight, "__cuda_array_interface__")
                                                      or hasattr(sample_weight, "__dlpack_device__")):
        sample_weight, _ = _host_array(sample_weight)  # raises the device-array TypeError
    w = np.asarray(sample_weight)
    if w.dtype.kind not in "fiub":
        raise TypeError(f"sample_weight: dtype {w.dtype} is not a real number type")
    if w.shape != (n,):
        raise ValueError(f"sample_weight has shape {w.shape}, not ({n},): one weight per object of X")
    if w.dtype.kind == "f" and X.dtype == np.float32 and w.dtype.itemsize > 4:
        big = np.abs(w[np.isfinite(w)]).max(initial=0)
        if big > np.finfo(np.float32).max:
            raise ValueError(f"sample_weight: {big:g} does not fit X's float32; rescale the weights (only their "
                             f"ratios move the centroids) or pass X as float64")
    return np.ascontiguousarray(w, dtype=X.dtype)


def gpu_available():
    """Whether a usable CUDA GPU is present (then ``impl=None`` means ``fused``)."""
    return _core.gpu_available()


def release_device_memory():
    """Hands back to the driver the device memory that earlier fits keep for the next ones (the
    GPU engines allocate from CUDA's stream-ordered pool and keep what they free, so a repeated
    fit does not pay for cudaMalloc and cudaFree again). Call it before giving the GPU to
    another library in the same process."""
    _core.release_device_memory()


def implementations(n_clusters=None, n_features=None, precision="double"):
    """The registry, in ladder order: a list of dicts (name, description, where, order), as
    the CLI's ``--list``. Given a shape, also whether each runs it here ("runs", and "reason"
    when not), the path it takes ("path") and, for fused, its whole plan ("plan": the path and
    why, the kernel's variant, launch shape and each feature on or off)."""
    if precision not in _PRECISIONS or precision is None:
        raise ValueError(f"precision={precision!r}: must be 'double' or 'float'")
    elem = 4 if _PRECISIONS[precision] == np.float32 else 8
    if n_clusters is None or n_features is None:
        return json.loads(_core.implementations_json())
    for name, value in (("n_clusters", n_clusters), ("n_features", n_features)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name}={value!r}: must be an integer")
        if not 1 <= value <= _INT_MAX:
            raise ValueError(f"{name}={value}: must be in 1..{_INT_MAX}")
    return json.loads(_core.implementations_json(int(n_clusters), int(n_features), elem))


class KMeans(ClusterMixin, TransformerMixin, BaseEstimator):
    """Lloyd k-means on kmeans-gpu's engines.

    Parameters
    ----------
    n_clusters : int, default 8
    init : {"k-means++", "k-means||", "random", "first"} or array of shape (n_clusters, n_features)
        k-means++ is scikit-learn's greedy variant (2 + ln K candidates per step).
    max_iter : int, default 300
    tol : float, default 1e-4
        Stop when the summed squared centroid shift is at most ``tol`` times the mean of the
        columns' variances (scikit-learn's rule).
    threshold : float, default 0
        Stop when at most this fraction of the objects changed cluster.
    n_init : int, default 1
        Initialisations (random or k-means++); the fit with the lowest inertia is kept.
    random_state : int, RandomState or None
        An int is the CLI's ``--seed``; otherwise a seed is drawn from it.
    impl : str or None
        A name of :func:`implementations` (``seq``, ``omp``, ``naive`` ... ``fused``); None:
        ``fused`` with a GPU, else ``omp``.
    precision : {"float", "double"} or None
        None: float32, float16 and bfloat16 data runs in float, anything else in double.
    block : int or None, default None
        GPU threads per block (the CLI's ``--block``); None: 128, and for fused's one-pass
        kernels their measured best per shape (128, 192 or 256).
    n_threads : int or None
        CPU threads (None: all cores).
    n_gpus : int, default 1
        GPUs of this machine that share the rows (the CLI's ``--gpus``; NCCL beyond one); the
        result is the one-GPU result bit for bit. GPU implementations that keep the loop on the
        device only (offload, offload-block, fused).
    device_memory : int or None
        Bytes of device memory a GPU implementation may use (the CLI's ``--device-memory``);
        data beyond it streams from host memory each iteration. None: what is free.
    verbose : int, default 0
        Above 0: while ``fit`` or ``predict`` runs, the CLI's progress line (k-means++ or
        k-means||, the iterations, a streamed iteration's pass) on stderr when it is a terminal
        and a stage lasts a second (``KMEANS_PROGRESS_AFTER``); nothing otherwise.
    metric : {"euclidean", "cosine", "dot"}, default "euclidean"
        "cosine": spherical k-means (objects and centroids of length 1; ``inertia_`` is the sum of
        1 - cos); "dot": the largest inner product with centroids of length 1 (``inertia_`` is
        minus the sum of x.c). Labels are the exact ones, as for "euclidean" (the CLI's
        ``--metric``, docs/configuration.md).
    output : {"host", "device"}, default "host"
        "device": X must be in GPU memory (a CuPy array, a PyTorch CUDA tensor, or a DLPack array
        whose library has ``from_dlpack``, as JAX's), and ``cluster_centers_``, ``labels_`` and
        ``predict``'s labels come back as arrays of X's library on X's device (copies of the
        results, K x d and n values); "host": NumPy arrays.

    Attributes
    ----------
    cluster_centers_, labels_ (int32), inertia_, n_iter_, n_features_in_,
    feature_names_in_ (when fitted on a DataFrame), report_ (the fit's JSON report as a dict).
    """

    def __init__(self, n_clusters=8, *, init="k-means++", max_iter=300, tol=1e-4, threshold=0.0, n_init=1,
                 random_state=None, impl=None, precision=None, block=None, n_threads=None, n_gpus=1,
                 device_memory=None, verbose=0, metric="euclidean", output="host"):
        self.n_clusters = n_clusters
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.threshold = threshold
        self.n_init = n_init
        self.random_state = random_state
        self.impl = impl
        self.precision = precision
        self.block = block
        self.n_threads = n_threads
        self.n_gpus = n_gpus
        self.device_memory = device_memory
        self.verbose = verbose
        self.metric = metric
        self.output = output

    # -- checks ------------------------------------------------------------------------------

    def _dtype(self):
        if not (self.precision is None or isinstance(self.precision, str)) or self.precision not in _PRECISIONS:
            raise ValueError(f"precision={self.precision!r}: must be 'float', 'double' or None")
        dtype = _PRECISIONS[self.precision]
        return [np.float64, np.float32] if dtype is None else dtype

    def _more_tags(self):
        # As scikit-learn's KMeans: an object of weight 0 is not the same as no object (the
        # initialisation's draws count every object).
        return {"_xfail_checks": {"check_sample_weights_invariance":
                                  "zero sample_weight is not equivalent to removing samples"}}

    def _check_X(self, X, reset, dtype):
        # float16/bfloat16 to float32 exactly, GPU arrays the engines do not read refused (_input.py); then
        # scikit-learn's conversions, n_features_in_, feature names and its message for no
        # features (its estimator checks ask for it); no objects and non-finite values are the
        # engines' to refuse, with the CLI's messages.
        X = _host_array(X)[0]
        if np.iscomplexobj(X):  # (scikit-learn's words, without the array it prints after them)
            raise ValueError("Complex data not supported")
        if dtype is np.float32 and isinstance(X, np.ndarray) and X.dtype == np.float64 and X.ndim == 2 and X.size:
            # a finite value beyond float's range would read as Inf once cast: named here (max and min
            # read X without a copy; NaN or Inf among the values leave it to the engines' check)
            top = float(np.finfo(np.float32).max)
            if top < max(X.max(), -X.min()) < np.inf:
                big = np.flatnonzero(np.isfinite(X) & (np.abs(X) > top))
                i, j = divmod(int(big[0]), X.shape[1])
                raise ValueError(f"X: value {X.flat[big[0]]:g} at object {i}, coordinate {j} is beyond float's "
                                 f"range; use precision='double'")
        return _validate_data(self, X, reset=reset, accept_sparse=False, dtype=dtype, order="C",
                              ensure_min_samples=0, **{_FINITE: False})

    @staticmethod
    def _int(name, value, minimum, maximum=_INT_MAX):
        """value as a Python int, at least minimum; above maximum, the CLI's message for its
        option (the engines take C ints: larger values must not reach them)."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name}={value!r}: must be an integer")
        value = int(value)
        if value < minimum:
            raise ValueError(f"{name}={value}: must be at least {minimum}")
        if value > maximum:
            raise ValueError(f"{name}={value} is out of range")
        return value

    def _block(self):
        return 0 if self.block is None else self._int("block", self.block, 1)

    def _seed_given(self):
        """Whether random_state is the seed itself (else _seed draws one)."""
        return isinstance(self.random_state, numbers.Integral) and not isinstance(self.random_state, bool)

    def _seed(self):
        if self._seed_given():
            if self.random_state < 0:
                raise ValueError(f"random_state={self.random_state}: must be non-negative")
            if self.random_state > _UINT64_MAX:
                raise ValueError(f"random_state: '{int(self.random_state)}' is out of range")
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    def _impl(self):
        if self.impl is not None and not isinstance(self.impl, str):
            raise TypeError(f"impl={self.impl!r}: must be a name of kmeans_gpu.implementations() or None")
        return self.impl or ""

    def _threads(self):
        if self.n_threads is None:
            return 0
        threads = self._int("n_threads", self.n_threads, -np.inf, maximum=np.inf)
        if not 1 <= threads <= _core.max_threads:  # the CLI's cap (its 0, all cores, is None here)
            raise ValueError(f"n_threads={threads}: must be in 1..{_core.max_threads} (None: all cores)")
        return threads

    def _device_memory(self):
        if self.device_memory is None:
            return 0
        memory = self._int("device_memory", self.device_memory, 1, maximum=np.inf)
        if memory > _MAX_BYTES:  # the CLI's limit and message
            raise ValueError(f"device_memory={memory}: give bytes, or a number with K, M, G or T (e.g. 8G)")
        return memory

    @contextlib.contextmanager
    def _progress(self):
        """The progress line for what runs inside (verbose > 0), on this thread's fits only."""
        if not isinstance(self.verbose, numbers.Integral):  # bool too, as scikit-learn
            raise TypeError(f"verbose={self.verbose!r}: must be an integer")
        _core.show_progress(self.verbose > 0)
        try:
            yield
        finally:
            _core.show_progress(False)

    # -- fitting -----------------------------------------------------------------------------

    def fit(self, X, y=None, sample_weight=None, *, comm=None):
        """Fits on X (n_samples, n_features); y is ignored.

        sample_weight: None (every object weighs 1), a number, or one weight per object
        (finite, >= 0, not all 0; converted to X's dtype): the centroids are weighted means and
        the inertia a weighted sum, as scikit-learn's. With comm, this rank's rows' weights.

        comm: an mpi4py communicator (e.g. ``MPI.COMM_WORLD``) whose every rank calls ``fit``
        with its own rows of the data, in rank order (any number of rows each, none included).
        Every rank gets the fit of all the rows that one process would make, bit for bit:
        ``cluster_centers_``, ``inertia_``, ``n_iter_``, and ``labels_`` of its own rows. An
        error on any rank raises on every rank (docs/configuration.md)."""
        device = _input.device_array(X)
        if self._output() == "device" and device is None:
            raise ValueError("output='device': X is not in GPU memory; pass a CuPy array, a PyTorch CUDA tensor or "
                             "a JAX array, or use output='host'")
        if comm is not None:
            from . import _ranks
            if _ranks.ranks_of(comm) > 1:
                if device is not None:
                    raise ValueError("X in GPU memory: a fit over MPI ranks reads host arrays")
                return _ranks.fit(self, X, comm, sample_weight)
        if device is not None:
            return self._fit_device(device, sample_weight)
        return self._fit_here(X, sample_weight)

    def _fit_device(self, X, sample_weight):
        """The fit of a CUDA array (CuPy, PyTorch) read where it is: no copy to the host and back."""
        if sample_weight is not None:
            raise ValueError("X in GPU memory: sample weights need the data on the host")
        make = _input.device_maker(X.owner) if self._output() == "device" else None  # (before the fit)
        want = self._dtype()
        if not isinstance(want, list) and want != X.dtype:
            held = f"{X.input_dtype} (read as float32)" if X.input_dtype else X.dtype
            raise ValueError(f"precision={self.precision!r} with X of {held} in GPU memory: convert X there")
        if X.n == 0:
            raise ValueError(f"X: invalid shape 0 x {X.d} (both must be positive)")
        self.n_features_in_ = X.d
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        args = self._problem(X.d, stacklevel=4)
        engine = self._engine_arguments()
        _core.check_device_fit(engine["impl"], args["metric"], args["init"], engine["gpus"])  # before X is read
        X.ready(_core)  # (before anything reads X)
        tol = self._tol(lambda unit: X.mean_variance(_core, unit=unit))
        with self._progress():
            out = _core.fit_device(X.pointer, X.n, X.d, X.dtype == np.float32, engine["impl"], args["k"],
                                   args["loops"], args["threshold"], tol, args["init"], engine["seed"],
                                   engine["block"], engine["threads"], args["n_init"], args["centroids"],
                                   engine["gpus"], engine["device_memory"], args["metric"])
        self._take(out)
        if X.input_dtype:
            self.report_["input_dtype"] = X.input_dtype  # (last_report is the same dict)
        if make:
            self.cluster_centers_, self.labels_ = make(self.cluster_centers_), make(self.labels_)
        return self

    def _arguments(self, X, stacklevel=4, sample_weight=None):
        """The fit's checked arguments: X converted, and the problem's (k, loops, ...) by name, as
        _core.fit takes them (sample_weight as a keyword)."""
        X, input_dtype = _host_array(X)
        X = self._check_X(X, reset=True, dtype=self._dtype())
        sample_weight = _sample_weight(sample_weight, X)
        args = self._problem(X.shape[1], stacklevel + 1)
        args.update(input_dtype=input_dtype, sample_weight=sample_weight)
        return X, args

    def _problem(self, n_features, stacklevel):
        """The problem's checked parameters (k, loops, ...) by name, as _core.fit takes them, for
        data of n_features columns."""
        k = self._int("n_clusters", self.n_clusters, 1)
        loops = self._int("max_iter", self.max_iter, 1)
        n_init = self._int("n_init", self.n_init, 1)
        if not isinstance(self.tol, numbers.Real) or not np.isfinite(_float(self.tol)) or self.tol < 0:
            raise ValueError(f"tol={self.tol!r}: must be a finite number >= 0")
        if not isinstance(self.threshold, numbers.Real):
            raise TypeError(f"threshold={self.threshold!r}: must be a number")
        centroids, init = None, "first"
        if isinstance(self.init, str):
            if self.init not in _INITS:
                raise ValueError(f"init={self.init!r}: must be 'k-means++', 'k-means||', 'random', 'first' or an array of "
                                 f"shape (n_clusters, n_features)")
            init = _INITS[self.init]
        elif callable(self.init):
            raise TypeError("init: a callable is not supported; pass 'k-means++', 'random', 'first' or an array")
        else:
            kind = "" if self.init is None else np.asarray(self.init).dtype.kind
            if self.init is None or kind == "c":  # (scikit-learn's check words these over several lines)
                raise (TypeError if self.init is None else ValueError)(
                    f"init={'None' if self.init is None else 'a complex array'}: pass 'k-means++', 'k-means||', "
                    f"'random', 'first' or a real array of shape (n_clusters, n_features)")
            if kind == "V":  # (NumPy cannot read it as numbers)
                raise TypeError(f"init: dtype {np.asarray(self.init).dtype} is not a number type; convert it to float "
                                f"(a bfloat16 array: its float32 conversion)")
            centroids = check_array(self.init, dtype=np.float64, order="C", input_name="init", **{_FINITE: True})
            if centroids.shape != (k, n_features):
                raise ValueError(f"the initial centroids have shape {centroids.shape}, not (n_clusters, n_features) "
                                 f"= ({k}, {n_features})")
            if n_init != 1:
                warnings.warn(f"n_init={n_init} with given centroids: they are used once (n_init=1)", RuntimeWarning,
                              stacklevel=stacklevel)
                n_init = 1
        return dict(k=k, loops=loops, threshold=_float(self.threshold), init=init, n_init=n_init,
                    centroids=centroids, metric=self._metric())

    def _engine_arguments(self):
        """How the engines run: _core.fit's impl, seed, block, threads, gpus and device_memory."""
        return dict(impl=self._impl(), seed=self._seed(), block=self._block(), threads=self._threads(),
                    gpus=self._int("n_gpus", self.n_gpus, 1), device_memory=self._device_memory())

    def _tol(self, mean_variance):
        """The raw tol for data of this mean column variance: mean_variance(unit), called only when
        needed, where unit asks for the variance of the rows at length 1 (cosine and dot, whose
        centroids have length 1: their tol does not depend on the data's scale)."""
        tol = _float(self.tol) * mean_variance(self._metric() != "euclidean") if self.tol > 0 else 0.0
        return tol if np.isfinite(tol) else None  # squares overflow: the engines' range check says so

    def _fit_here(self, X, sample_weight=None):
        X, args = self._arguments(X, sample_weight=sample_weight)
        tol = self._tol(lambda unit: _core.mean_variance(X, unit)) if X.size else 0.0
        with self._progress():
            self._take(_core.fit(*_core_arguments(X, tol, args, self._engine_arguments()),
                                 sample_weight=args["sample_weight"]))
        if args["input_dtype"]:
            self.report_["input_dtype"] = args["input_dtype"]  # (last_report is the same dict)
        return self

    def _take(self, out):
        """The fitted attributes from _core's result."""
        global last_report
        self.cluster_centers_ = out["cluster_centers"]
        self.labels_ = out["labels"]
        self.inertia_ = float(out["inertia"])
        self.n_iter_ = int(out["n_iter"])
        self.report_ = json.loads(out["report"])
        last_report = self.report_
        return self

    def fit_predict(self, X, y=None, sample_weight=None, *, comm=None):
        """Fits and returns the labels (with comm: of this rank's rows)."""
        return self.fit(X, sample_weight=sample_weight, comm=comm).labels_

    def fit_transform(self, X, y=None, sample_weight=None, *, comm=None):
        """Fits and returns the distances to every centroid (with comm: of this rank's rows)."""
        return self.fit(X, sample_weight=sample_weight, comm=comm)._distances(X)

    # -- using the centroids -----------------------------------------------------------------

    def _predict(self, X, sample_weight=None):
        global last_report
        check_is_fitted(self)
        device = _input.device_array(X)
        if self._output() == "device" and device is None:
            raise ValueError("output='device': X is not in GPU memory; pass a CuPy array, a PyTorch CUDA tensor or "
                             "a JAX array, or use output='host'")
        if device is not None:  # read in place on the GPU
            if sample_weight is not None:
                raise ValueError("X in GPU memory: sample weights need the data on the host")
            if device.d != self.n_features_in_:
                raise ValueError(f"X has {device.d} features, but KMeans is expecting {self.n_features_in_} "
                                 f"features as input.")
            _core.check_device_fit(self._impl(), self._metric(), "first", 1)
            make = _input.device_maker(device.owner) if self._output() == "device" else None
            device.ready(_core)
            with self._progress():
                out = _core.predict_device(device.pointer, device.n, device.d, device.dtype == np.float32,
                                           self._impl(), self._centers(), self._block(), self._threads(),
                                           self._device_memory(), self._metric())
            last_report = json.loads(out["report"])
            if device.input_dtype:
                last_report["input_dtype"] = device.input_dtype
            if make:
                out["labels"] = make(out["labels"])
            return out
        X, input_dtype = _host_array(X)
        X = self._check_X(X, reset=False, dtype=self._centers().dtype)
        sample_weight = _sample_weight(sample_weight, X)
        with self._progress():
            out = _core.predict(X, self._impl(), self._centers(), self._block(),
                                self._threads(), self._device_memory(), self._metric(), sample_weight=sample_weight)
        last_report = json.loads(out["report"])
        if input_dtype:
            last_report["input_dtype"] = input_dtype
        return out

    def predict(self, X):
        """The nearest centroid of every object of X (the CLI's ``--predict``)."""
        return self._predict(X)["labels"]

    def score(self, X, y=None, sample_weight=None):
        """Minus the inertia of X against the centroids (larger is better, as scikit-learn; with
        metric="cosine" or "dot", minus that metric's objective), weighted by sample_weight."""
        return -float(self._predict(X, sample_weight)["inertia"])

    def _distances(self, X):
        if not isinstance(X, np.ndarray) and _input._in_device_memory(X):  # (the distances are NumPy's)
            X = _input.device_to_host(X)
        X = self._check_X(X, reset=False, dtype=self._centers().dtype)
        if X.size and not np.isfinite(X).all():
            _core.predict(X, "seq", self._centers(), 128, 1)  # raises the CLI's message
        if self._metric() == "cosine":  # the fit's unit rows, bit for bit (rows of huge values included)
            X = _core.unit_rows(np.ascontiguousarray(X))
        return euclidean_distances(X, self._centers())

    def _centers(self):
        """cluster_centers_ as a NumPy array (output="device" keeps them as X's kind)."""
        return _input.to_host(self.cluster_centers_)

    def _output(self):
        if not isinstance(self.output, str) or self.output not in ("host", "device"):
            raise ValueError(f"output={self.output!r}: must be 'host' or 'device'")
        return self.output

    def _metric(self):
        if not isinstance(self.metric, str) or self.metric not in ("euclidean", "cosine", "dot"):
            raise ValueError(f"metric={self.metric!r}: must be 'euclidean', 'cosine' or 'dot'")
        return self.metric

    def transform(self, X):
        """The Euclidean distance of every object of X to every centroid, (n_samples, n_clusters)
        (metric="cosine": of the objects divided by their length), as a NumPy array: X in GPU
        memory (CuPy, PyTorch) is copied to the host for it."""
        check_is_fitted(self)
        return self._distances(X)


def batch_kmeans(X, n_clusters, *, init="k-means++", max_iter=300, tol=1e-4, threshold=0.0, n_init=1,
                 random_state=None, impl=None, precision=None, metric="euclidean", block=None, n_threads=None,
                 n_gpus=1, device_memory=None, verbose=0, output="host"):
    """B independent k-means problems of N objects of d features each, X of shape (B, N, d).

    Every problem b is fitted as ``KMeans(n_clusters, init=..., ...).fit(X[b])`` fits it, the
    parameters meaning what they mean there (the same ``random_state`` for every problem), and
    its result equals that separate fit bit for bit. ``init`` may be an array of shape (B,
    n_clusters, d): problem b starts from ``init[b]``. With impl="fused" on one GPU the problems'
    iterations run together, each iteration of the batch one launch of a CUDA graph; otherwise one
    problem after another. ``last_report`` then holds the batch's report: ``together``,
    ``seconds_per_iteration`` (the whole batch's, median) and each problem's report.

    X in GPU memory (a CuPy array or PyTorch CUDA tensor of shape (B, N, d), float16 and bfloat16
    converted there): read in place, no copy to the host, and run as a host batch runs (together
    with impl="fused" on one GPU); the results come back on the host, or with output="device" the
    centroids and labels as arrays of X's library on its device (inertia and n_iter stay NumPy).

    Returns ``(centroids, labels, inertia, n_iter)``: arrays of shape (B, n_clusters, d),
    (B, N) int32, (B,) float64 and (B,) int64. An error in problem b is raised as
    ``ValueError("problem b: ...")``, and no result is returned."""
    global last_report
    kw = dict(max_iter=max_iter, tol=tol, threshold=threshold, n_init=n_init, impl=impl, precision=precision,
              block=block, n_threads=n_threads, n_gpus=n_gpus, device_memory=device_memory, verbose=verbose,
              metric=metric)
    if output not in ("host", "device"):
        raise ValueError(f"output={output!r}: must be 'host' or 'device'")
    if _input._in_device_memory(X) and not isinstance(X, np.ndarray):
        return _batch_on_device(X, n_clusters, init, random_state, kw, output)
    if output == "device":
        raise ValueError("output='device': X is not in GPU memory; pass a CuPy array, a PyTorch CUDA tensor or "
                         "a JAX array, or use output='host'")
    X = np.asarray(X)
    if X.ndim != 3:
        raise ValueError(f"X: a batch needs 3 dimensions (B, N, d), not {X.ndim} (shape {X.shape}); "
                         "use KMeans for one problem")
    if X.shape[0] == 0:
        raise ValueError("X: the batch holds no problems (B = 0)")
    given = not isinstance(init, str) and not callable(init)
    if given:
        init = np.asarray(init)
        if init.ndim != 3 or init.shape[0] != X.shape[0]:
            raise ValueError(f"init: an array for a batch has shape (B, n_clusters, d) = ({X.shape[0]}, "
                             f"{n_clusters}, {X.shape[2]}), not {init.shape}")
    batch = X.shape[0]
    est = KMeans(n_clusters, init=init[0] if given else init, max_iter=max_iter, tol=tol, threshold=threshold,
                 n_init=n_init, random_state=random_state, impl=impl, precision=precision, block=block,
                 n_threads=n_threads, n_gpus=n_gpus, device_memory=device_memory, verbose=verbose, metric=metric)
    if given and init.shape[1:] != (n_clusters, X.shape[2]) and isinstance(n_clusters, numbers.Integral):
        raise ValueError(f"init: an array for a batch has shape (B, n_clusters, d) = ({batch}, {n_clusters}, "
                         f"{X.shape[2]}), not {init.shape}")
    with warnings.catch_warnings():  # the parameters, once: their errors are no problem's (warnings: below)
        warnings.simplefilter("ignore")
        est._problem(X.shape[2], 3)
    rows, tols = [], []
    for b in range(batch):
        try:
            Xb, args = est._arguments(X[b], stacklevel=3)
            tols.append(est._tol(lambda unit: _core.mean_variance(Xb, unit)))
        except ValueError as e:
            raise ValueError(f"problem {b}: {e}") from None
        rows.append(Xb)
    engine = est._engine_arguments()
    # each problem's seed as its own KMeans(random_state=...) would draw it: an int is every
    # problem's; None or a RandomState draws one a problem, in order
    seeds = [engine["seed"]] + [est._seed() for _ in range(batch - 1)]
    centroids = None
    if given:
        centroids = np.ascontiguousarray(check_array(init.reshape(-1, init.shape[2]), dtype=np.float64,
                                                     input_name="init", **{_FINITE: True}))
        if init.shape[1:] != (args["k"], X.shape[2]):
            raise ValueError(f"init: an array for a batch has shape (B, n_clusters, d) = ({batch}, {args['k']}, "
                             f"{X.shape[2]}), not {init.shape}")
    # X itself where every problem's checked rows are X's own (C-contiguous, of the fit's dtype): no copy
    in_place = X.flags.c_contiguous and all(r.dtype == X.dtype and np.shares_memory(r, X) for r in rows)
    with est._progress():
        fits, together, seconds = _core.batch_fit(
            X.reshape(-1, X.shape[2]) if in_place else np.concatenate(rows), batch, engine["impl"], args["k"], args["loops"], args["threshold"], tols,
            args["init"], seeds, engine["block"], engine["threads"], args["n_init"], centroids,
            engine["gpus"], engine["device_memory"], args["metric"])
    last_report = {"batch": batch, "together": together, "seconds_per_iteration": seconds,
                   "problems": [json.loads(f["report"]) for f in fits]}
    return (np.stack([f["cluster_centers"] for f in fits]), np.stack([f["labels"] for f in fits]),
            np.array([f["inertia"] for f in fits], dtype=np.float64),
            np.array([f["n_iter"] for f in fits], dtype=np.int64))


def _batch_on_device(X, n_clusters, init, random_state, kw, output):
    """batch_kmeans of a CUDA array (B, N, d), read in place: the problems run as the host batch
    runs them (together with impl="fused" on one GPU), with the seeds the host path draws."""
    global last_report
    device = _input.device_array(X, dims=3)
    if device is None:
        raise TypeError(f"X is a {type(X).__module__}.{type(X).__name__} in GPU memory that kmeans_gpu cannot read "
                        f"in place; pass a CuPy array or a PyTorch CUDA tensor, or copy it to the host")
    batch = device.batch
    make = _input.device_maker(device.owner) if output == "device" else np.asarray  # (before the fit)
    if batch == 0:
        raise ValueError("X: the batch holds no problems (B = 0)")
    if device.n == 0:
        raise ValueError(f"X: invalid shape 0 x {device.d} (both must be positive)")
    given = not isinstance(init, str) and not callable(init)
    if given:
        init = np.asarray(init)
        if init.ndim != 3 or init.shape[0] != batch:
            raise ValueError(f"init: an array for a batch has shape (B, n_clusters, d) = ({batch}, {n_clusters}, "
                             f"{device.d}), not {init.shape}")
    est = KMeans(n_clusters, init=init[0] if given else init, random_state=random_state, **kw)
    want = est._dtype()
    if not isinstance(want, list) and want != device.dtype:
        held = f"{device.input_dtype} (read as float32)" if device.input_dtype else device.dtype
        raise ValueError(f"precision={est.precision!r} with X of {held} in GPU memory: convert X there")
    args = est._problem(device.d, stacklevel=3)
    engine = est._engine_arguments()
    _core.check_device_fit(engine["impl"], args["metric"], args["init"], engine["gpus"])
    seeds = [engine["seed"]] + [est._seed() for _ in range(batch - 1)]
    centroids = None
    if given:
        if init.shape != (batch, args["k"], device.d):
            raise ValueError(f"init: an array for a batch has shape (B, n_clusters, d) = ({batch}, {args['k']}, "
                             f"{device.d}), not {init.shape}")
        centroids = np.ascontiguousarray(check_array(init.reshape(-1, device.d), dtype=np.float64,
                                                     input_name="init", **{_FINITE: True}))
    device.ready(_core)  # (before anything reads X)
    tols = [est._tol(lambda unit, b=b: device.mean_variance(_core, b, unit)) for b in range(batch)]
    with est._progress():
        fits, together, seconds = _core.batch_fit(
            (device.pointer, batch * device.n, device.d, device.dtype == np.float32), batch, engine["impl"],
            args["k"], args["loops"], args["threshold"], tols, args["init"], seeds, engine["block"],
            engine["threads"], args["n_init"], centroids, engine["gpus"], engine["device_memory"], args["metric"])
    problems = [json.loads(f["report"]) for f in fits]
    if device.input_dtype:
        for p in problems:
            p["input_dtype"] = device.input_dtype
    last_report = {"batch": batch, "together": together, "seconds_per_iteration": seconds, "problems": problems}
    return (make(np.stack([f["cluster_centers"] for f in fits])), make(np.stack([f["labels"] for f in fits])),
            np.array([f["inertia"] for f in fits], dtype=np.float64),
            np.array([f["n_iter"] for f in fits], dtype=np.int64))