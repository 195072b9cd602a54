#include "kmeans/registry.hpp"

#include "common/errors.hpp"
#include "report/report.hpp"

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
  const auto& list = implementations();
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i)
    out += strprintf("%s{\"name\": %s, \"description\": %s, \"where\": \"%s\", \"order\": %zu}", i ? ", " : "",
                     json_string(list[i]->name).c_str(), json_string(list[i]->description).c_str(),
                     list[i]->needs_gpu() ? "gpu" : "cpu", i);
  return out + "]";
}

template <class T>
Result<T> run(const Implementation& impl, const Dataset<T>& data, const Params& params,
              const IterationObserver& observer) {
  validate(params);
  check_clusters(params.k, data.n);
  const Support s = supports(impl, static_cast<std::size_t>(params.k), data.d, sizeof(T));
  if (!s.ok) throw UsageError(s.reason);
  const auto engine = impl.make<T>(params);
  return fit(*engine, data, params, observer);
}

template Result<float> run(const Implementation&, const Dataset<float>&, const Params&, const IterationObserver&);
template Result<double> run(const Implementation&, const Dataset<double>&, const Params&, const IterationObserver&);

}  // namespace km
