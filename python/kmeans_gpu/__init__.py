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

Differences from scikit-learn, on purpose:
- an empty cluster keeps its previous centroid (scikit-learn moves it to a far point);
- ``threshold`` (the lab's rule) also stops the loop: when at most that fraction of the
  objects changed cluster (0: none changed, scikit-learn's "strict convergence");
- ``init="first"`` (the first K objects) is the lab's initialisation;
- an integer ``random_state`` is the CLI's ``--seed`` (the same centres as the CLI's run);
- ``fit`` takes no ``sample_weight``; ``n_init`` defaults to 1;
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

from . import _core
from ._core import DeviceError
from ._input import host_array as _host_array

__all__ = ["KMeans", "DeviceError", "implementations", "gpu_available", "last_report"]

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
    elem = 4 if _PRECISIONS.get(precision) == np.float32 else 8
    if n_clusters is None or n_features is None:
        return json.loads(_core.implementations_json())
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

    Attributes
    ----------
    cluster_centers_, labels_ (int32), inertia_, n_iter_, n_features_in_,
    feature_names_in_ (when fitted on a DataFrame), report_ (the fit's JSON report as a dict).
    """

    def __init__(self, n_clusters=8, *, init="k-means++", max_iter=300, tol=1e-4, threshold=0.0, n_init=1,
                 random_state=None, impl=None, precision=None, block=None, n_threads=None, n_gpus=1,
                 device_memory=None, verbose=0):
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

    # -- checks ------------------------------------------------------------------------------

    def _dtype(self):
        if not (self.precision is None or isinstance(self.precision, str)) or self.precision not in _PRECISIONS:
            raise ValueError(f"precision={self.precision!r}: must be 'float', 'double' or None")
        dtype = _PRECISIONS[self.precision]
        return [np.float64, np.float32] if dtype is None else dtype

    def _check_X(self, X, reset, dtype):
        # float16/bfloat16 to float32 exactly, GPU arrays refused (_input.py); then
        # scikit-learn's conversions, n_features_in_, feature names and its message for no
        # features (its estimator checks ask for it); no objects and non-finite values are the
        # engines' to refuse, with the CLI's messages.
        X = _host_array(X)[0]
        return _validate_data(self, X, reset=reset, accept_sparse=False, dtype=dtype, order="C",
                              ensure_min_samples=0, **{_FINITE: False})

    @staticmethod
    def _int(name, value, minimum, option, maximum=_INT_MAX):
        """value as a Python int, at least minimum; above maximum, the CLI's message for its
        option (the engines take C ints: larger values must not reach them)."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name}={value!r}: must be an integer")
        value = int(value)
        if value < minimum:
            raise ValueError(f"{name}={value}: must be at least {minimum}")
        if value > maximum:
            raise ValueError(f"{option}={value} is out of range")
        return value

    def _block(self):
        return 0 if self.block is None else self._int("block", self.block, 1, "--block")

    def _seed(self):
        if isinstance(self.random_state, numbers.Integral) and not isinstance(self.random_state, bool):
            if self.random_state < 0:
                raise ValueError(f"random_state={self.random_state}: must be non-negative")
            if self.random_state > _UINT64_MAX:
                raise ValueError(f"--seed: '{int(self.random_state)}' is out of range")
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    def _impl(self):
        if self.impl is not None and not isinstance(self.impl, str):
            raise TypeError(f"impl={self.impl!r}: must be a name of kmeans_gpu.implementations() or None")
        return self.impl or ""

    def _threads(self):
        if self.n_threads is None:
            return 0
        threads = self._int("n_threads", self.n_threads, 1, "--threads", maximum=np.inf)
        if threads > _core.max_threads:  # the CLI's cap and message
            raise ValueError(f"--threads={threads} must be in 0..{_core.max_threads} (0: all cores)")
        return threads

    def _device_memory(self):
        if self.device_memory is None:
            return 0
        memory = self._int("device_memory", self.device_memory, 1, "--device-memory", maximum=np.inf)
        if memory > _MAX_BYTES:  # the CLI's limit and message
            raise ValueError(f"--device-memory={memory}: give bytes, or a number with K, M, G or T (e.g. 8G)")
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

    def fit(self, X, y=None):
        """Fits on X (n_samples, n_features); y is ignored."""
        global last_report
        X, input_dtype = _host_array(X)
        X = self._check_X(X, reset=True, dtype=self._dtype())
        k = self._int("n_clusters", self.n_clusters, 1, "--clusters")
        loops = self._int("max_iter", self.max_iter, 1, "--loops")
        n_init = self._int("n_init", self.n_init, 1, "--n-init")
        if not isinstance(self.tol, numbers.Real) or not np.isfinite(_float(self.tol)) or self.tol < 0:
            raise ValueError(f"tol={self.tol!r}: must be finite and >= 0")
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
            centroids = check_array(self.init, dtype=np.float64, order="C", **{_FINITE: True})
            if centroids.shape != (k, X.shape[1]):
                raise ValueError(f"the initial centroids have shape {centroids.shape}, not (n_clusters, n_features) "
                                 f"= ({k}, {X.shape[1]})")
            if n_init != 1:
                warnings.warn(f"n_init={n_init} with given centroids: they are used once (n_init=1)", RuntimeWarning,
                              stacklevel=2)
                n_init = 1
        tol = _float(self.tol) * _core.mean_variance(X) if self.tol > 0 and X.size else 0.0
        if not np.isfinite(tol):  # values so large their squares overflow: the engines' range check says so
            tol = None
        with self._progress():
            out = _core.fit(X, self._impl(), k, loops, _float(self.threshold), tol, init, self._seed(),
                            self._block(), self._threads(), n_init, centroids,
                            self._int("n_gpus", self.n_gpus, 1, "--gpus"), self._device_memory())
        self.cluster_centers_ = out["cluster_centers"]
        self.labels_ = out["labels"]
        self.inertia_ = float(out["inertia"])
        self.n_iter_ = int(out["n_iter"])
        self.report_ = json.loads(out["report"])
        if input_dtype:
            self.report_["input_dtype"] = input_dtype
        last_report = self.report_
        return self

    def fit_predict(self, X, y=None):
        """Fits and returns the labels."""
        return self.fit(X).labels_

    def fit_transform(self, X, y=None):
        """Fits and returns the distances to every centroid."""
        return self.fit(X)._distances(X)

    # -- using the centroids -----------------------------------------------------------------

    def _predict(self, X):
        global last_report
        check_is_fitted(self)
        X, input_dtype = _host_array(X)
        X = self._check_X(X, reset=False, dtype=self.cluster_centers_.dtype)
        with self._progress():
            out = _core.predict(X, self._impl(), self.cluster_centers_, self._block(),
                                self._threads(), self._device_memory())
        last_report = json.loads(out["report"])
        if input_dtype:
            last_report["input_dtype"] = input_dtype
        return out

    def predict(self, X):
        """The nearest centroid of every object of X (the CLI's ``--predict``)."""
        return self._predict(X)["labels"]

    def score(self, X, y=None):
        """Minus the inertia of X against the centroids (larger is better, as scikit-learn)."""
        return -float(self._predict(X)["inertia"])

    def _distances(self, X):
        X = self._check_X(X, reset=False, dtype=self.cluster_centers_.dtype)
        if X.size and not np.isfinite(X).all():
            _core.predict(X, "seq", self.cluster_centers_, 128, 1)  # raises the CLI's message
        return euclidean_distances(X, self.cluster_centers_)

    def transform(self, X):
        """The Euclidean distance of every object of X to every centroid, (n_samples, n_clusters)."""
        check_is_fitted(self)
        return self._distances(X)
