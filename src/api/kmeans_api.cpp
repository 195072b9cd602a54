// The C++ library's public API (include/kmeans_gpu/kmeans.hpp) over the registry: the same checks
// and messages as the command line and the Python module, the internal errors mapped to the two
// public ones. The library is built with -fvisibility=hidden and the static core's symbols kept
// local (CMakeLists.txt), so that only these functions are its interface.
#include "kmeans_gpu/kmeans.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <string>
#include <utility>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "cuda/device.hpp"
#include "io/dataset.hpp"
#include "kmeans/batch.hpp"
#include "kmeans/device_view.hpp"
#include "kmeans/params.hpp"
#include "kmeans/registry.hpp"

namespace kmeans_gpu {

namespace {

// x's n x d values, borrowed where they are (host memory, or the current GPU's: checked, then the
// device's pending work waited for).
template <class T>
km::Dataset<T> borrowed(const T* x, std::size_t n, std::size_t d, std::string what, Memory memory) {
  if (n > static_cast<std::size_t>(INT64_MAX) || d > static_cast<std::size_t>(INT64_MAX))
    throw km::UsageError(km::strprintf("%s: %zu x %zu values are too many to address", what.c_str(), n, d));
  if (memory == Memory::device) {
    km::Dataset<T> data = km::device_view<T>(x, n, d, what);
    km::wait_for_device();
    return data;
  }
  if (x == nullptr && n * d > 0) throw km::UsageError(what + ": a null pointer");
  km::check_shape(static_cast<std::int64_t>(n), static_cast<std::int64_t>(d), sizeof(T), what);
  km::Dataset<T> data;
  data.n = n;
  data.d = d;
  data.source = std::move(what);
  data.values = km::HostBuffer<T>::borrow(x, n * d);
  return data;
}

const km::Implementation& implementation(const std::string& name) {
  const km::Implementation& impl =
      km::find_implementation(name.empty() ? km::default_implementation(km::gpu_info().present) : name);
  km::require_runnable(impl, km::gpu_info());
  return impl;
}

km::Params internal(const Params& p, std::size_t d) {
  km::Params q;
  q.k = p.n_clusters;
  q.loops = p.max_iter;
  if (std::isnan(p.tol)) throw km::UsageError("tol=nan: must be a number (negative: run max_iter iterations)");
  if (p.threads > km::kMaxThreads)
    throw km::UsageError(km::strprintf("threads=%d: at most %d", p.threads, km::kMaxThreads));
  if (p.tol >= 0) q.tol = p.tol;
  q.seed = p.seed;
  q.n_init = p.n_init;
  q.threads = p.threads;
  q.metric = km::metric_from_string(p.metric);
  if (!p.init_centroids.empty()) {
    q.init = km::Init::given;
    q.given_d = d;
    q.given_centroids = p.init_centroids;
  } else {
    q.init = km::init_from_string(p.init);
  }
  km::validate(q);
  return q;
}

// A fit's result as the public API gives it.
template <class T>
Result<T> public_result(km::Result<T>&& r, const km::Implementation& impl) {
  Result<T> out;
  out.centroids = std::move(r.centroids);
  out.labels = std::move(r.labels);
  out.inertia = r.inertia;
  out.n_iter = r.iterations;
  out.converged = r.converged;
  out.implementation = impl.name;
  return out;
}

// fn() with the library's errors as the public ones.
template <class F>
auto translated(F&& fn) {
  try {
    return fn();
  } catch (const km::UsageError& e) {
    throw InvalidInput(e.what());
  } catch (const km::InputError& e) {
    throw InvalidInput(e.what());
  } catch (const std::bad_alloc&) {
    throw Failure("out of host memory");
  } catch (const InvalidInput&) {
    throw;
  } catch (const Failure&) {
    throw;
  } catch (const std::exception& e) {
    throw Failure(e.what());
  }
}

}  // namespace

template <class T>
Result<T> fit(const T* x, std::size_t n, std::size_t d, const Params& params, const T* sample_weight) {
  return translated([&] {
    const km::Params p = internal(params, d);  // (the parameters first: their errors before the data's)
    km::Dataset<T> data = borrowed(x, n, d, "x", params.memory);
    if (sample_weight) data.weights = km::HostBuffer<T>::borrow(sample_weight, n);
    const km::Implementation& impl = implementation(params.implementation);
    return public_result(km::run(impl, data, p), impl);
  });
}

template <class T>
std::vector<Result<T>> batch_fit(const T* x, std::size_t batch, std::size_t n, std::size_t d, const Params& params) {
  // Checked before the first fit, so that a bad batch fails before any work.
  if (batch == 0) throw InvalidInput("batch_fit: the batch holds no problems");
  if (x == nullptr) throw InvalidInput("x: no data given");
  if (n != 0 && d != 0 && batch > SIZE_MAX / n / d) throw InvalidInput("batch_fit: batch x n x d overflows");
  const std::size_t per = static_cast<std::size_t>(std::max(params.n_clusters, 0)) * d;
  if (!params.init_centroids.empty() && params.init_centroids.size() != batch * per)
    throw InvalidInput("init_centroids: " + std::to_string(params.init_centroids.size()) + " values, not batch x " +
                       "n_clusters x d = " + std::to_string(batch * per));
  return translated([&] {
    Params checked = params;  // the parameters first (each problem's centroids: below)
    checked.init_centroids.clear();
    internal(checked, d);
    km::check_host_memory(km::batch_host_bytes(batch, n, d, params.n_clusters, params.max_iter, sizeof(T)),
                          km::strprintf("batch_fit of %zu problems (each one's parameters and result)", batch));
    const km::Dataset<T> data = borrowed(x, batch * n, d, "x", params.memory);
    std::vector<km::Params> each;
    Params one = params;
    for (std::size_t b = 0; b < batch; ++b) {
      if (!params.init_centroids.empty())
        one.init_centroids.assign(params.init_centroids.begin() + static_cast<std::ptrdiff_t>(b * per),
                                  params.init_centroids.begin() + static_cast<std::ptrdiff_t>((b + 1) * per));
      each.push_back(internal(one, d));
    }
    const km::Implementation& impl = implementation(params.implementation);
    km::BatchResult<T> fits = km::run_batch(impl, data, batch, each);
    std::vector<Result<T>> out;
    for (km::Result<T>& r : fits.problems) out.push_back(public_result(std::move(r), impl));
    return out;
  });
}

template <class T>
std::vector<std::int32_t> predict(const T* x, std::size_t n, std::size_t d, const T* centroids, std::size_t k,
                                  const std::string& implementation_name, const std::string& metric,
                                  Memory memory) {
  return translated([&] {
    const km::Dataset<T> data = borrowed(x, n, d, "x", memory);
    if (centroids == nullptr || k == 0) throw km::UsageError("centroids: none given");
    km::Params p;
    p.k = static_cast<int>(k);
    if (static_cast<std::size_t>(p.k) != k) throw km::UsageError("centroids: too many");
    p.init = km::Init::given;
    p.given_d = d;
    p.given_centroids.assign(centroids, centroids + k * d);
    p.metric = km::metric_from_string(metric);
    km::validate(p);
    return km::predict(implementation(implementation_name), data, p).labels;
  });
}

std::vector<std::string> implementations() {
  std::vector<std::string> names;
  for (const km::Implementation* impl : km::implementations()) names.emplace_back(impl->name);
  return names;
}

bool gpu_available() { return km::gpu_info().present; }

const char* version() { return KMEANS_GPU_VERSION; }

template Result<float> fit<float>(const float*, std::size_t, std::size_t, const Params&, const float*);
template Result<double> fit<double>(const double*, std::size_t, std::size_t, const Params&, const double*);
template std::vector<Result<float>> batch_fit<float>(const float*, std::size_t, std::size_t, std::size_t,
                                                     const Params&);
template std::vector<Result<double>> batch_fit<double>(const double*, std::size_t, std::size_t, std::size_t,
                                                       const Params&);
template std::vector<std::int32_t> predict<float>(const float*, std::size_t, std::size_t, const float*, std::size_t,
                                                  const std::string&, const std::string&, Memory);
template std::vector<std::int32_t> predict<double>(const double*, std::size_t, std::size_t, const double*,
                                                   std::size_t, const std::string&, const std::string&, Memory);

}  // namespace kmeans_gpu
