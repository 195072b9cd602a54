#include "kmeans/registry.hpp"

#include "common/errors.hpp"

namespace km {

const std::vector<Implementation>& implementations() {
  static const std::vector<Implementation> registry = {
      {"seq", "sequential CPU reference: plain loops, one thread", false, make_seq_engine<float>,
       make_seq_engine<double>},
      {"omp", "OpenMP CPU: static schedule, per-thread partial sums, vectorised distances", false,
       make_omp_engine<float>, make_omp_engine<double>},
  };
  return registry;
}

const Implementation& find_implementation(const std::string& name) {
  std::string names;
  for (const auto& impl : implementations()) {
    if (impl.name == name) return impl;
    names += (names.empty() ? "" : ", ") + impl.name;
  }
  throw UsageError("--impl=" + name + ": unknown implementation (available: " + names + ")");
}

std::string default_implementation(bool gpu_present) {
  if (gpu_present)
    for (const auto& impl : implementations())
      if (impl.name == "fused") return impl.name;
  return "omp";
}

void require_runnable(const Implementation& impl, bool gpu_present, const std::string& why_no_gpu) {
  if (impl.needs_gpu && !gpu_present)
    throw UsageError("--impl=" + impl.name + " needs a CUDA GPU, but none is usable (" + why_no_gpu +
                     "); use --impl=omp or --impl=seq");
}

template <class T>
Result<T> run(const Implementation& impl, const Dataset<T>& data, const Params& params,
              const IterationObserver& observer) {
  validate(params);
  std::unique_ptr<Engine<T>> engine;
  if constexpr (std::is_same_v<T, float>)
    engine = impl.make_float(params);
  else
    engine = impl.make_double(params);
  return fit(*engine, data, params, observer);
}

template Result<float> run(const Implementation&, const Dataset<float>&, const Params&, const IterationObserver&);
template Result<double> run(const Implementation&, const Dataset<double>&, const Params&, const IterationObserver&);

}  // namespace km
