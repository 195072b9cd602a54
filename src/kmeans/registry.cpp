#include "kmeans/registry.hpp"

#include <cmath>
#include <limits>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "kmeans/cpu_steps.hpp"
#include <nlohmann/json.hpp>

// The ladder, in order. Each X(name) is the entry `name_implementation` defined beside its
// engine: src/kmeans/<name>.cpp for the CPU, src/kmeans/gpu/<name>.cu for the GPU.
// Adding a variant: its kernel file, its engine file, and its name on this list.
#define KM_LADDER(X) X(seq) X(omp) X(naive) X(transpose) X(shared) X(offload) X(offload_block) X(fused)

namespace km {

#define KM_DECLARE(name) extern const Implementation name##_implementation;
KM_LADDER(KM_DECLARE)
#undef KM_DECLARE

const std::vector<const Implementation*>& implementations() {
#define KM_ENTRY(name) &name##_implementation,
  static const std::vector<const Implementation*> registry = {KM_LADDER(KM_ENTRY)};
#undef KM_ENTRY
  return registry;
}

const Implementation& find_implementation(const std::string& name) {
  std::string names;
  for (const Implementation* impl : implementations()) {
    if (impl->name == name) return *impl;
    names += (names.empty() ? "" : ", ") + std::string(impl->name);
  }
  throw UsageError("--impl=" + name + ": unknown implementation (available: " + names + ")");
}

std::string default_implementation(bool gpu_present) { return gpu_present ? "fused" : "omp"; }

void require_runnable(const Implementation& impl, const GpuInfo& gpu) {
  if (impl.needs_gpu() && !gpu.present)
    throw UsageError(std::string("--impl=") + impl.name + " needs a CUDA GPU, but none is usable (" +
                     gpu.why_absent + "); use --impl=omp or --impl=seq");
}

Support supports(const Implementation& impl, std::size_t k, std::size_t d, std::size_t elem) {
  const GpuInfo& gpu = gpu_info();
  if (impl.needs_gpu() && !gpu.present)
    return {false, std::string("--impl=") + impl.name + " needs a CUDA GPU, but none is usable (" + gpu.why_absent +
                       "); use --impl=omp or --impl=seq"};
  return impl.supports ? impl.supports(k, d, elem, gpu) : Support{};
}

std::string registry_json() {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  int order = 0;
  for (const Implementation* impl : implementations())
    list.push_back({{"name", impl->name},
                    {"description", impl->description},
                    {"where", impl->needs_gpu() ? "gpu" : "cpu"},
                    {"order", order++}});
  return list.dump();
}

template <class T>
void check_arithmetic_range(const Dataset<T>& data) {
  const double largest = max_abs_value(data);
  if (largest == 0) return;
  // Bounds in log2, so that the check itself cannot overflow: a squared distance is at most
  // d * (2 max|x|)^2 (in T), a centroid sum n * max|x| and the inertia n * d * (2 max|x|)^2
  // (both in double).
  const double lg = std::log2(largest) + 1, ln = std::log2(static_cast<double>(data.n)),
               ld = std::log2(static_cast<double>(data.d));
  const double t_max = std::log2(static_cast<double>(std::numeric_limits<T>::max()));
  const double d_max = std::log2(std::numeric_limits<double>::max());
  if (2 * lg + ld >= t_max) {
    if constexpr (sizeof(T) == 4)
      throw InputError(strprintf("the data's values (up to %.3g) are too large for float: squared distances over "
                                 "%zu coordinates would overflow; use --precision=double or rescale the data",
                                 largest, data.d));
    throw InputError(strprintf("the data's values (up to %.3g) are too large: squared distances over %zu "
                               "coordinates would overflow double; rescale the data",
                               largest, data.d));
  }
  if (lg + ln >= d_max || 2 * lg + ld + ln >= d_max)
    throw InputError(strprintf("the data's values (up to %.3g) are too large: the sums over %zu objects would "
                               "overflow double; rescale the data",
                               largest, data.n));
}

template <class T>
Result<T> run(const Implementation& impl, const Dataset<T>& data, const Params& params,
              const IterationObserver& observer) {
  validate(params);
  check_clusters(params.k, data.n);
  const Support s = supports(impl, static_cast<std::size_t>(params.k), data.d, sizeof(T));
  if (!s.ok) throw UsageError(s.reason);
  check_arithmetic_range(data);
  // What the run allocates beside the data: labels (engine and result), per-thread double
  // sums, centroids.
  const double n = static_cast<double>(data.n), kd = static_cast<double>(params.k) * static_cast<double>(data.d);
  const double threads = params.threads > 0 ? params.threads : 1;
  check_host_memory(2 * n * 4 + kd * (8 * (threads + 1) + 4 * sizeof(T)),
                    strprintf("K=%d x d=%zu (labels, sums, centroids)", params.k, data.d));
  const auto engine = impl.make<T>(params);
  Result<T> result = fit(*engine, data, params, observer);
  if (!std::isfinite(result.inertia))  // the range check makes this unreachable; never report it as a result
    throw InputError("the inertia is not finite: the arithmetic overflowed; rescale the data");
  return result;
}

template Result<float> run(const Implementation&, const Dataset<float>&, const Params&, const IterationObserver&);
template Result<double> run(const Implementation&, const Dataset<double>&, const Params&, const IterationObserver&);

}  // namespace km
