// kmeans_gpu._core: the registry's engines for Python, over NumPy arrays without a copy.
//
// The estimator (python/kmeans_gpu/__init__.py) converts and checks what scikit-learn's
// conventions ask for, then calls fit()/predict() here with a C-contiguous float32 or float64
// array. That array's memory becomes the Dataset's (HostBuffer::borrow): the engines read it
// in place, as they read a file the CLI loaded. The GIL is released while the engines run;
// Ctrl-C ends the run with KeyboardInterrupt: every iteration and every k-means++ centre
// polls for it, and the CPU loops test for it once per chunk of objects (SigintFlag). The
// library's errors become Python exceptions: UsageError and InputError -> ValueError with the
// CLI's message, DeviceError -> kmeans_gpu.DeviceError (a RuntimeError); OMP_NUM_THREADS
// above the CLI's cap is clamped as the CLI clamps it; nothing aborts the interpreter.
// fit_parted is one rank's share of a fit over an mpi4py communicator (kmeans_gpu/_ranks.py),
// its collectives through the Python Team (py_team.hpp).
#include <omp.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli/options.hpp"  // kMaxThreads: the CLI's cap on CPU threads
#include "common/errors.hpp"
#include "common/progress.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "common/stats.hpp"
#include "kernels/kmeans/unit_norm.hpp"
#include "kmeans/batch.hpp"
#include "kmeans/device_view.hpp"
#include "kmeans/metric.hpp"
#include "kmeans/registry.hpp"
#include "python/dlpack_out.hpp"
#include "python/messages.hpp"
#include "python/py_team.hpp"
#include "report/report.hpp"

namespace py = pybind11;

namespace {

// Runs with the GIL released; called back with it held only to poll for signals.
bool python_interrupt_pending() {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

// Ctrl-C inside one long loop. Python's own SIGINT handler only notes the signal for the main
// thread's next PyErr_CheckSignals, which python_interrupt_pending() calls between iterations.
// While a fit runs in the main thread under Python's default handler, this handler goes in
// front of it: it sets progress's flag, which the CPU loops test once per chunk of objects, and
// then calls Python's, so that PyErr_CheckSignals raises the KeyboardInterrupt afterwards.
struct sigaction python_sigint;

void on_sigint(int sig, siginfo_t* info, void* context) {
  km::progress::request_interrupt();
  if (python_sigint.sa_flags & SA_SIGINFO) python_sigint.sa_sigaction(sig, info, context);
  else if (python_sigint.sa_handler != SIG_DFL && python_sigint.sa_handler != SIG_IGN) python_sigint.sa_handler(sig);
}

// Installs on_sigint for its lifetime where that is safe (GIL held when made and destroyed).
// The flag is process-wide: a fit running in another thread meanwhile stops too, and raises
// KeyboardInterrupt there.
class SigintFlag {
 public:
  SigintFlag() {
    const py::module_ threading = py::module_::import("threading"), signal = py::module_::import("signal");
    if (!threading.attr("current_thread")().is(threading.attr("main_thread")())) return;
    if (!signal.attr("getsignal")(SIGINT).is(signal.attr("default_int_handler"))) return;  // the user's handler
    if (sigaction(SIGINT, nullptr, &python_sigint) != 0) return;
    if (!(python_sigint.sa_flags & SA_SIGINFO) &&
        (python_sigint.sa_handler == SIG_DFL || python_sigint.sa_handler == SIG_IGN))
      return;  // not Python's handler after all
    struct sigaction mine {};
    mine.sa_sigaction = on_sigint;
    mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&mine.sa_mask);
    km::progress::clear_interrupt();
    installed_ = sigaction(SIGINT, &mine, nullptr) == 0;
  }
  ~SigintFlag() {
    if (!installed_) return;
    sigaction(SIGINT, &python_sigint, nullptr);
    km::progress::clear_interrupt();
  }
  SigintFlag(const SigintFlag&) = delete;
  SigintFlag& operator=(const SigintFlag&) = delete;

 private:
  bool installed_ = false;
};

// OMP_NUM_THREADS above the CLI's cap crashes libgomp at the first parallel region. As the CLI
// does, clamp it to the cap (in this thread: the setting is per thread), with the CLI's note as
// a RuntimeWarning.
void clamp_openmp_threads() {
  const int threads = omp_get_max_threads();
  if (threads <= km::cli::kMaxThreads) return;
  omp_set_num_threads(km::cli::kMaxThreads);
  const std::string note = km::strprintf("OMP_NUM_THREADS=%d is above the limit of %d threads; using %d", threads,
                                         km::cli::kMaxThreads, km::cli::kMaxThreads);
  if (PyErr_WarnEx(PyExc_RuntimeWarning, note.c_str(), 1) != 0) throw py::error_already_set();
}

// The CLI's check of --threads (n_threads reaches here as 0 for None, or at least 1).
int checked_threads(int threads) {
  if (threads < 0 || threads > km::cli::kMaxThreads)
    throw km::UsageError(
        km::strprintf("--threads=%d must be in 0..%d (0: all cores)", threads, km::cli::kMaxThreads));
  return threads;
}

// check_finite: here (mean_variance); fit and predict leave it to the registry's range check,
// which finds a NaN or Inf in the pass it makes anyway and names it the same way ("X: ...").
// A part (one rank's rows of a fit over ranks) may have no rows.
template <class T>
km::Dataset<T> view(const py::array& x, bool check_finite = false, bool part = false) {
  // The estimator hands over C-contiguous 2-D arrays of T; anything else is its bug.
  if (x.ndim() != 2 || !(x.flags() & py::array::c_style) || !py::isinstance<py::array_t<T>>(x))
    throw km::UsageError("internal: expected a C-contiguous 2-D array of the run's precision");
  km::Dataset<T> data;
  data.n = static_cast<std::size_t>(x.shape(0));
  data.d = static_cast<std::size_t>(x.shape(1));
  data.source = "X";
  data.element = sizeof(T) == 4 ? "float32" : "float64";  // the estimator reports a 16-bit X's own type
  km::check_shape(static_cast<std::int64_t>(part ? std::max<std::size_t>(data.n, 1) : data.n),
                  static_cast<std::int64_t>(data.d), sizeof(T), "X");
  data.values = km::HostBuffer<T>::borrow(static_cast<const T*>(x.data()), data.n * data.d);
  if (check_finite) km::check_finite(data, "X");
  return data;
}

struct Options {
  std::string impl;
  int k = 8, loops = 300, block = 128, threads = 0, n_init = 1, gpus = 1;
  std::size_t device_memory = 0;  // 0: what is free
  double threshold = 0;
  std::optional<double> tol;
  std::string init = "kmeans++";
  std::string metric = "euclidean";
  std::uint64_t seed = 0;
  std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>> centroids;
  std::optional<py::array> sample_weight;  // 1-D, C-contiguous, X's dtype and length (the estimator's)
};

// Options::sample_weight as data's weights, borrowed (the caller keeps the array alive).
template <class T>
void attach_weights(km::Dataset<T>& data, const Options& o) {
  if (!o.sample_weight) return;
  const py::array& w = *o.sample_weight;
  if (w.ndim() != 1 || !(w.flags() & py::array::c_style) || !py::isinstance<py::array_t<T>>(w) ||
      static_cast<std::size_t>(w.shape(0)) != data.n)
    throw km::UsageError("internal: expected sample weights as a C-contiguous 1-D array of X's dtype and length");
  data.weights = km::HostBuffer<T>::borrow(static_cast<const T*>(w.data()), data.n);
}

km::Params params_of(const Options& o, std::size_t d) {
  km::Params p;
  p.k = o.k;
  p.loops = o.loops;
  p.threshold = o.threshold;
  p.tol = o.tol;
  p.seed = o.seed;
  // 0 (Python's block=None): the implementation's choice (Params's default; fused's measured best)
  p.block = o.block > 0 ? o.block : km::Params{}.block;
  p.block_given = o.block > 0;
  p.threads = o.threads;
  p.n_init = o.n_init;
  p.metric = km::metric_from_string(o.metric);
  p.gpus = o.gpus;
  p.device_memory = o.device_memory;
  if (o.centroids) {
    const auto& c = *o.centroids;
    if (c.ndim() != 2 || static_cast<std::size_t>(c.shape(1)) != d)
      throw km::UsageError(km::strprintf("the centroids have %zu coordinates but the data has %zu",
                                         c.ndim() == 2 ? static_cast<std::size_t>(c.shape(1)) : 0, d));
    p.init = km::Init::given;
    p.given_d = d;
    p.given_centroids.assign(c.data(), c.data() + c.size());
    p.k = static_cast<int>(c.shape(0));
  } else {
    p.init = km::init_from_string(o.init);
  }
  return p;
}

const km::Implementation& implementation(const std::string& name) {
  const km::Implementation& impl =
      km::find_implementation(name.empty() ? km::default_implementation(km::gpu_info().present) : name);
  km::require_runnable(impl, km::gpu_info());
  return impl;
}

template <class T>
py::dict to_python(const km::Implementation& impl, const km::Dataset<T>& data, const km::Params& params,
                   km::Result<T>& result, bool predicting) {
  km::RunReport report = km::make_report(impl.name, data, params, result);
  if (predicting) report.init = "predict";
  std::ostringstream json;
  km::write_json(json, report);

  const auto k = static_cast<py::ssize_t>(params.k), d = static_cast<py::ssize_t>(data.d);
  py::array_t<T> centers({k, d});
  std::copy(result.centroids.begin(), result.centroids.end(), centers.mutable_data());
  py::array_t<std::int32_t> labels(static_cast<py::ssize_t>(result.labels.size()));
  std::copy(result.labels.begin(), result.labels.end(), labels.mutable_data());

  py::dict out;
  out["cluster_centers"] = centers;
  out["labels"] = labels;
  out["inertia"] = result.inertia;
  out["n_iter"] = result.iterations;
  out["converged"] = result.converged;
  out["report"] = json.str();
  return out;
}

// Runs fn() with the GIL released and Ctrl-C polled; a pending signal's exception is raised.
template <class F>
auto interruptible(F&& fn) {
  struct Poll {
    Poll() { km::progress::set_poll(python_interrupt_pending); }
    ~Poll() { km::progress::set_poll(nullptr); }
  } poll;
  const SigintFlag flag;
  try {
    py::gil_scoped_release release;
    return fn();
  } catch (const km::progress::Interrupted&) {
    // The KeyboardInterrupt PyErr_CheckSignals left set, or (flagged by on_sigint) raises now.
    if (PyErr_Occurred() || PyErr_CheckSignals() != 0) throw py::error_already_set();
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
}

template <class T>
py::dict fit(const py::array& x, const Options& o) {
  km::Dataset<T> data = view<T>(x);
  attach_weights(data, o);
  const km::Params params = params_of(o, data.d);
  const km::Implementation& impl = implementation(o.impl);
  km::Result<T> result = interruptible([&] {
    km::progress::Iterations shown(params.loops, params.n_init);  // polls as progress::poll() does
    return km::run(impl, data, params, [&](int it, const km::IterationStats& s) { shown(it, s.changed, s.inertia); });
  });
  return to_python(impl, data, params, result, false);
}

template <class T>
py::dict predict(const py::array& x, const Options& o) {
  km::Dataset<T> data = view<T>(x);
  attach_weights(data, o);
  const km::Params params = params_of(o, data.d);
  const km::Implementation& impl = implementation(o.impl);
  km::Result<T> result = interruptible([&] { return km::predict(impl, data, params); });
  return to_python(impl, data, params, result, true);
}

// X in CUDA memory (a CuPy array, a PyTorch tensor: kmeans_gpu/_input.py: device_array), n x d
// row-major at `address` on the current device: read there by the engines (registry.hpp:
// check_device_data says which fits).
template <class T>
km::Dataset<T> device_view(std::uintptr_t address, std::size_t n, std::size_t d) {
  return km::device_view<T>(reinterpret_cast<const void*>(address), n, d, "X");
}

template <class T>
py::dict on_device(std::uintptr_t address, std::size_t n, std::size_t d, const Options& o, bool predicting) {
  const km::Dataset<T> data = device_view<T>(address, n, d);
  const km::Params params = params_of(o, d);
  const km::Implementation& impl = implementation(o.impl);
  km::Result<T> result = interruptible([&] {
    if (predicting) return km::predict(impl, data, params);
    km::progress::Iterations shown(params.loops, params.n_init);
    return km::run(impl, data, params, [&](int it, const km::IterationStats& s) { shown(it, s.changed, s.inertia); });
  });
  return to_python(impl, data, params, result, predicting);
}

py::dict dispatch_device(std::uintptr_t address, std::size_t n, std::size_t d, bool single, const Options& o,
                         bool predicting) {
  clamp_openmp_threads();
  return single ? on_device<float>(address, n, d, o, predicting) : on_device<double>(address, n, d, o, predicting);
}

py::dict dispatch(const py::array& x, const Options& o, bool predicting) {
  clamp_openmp_threads();
  if (py::isinstance<py::array_t<float>>(x)) return predicting ? predict<float>(x, o) : fit<float>(x, o);
  if (py::isinstance<py::array_t<double>>(x)) return predicting ? predict<double>(x, o) : fit<double>(x, o);
  throw km::UsageError("internal: X must be float32 or float64");
}

Options options(const std::string& impl, int k, int loops, double threshold, std::optional<double> tol,
                const std::string& init, std::uint64_t seed, int block, int threads, int n_init,
                std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>> centroids,
                int gpus = 1, std::size_t device_memory = 0, const std::string& metric = "euclidean",
                std::optional<py::array> sample_weight = std::nullopt) {
  Options o;
  o.sample_weight = std::move(sample_weight);
  o.metric = metric;
  o.gpus = gpus;
  o.device_memory = device_memory;
  o.impl = impl;
  o.k = k;
  o.loops = loops;
  o.threshold = threshold;
  o.tol = tol;
  o.init = init;
  o.seed = seed;
  o.block = block;
  o.threads = checked_threads(threads);
  o.n_init = n_init;
  o.centroids = std::move(centroids);
  return o;
}

// B problems of n rows each, one after another in data (B n x d, on the host or the device):
// km::run_batch, problem b with tol tols[b], seed seeds[b] and, when given, initial centroids
// centroids[b] ((B, K, d) as B K x d rows). Returns (the problems' results as fit's dicts, whether
// the iterations ran together, the batch's median seconds per iteration).
template <class T>
py::tuple batch_fit(const km::Dataset<T>& data, std::size_t batch, const Options& o,
                    const std::vector<std::optional<double>>& tols, const std::vector<std::uint64_t>& seeds,
                    const std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>>& centroids) {
  if (batch == 0 || data.n % batch != 0 || tols.size() != batch || seeds.size() != batch)
    throw km::UsageError("internal: a batch's rows, problems, tols and seeds do not agree");
  const km::Params base = params_of(o, data.d);
  const std::size_t per = static_cast<std::size_t>(o.k) * data.d;
  if (centroids && static_cast<std::size_t>(centroids->size()) != batch * per)
    throw km::UsageError("internal: the batch's initial centroids are not (B, n_clusters, d)");
  std::vector<km::Params> params(batch, base);
  for (std::size_t b = 0; b < batch; ++b) {
    params[b].tol = tols[b];
    params[b].seed = seeds[b];
    if (centroids) {
      params[b].init = km::Init::given;
      params[b].given_d = data.d;
      params[b].given_centroids.assign(centroids->data() + b * per, centroids->data() + (b + 1) * per);
    }
  }
  const km::Implementation& impl = implementation(o.impl);
  km::BatchResult<T> fits = interruptible([&] {
    km::progress::Iterations shown(base.loops, base.n_init);  // the first problem's (it polls Ctrl-C)
    return km::run_batch(impl, data, batch, params, [&](std::size_t b, int it, const km::IterationStats& s) {
      if (b == 0) shown(it, s.changed, s.inertia);
      else km::progress::poll();  // Ctrl-C, after the first problem has stopped too
    });
  });
  py::list out;
  for (std::size_t b = 0; b < batch; ++b) {
    km::Dataset<T> one;  // the report's facts of problem b
    one.n = data.n / batch;
    one.d = data.d;
    one.source = "X[" + std::to_string(b) + "]";
    one.element = data.element;
    out.append(to_python(impl, one, params[b], fits.problems[b], false));
  }
  return py::make_tuple(out, fits.together, km::median(fits.iteration_seconds));
}

// The mean over the columns of their variance (two passes, in double): scikit-learn's scale
// for tol, without NumPy's temporary copies of X. Rows are summed in fixed chunks of 4,096, the
// chunks' sums added in chunk order, so the result is the same bits on any thread count and
// every run (tol decides when a fit stops). One process takes up to 1,024 chunks at a time. Over
// a team of `total` rows, each rank holding whole chunks in rank order (split_rows), every rank
// sums its chunks at once, then the ranks add their chunks' sums in turn, each from where the
// rank before left them: the single process's bits.
constexpr std::size_t kVarianceRows = 4096, kVarianceBatch = 1024;
static_assert(km::kRowGranule % kVarianceRows == 0, "a rank's rows are whole chunks");

template <class T>
double mean_variance(const km::Dataset<T>& data, km::Team& team, std::size_t total, bool unit = false) {
  const std::size_t n = data.n, d = data.d, chunks = (n + kVarianceRows - 1) / kVarianceRows;
  const std::size_t batch = team.size() > 1 ? chunks : std::min(chunks, kVarianceBatch);
  std::vector<double> part(batch * d), mean(d, 0.0), var(d, 0.0);
  // part = the sums of chunks [c0, c0 + count); then out += them, in chunk order.
  const auto sum_chunks = [&](bool second, std::size_t c0, std::size_t count) {
    std::fill(part.begin(), part.end(), 0.0);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t b = 0; b < count; ++b) {
      double* p = part.data() + b * d;
      const std::size_t c = c0 + b;
      for (std::size_t i = c * kVarianceRows; i < std::min(n, (c + 1) * kVarianceRows); ++i) {
        const T* x = data.row(i);
        // unit: the row as the cosine fit sees it (metric.hpp: unit_rows, a row of length 0 kept 0)
        const double norm = unit ? km::kernels::ordered_norm([&](int j) { return x[j]; }, static_cast<int>(d)) : 0.0;
        for (std::size_t j = 0; j < d; ++j) {
          const double v = !unit ? static_cast<double>(x[j])
                           : norm > 0 ? static_cast<double>(km::kernels::unit_coordinate(x[j], norm))
                                      : 0.0;
          p[j] += second ? (v - mean[j]) * (v - mean[j]) : v;
        }
      }
    }
  };
  const auto add_chunks = [&](std::size_t count, std::vector<double>& out) {
    for (std::size_t b = 0; b < count; ++b)
      for (std::size_t j = 0; j < d; ++j) out[j] += part[b * d + j];
  };
  const auto pass = [&](bool second) {
    std::vector<double>& out = second ? var : mean;
    if (team.size() == 1) {
      for (std::size_t c0 = 0; c0 < chunks; c0 += batch) {
        sum_chunks(second, c0, std::min(batch, chunks - c0));
        add_chunks(std::min(batch, chunks - c0), out);
      }
    } else {
      sum_chunks(second, 0, chunks);
      for (int r = 0; r < team.size(); ++r) {  // rank r adds its chunks, then hands the sums on
        if (r == team.rank()) add_chunks(chunks, out);
        out = km::gather_all(team, r == team.rank() ? out : std::vector<double>{});
      }
    }
    for (double& v : out) v /= static_cast<double>(total);
  };
  pass(false);
  pass(true);
  double sum = 0;
  for (double v : var) sum += v;
  return sum / static_cast<double>(d);
}

// One rank's share of a fit over the ranks of a Python Team (py_team.hpp): x holds this rank's
// rows of `total`, those km::split_rows gives it. Every rank gets the single process's
// centroids, inertia and iterations, and the labels of its own rows.
template <class T>
py::dict fit_parted(const py::array& x, const Options& o, kmeans_python::PyTeam& team, std::size_t total) {
  km::Dataset<T> data = view<T>(x, false, true);
  attach_weights(data, o);
  const km::Params params = params_of(o, data.d);
  const km::Implementation& impl = implementation(o.impl);
  const km::RowSplit split = km::split_rows(total, team.rank(), team.size());
  if (split.count != data.n) throw km::UsageError("internal: this rank's rows are not those split_rows gives it");
  km::Result<T> result = kmeans_python::over_team(
      team, [&] { return km::run_parted(impl, data, split, team, params, {}, km::PartLabels::own); });
  return to_python(impl, data, params, result, false);
}

// The functions of a fit over ranks (kmeans_gpu/_ranks.py): each rank's share of the work,
// the row split, and what a rank checks alone before the ranks agree.
void add_parted(py::module_& m) {
  m.def(
      "mean_variance_parted",
      [](const py::array& x, const py::object& team_object, std::size_t total, bool unit) {
        clamp_openmp_threads();
        kmeans_python::PyTeam team(team_object);
        const auto run = [&](auto tag) {
          const auto data = view<decltype(tag)>(x, false, true);  // checked before it was moved
          return kmeans_python::over_team(team, [&] { return mean_variance(data, team, total, unit); });
        };
        return py::isinstance<py::array_t<float>>(x) ? run(float{}) : run(double{});
      },
      py::arg("X"), py::arg("team"), py::arg("total"), py::arg("unit") = false,
      "mean_variance over the ranks of a Team, X this rank's rows of `total` (split_rows').");
  m.def(
      "fit_parted",
      [](const py::array& x, const std::string& impl, int k, int loops, double threshold, std::optional<double> tol,
         const std::string& init, std::uint64_t seed, int block, int threads, int n_init,
         std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>> centroids, int gpus,
         std::size_t device_memory, const std::string& metric, const py::object& team_object, std::size_t total,
         std::optional<py::array> sample_weight) {
        const Options o = options(impl, k, loops, threshold, tol, init, seed, block, threads, n_init, centroids, gpus,
                                  device_memory, metric, std::move(sample_weight));
        clamp_openmp_threads();
        kmeans_python::PyTeam team(team_object);
        if (py::isinstance<py::array_t<float>>(x)) return fit_parted<float>(x, o, team, total);
        return fit_parted<double>(x, o, team, total);
      },
      py::arg("X"), py::arg("impl"), py::arg("k"), py::arg("loops"), py::arg("threshold"), py::arg("tol"),
      py::arg("init"), py::arg("seed"), py::arg("block"), py::arg("threads"), py::arg("n_init"),
      py::arg("centroids"), py::arg("gpus"), py::arg("device_memory"), py::arg("metric"), py::arg("team"),
      py::arg("total"), py::arg("sample_weight") = py::none(),
      "One rank's share of a fit over a Team's ranks (kmeans_gpu/_ranks.py); X: its rows, split_rows'.");
  m.def(
      "check_finite",
      [](const py::array& x) {
        const auto run = [&](auto tag) {
          const auto data = view<decltype(tag)>(x, false, true);
          py::gil_scoped_release release;
          km::check_finite(data, "X");
        };
        py::isinstance<py::array_t<float>>(x) ? run(float{}) : run(double{});
      },
      py::arg("X"), "Raises ValueError naming X's first NaN or infinity.");
  m.def(
      "check_weights",
      [](const py::array& x, const py::array& w) {  // (w: C-contiguous, X's dtype, one per row: _sample_weight)
        const auto run = [&](auto tag) {
          using T = decltype(tag);
          auto data = view<T>(x, false, true);
          const auto* weights = static_cast<const T*>(w.data());
          data.weights = km::HostBuffer<T>::borrow(weights, static_cast<std::size_t>(w.size()));
          py::gil_scoped_release release;
          km::check_weights(data);
        };
        py::isinstance<py::array_t<float>>(x) ? run(float{}) : run(double{});
      },
      py::arg("X"), py::arg("sample_weight"), "Raises ValueError naming the first bad weight of X's rows.");
  m.def(
      "split_rows",
      [](std::size_t total, int rank, int ranks) {
        if (ranks < 1 || rank < 0 || rank >= ranks) throw km::UsageError("split_rows: need 0 <= rank < ranks");
        const km::RowSplit s = km::split_rows(total, rank, ranks);
        return py::make_tuple(s.first, s.count);
      },
      py::arg("total"), py::arg("rank"), py::arg("ranks"),
      "(first, count): the rows of `total` that rank `rank` of `ranks` holds in a parted fit.");
  m.def(
      "resolve_implementation",
      [](const std::string& name) {
        const km::Implementation& impl = implementation(name);
        return py::make_tuple(std::string(impl.name), km::partable(impl), impl.needs_gpu());
      },
      py::arg("impl"),
      "(name, partable, on_gpu): the implementation a fit runs ('' the default), whether it runs parted, where.");
}

// The bindings that read rows in CUDA memory at an address (kmeans_gpu/_input.py: device_array).
void add_device(py::module_& m) {
  m.def(
      "fit_device",
      [](std::uintptr_t address, std::size_t n, std::size_t d, bool single, const std::string& impl, int k, int loops,
         double threshold, std::optional<double> tol, const std::string& init, std::uint64_t seed, int block,
         int threads, int n_init, std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>> centroids,
         int gpus, std::size_t device_memory, const std::string& metric) {
        return dispatch_device(address, n, d, single,
                               options(impl, k, loops, threshold, tol, init, seed, block, threads, n_init, centroids,
                                       gpus, device_memory, metric),
                               false);
      },
      py::arg("address"), py::arg("n"), py::arg("d"), py::arg("single"), py::arg("impl"), py::arg("k"),
      py::arg("loops"), py::arg("threshold"), py::arg("tol"), py::arg("init"), py::arg("seed"), py::arg("block"),
      py::arg("threads"), py::arg("n_init"), py::arg("centroids"), py::arg("gpus") = 1, py::arg("device_memory") = 0,
      py::arg("metric") = "euclidean",
      "Fits n x d values (float32 when single, else float64), row-major in CUDA memory at address, read there.");
  m.def(
      "check_device_fit",
      [](const std::string& impl, const std::string& metric, const std::string& init, int gpus) {
        static const double somewhere = 0;  // (never read: the check looks at where the data is, not at it)
        km::Dataset<double> data;
        data.n = data.d = 1;
        data.device_values = &somewhere;
        km::Params p;
        p.metric = km::metric_from_string(metric);
        p.init = km::init_from_string(init);
        p.gpus = gpus;
        const km::Implementation& chosen =
            km::find_implementation(impl.empty() ? km::default_implementation(km::gpu_info().present) : impl);
        km::check_device_data(chosen, data, p);
        km::require_runnable(chosen, km::gpu_info());
      },
      py::arg("impl"), py::arg("metric"), py::arg("init"), py::arg("gpus"),
      "Raises ValueError unless a fit with these settings reads data in GPU memory (before anything reads it).");
  m.def(
      "predict_device",
      [](std::uintptr_t address, std::size_t n, std::size_t d, bool single, const std::string& impl,
         py::array_t<double, py::array::c_style | py::array::forcecast> centroids, int block, int threads,
         std::size_t device_memory, const std::string& metric) {
        return dispatch_device(address, n, d, single,
                               options(impl, 1, 1, 0, std::nullopt, "first", 0, block, threads, 1, centroids, 1,
                                       device_memory, metric),
                               true);
      },
      py::arg("address"), py::arg("n"), py::arg("d"), py::arg("single"), py::arg("impl"), py::arg("centroids"),
      py::arg("block"), py::arg("threads"), py::arg("device_memory") = 0, py::arg("metric") = "euclidean",
      "Labels n x d values in CUDA memory at address with the given centroids, read there.");
  m.def(
      "device_ready",
      [](std::uintptr_t address, std::size_t n, std::size_t d, bool single) {
        if (single) device_view<float>(address, n, d);
        else device_view<double>(address, n, d);
        // The producers' pending work on X, on whatever stream (PyTorch's and JAX's interfaces
        // name none; a conversion just queued, a side stream): done before the engines, whose
        // streams do not wait for other streams, read it. (Without the GIL: a producer's host
        // callback may need it.)
        py::gil_scoped_release release;
        km::wait_for_device();
      },
      py::arg("address"), py::arg("n"), py::arg("d"), py::arg("single"),
      "Checks that n x d values at address are this GPU's memory, aligned (ValueError naming what is wrong), "
      "then waits for the device's pending work, before anything reads them.");
  m.def(
      "mean_variance_device",
      [](std::uintptr_t address, std::size_t n, std::size_t d, bool single, bool unit) {
        const auto run = [&](auto tag) {
          using T = decltype(tag);
          const km::Dataset<T> view = device_view<T>(address, n, d);
          km::Dataset<T> data(n, d, "X");
          py::gil_scoped_release release;
          CUDA_CHECK(cudaMemcpy(data.values.data(), view.device_values, n * d * sizeof(T), cudaMemcpyDeviceToHost));
          return mean_variance(data, km::solo_team(), data.n, unit);
        };
        return single ? run(float{}) : run(double{});
      },
      py::arg("address"), py::arg("n"), py::arg("d"), py::arg("single"), py::arg("unit") = false,
      "mean_variance of n x d values in CUDA memory, from a host copy (arrays without a library of their own).");
}

// The module's small queries and switches: the registry, the GPU's presence, progress lines, the
// calling-overhead baseline.
void add_utilities(py::module_& m) {
  m.def(
      "data_address", [](const py::array& x) { return reinterpret_cast<std::uintptr_t>(x.data()); }, py::arg("X"),
      "The address the engines would read X from (the zero-copy test compares it with X's).");
  m.def("implementations_json", [](std::size_t k, std::size_t d, std::size_t elem) { return km::registry_json(k, d, elem); },
        py::arg("k") = 0, py::arg("d") = 0, py::arg("elem") = 8, "The registry as the CLI's --list JSON.");
  m.attr("max_threads") = km::cli::kMaxThreads;  // the CLI's cap on --threads (n_threads)
  m.def("gpu_available", [] { return km::gpu_info().present; }, "Whether a usable CUDA GPU is present.");
  m.def(
      "release_device_memory",
      [] {
        if (km::gpu_info().present) km::cuda::trim_device_pools();
      },
      "Hands the device memory that earlier fits left in the pool back to the driver.");
  m.def(
      "show_progress",
      [](bool on) {
        if (on) km::progress::enable("kmeans_gpu");
        else km::progress::disable();
      },
      py::arg("on"),
      "Progress lines on stderr from this thread's fits and predictions when it is a terminal (verbose), or none.");
  m.def("gpu_why_absent", [] { return km::gpu_info().why_absent; }, "Why no GPU is usable ('' when one is).");
  m.def("default_implementation", [] { return km::default_implementation(km::gpu_info().present); },
        "fused with a GPU, else omp.");
  m.def(
      "time_cpp_fit",
      [](const py::array& x, const std::string& impl, int k, int loops, int repeats) {
        // The same fit through the C++ API, timed in C++: the baseline for the calling overhead.
        clamp_openmp_threads();
        Options o = options(impl, k, loops, 0, std::nullopt, "first", 0, 128, 0, 1, std::nullopt);
        std::vector<double> seconds;
        const auto time = [&](auto tag) {
          using T = decltype(tag);
          const km::Dataset<T> data = view<T>(x);
          const km::Params params = params_of(o, data.d);
          const km::Implementation& impl_ = implementation(o.impl);
          py::gil_scoped_release release;
          for (int r = 0; r < repeats; ++r) {
            km::Stopwatch watch;
            const auto result = km::run(impl_, data, params);
            seconds.push_back(watch.seconds());
          }
        };
        if (py::isinstance<py::array_t<float>>(x)) time(float{});
        else time(double{});
        return seconds;
      },
      py::arg("X"), py::arg("impl"), py::arg("k"), py::arg("loops"), py::arg("repeats"),
      "Seconds of each of `repeats` fits (first-K init) through the C++ API, timed in C++.");
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "kmeans-gpu's engines (use kmeans_gpu.KMeans)";
  m.attr("__version__") = KMEANS_GPU_VERSION;
  m.def("python_names", &kmpy::python_names, py::arg("message"),
        "A core message with the command line's option names as KMeans's parameters' (--clusters -> n_clusters)");

  static py::exception<km::DeviceError> device_error(m, "DeviceError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const km::UsageError& e) {
      PyErr_SetString(PyExc_ValueError, kmpy::python_names(e.what()).c_str());
    } catch (const km::InputError& e) {
      PyErr_SetString(PyExc_ValueError, kmpy::python_names(e.what()).c_str());
    } catch (const km::DeviceError& e) {
      PyErr_SetString(device_error.ptr(), e.what());
    }
  });

  m.def(
      "fit",
      [](const py::array& x, const std::string& impl, int k, int loops, double threshold, std::optional<double> tol,
         const std::string& init, std::uint64_t seed, int block, int threads, int n_init,
         std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>> centroids, int gpus,
         std::size_t device_memory, const std::string& metric, std::optional<py::array> sample_weight) {
        return dispatch(x,
                        options(impl, k, loops, threshold, tol, init, seed, block, threads, n_init, centroids, gpus,
                                device_memory, metric, std::move(sample_weight)),
                        false);
      },
      py::arg("X"), py::arg("impl"), py::arg("k"), py::arg("loops"), py::arg("threshold"), py::arg("tol"),
      py::arg("init"), py::arg("seed"), py::arg("block"), py::arg("threads"), py::arg("n_init"),
      py::arg("centroids"), py::arg("gpus") = 1, py::arg("device_memory") = 0, py::arg("metric") = "euclidean",
      py::arg("sample_weight") = py::none(),
      "Fits X (C-contiguous float32/float64, used in place; sample_weight: None or X's dtype, 1-D); returns a "
      "dict of the result and the JSON report.");
  m.def(
      "predict",
      [](const py::array& x, const std::string& impl, py::array_t<double, py::array::c_style | py::array::forcecast>
                                                         centroids,
         int block, int threads, std::size_t device_memory, const std::string& metric,
         std::optional<py::array> sample_weight) {
        return dispatch(x,
                        options(impl, 1, 1, 0, std::nullopt, "first", 0, block, threads, 1, centroids, 1,
                                device_memory, metric, std::move(sample_weight)),
                        true);
      },
      py::arg("X"), py::arg("impl"), py::arg("centroids"), py::arg("block"), py::arg("threads"),
      py::arg("device_memory") = 0, py::arg("metric") = "euclidean", py::arg("sample_weight") = py::none(),
      "Labels X with the given centroids; returns a dict of labels, inertia and the JSON report.");
  m.def(
      "unit_rows",
      [](const py::array& x) {
        const auto run = [&](auto tag) {
          using T = decltype(tag);
          const auto data = view<T>(x);
          py::array_t<T> out({data.n, data.d});
          {
            py::gil_scoped_release release;
            const km::Dataset<T> unit = km::unit_rows(data);
            std::copy(unit.values.data(), unit.values.data() + data.n * data.d, out.mutable_data());
          }
          return py::object(out);
        };
        return py::isinstance<py::array_t<float>>(x) ? run(float{}) : run(double{});
      },
      py::arg("X"), "X's rows at length 1 as the cosine fit makes them (metric.hpp: unit_rows; a row of length 0 "
                    "kept 0), for transform.");
  m.def(
      "mean_variance",
      [](const py::array& x, bool unit) {
        clamp_openmp_threads();
        const auto run = [&](auto tag) {
          const auto data = view<decltype(tag)>(x, true);
          py::gil_scoped_release release;
          return mean_variance(data, km::solo_team(), data.n, unit);
        };
        return py::isinstance<py::array_t<float>>(x) ? run(float{}) : run(double{});
      },
      py::arg("X"), py::arg("unit") = false,
      "The mean of X's column variances (scikit-learn's scale for tol); unit: of X's rows at length 1 (the cosine "
      "and dot metrics' scale, whose centroids have length 1).");
  m.def(
      "batch_fit",
      [](const py::object& x, std::size_t batch, const std::string& impl, int k, int loops, double threshold,
         const std::vector<std::optional<double>>& tols, const std::string& init,
         const std::vector<std::uint64_t>& seeds, int block, int threads, int n_init,
         std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>> centroids, int gpus,
         std::size_t device_memory, const std::string& metric) {
        const Options o = options(impl, k, loops, threshold, std::nullopt, init, 0, block, threads, n_init,
                                  std::nullopt, gpus, device_memory, metric);
        clamp_openmp_threads();
        if (py::isinstance<py::tuple>(x)) {  // (address, rows, d, single): rows x d values in CUDA memory
          const auto [address, rows, d, single] = x.cast<std::tuple<std::uintptr_t, std::size_t, std::size_t, bool>>();
          if (single) return batch_fit(device_view<float>(address, rows, d), batch, o, tols, seeds, centroids);
          return batch_fit(device_view<double>(address, rows, d), batch, o, tols, seeds, centroids);
        }
        if (py::isinstance<py::array_t<float>>(x)) return batch_fit(view<float>(x), batch, o, tols, seeds, centroids);
        if (py::isinstance<py::array_t<double>>(x)) return batch_fit(view<double>(x), batch, o, tols, seeds, centroids);
        throw km::UsageError("internal: X must be float32 or float64");
      },
      py::arg("X"), py::arg("batch"), py::arg("impl"), py::arg("k"), py::arg("loops"), py::arg("threshold"),
      py::arg("tols"), py::arg("init"), py::arg("seeds"), py::arg("block"), py::arg("threads"), py::arg("n_init"),
      py::arg("centroids"),
      py::arg("gpus"), py::arg("device_memory"), py::arg("metric"),
      "B problems of n rows each (X: B n x d) fitted as fit fits each (kmeans_gpu.batch_kmeans); X a float32 or "
      "float64 array, or (address, B n, d, single) for B n x d values row-major in CUDA memory (float32 when "
      "single), read there.");
  add_device(m);
  kmpy::add_dlpack_out(m);
  add_parted(m);
  add_utilities(m);
}
