#include "kmeans/registry.hpp"

#include "common/errors.hpp"

namespace km {

const std::vector<Implementation>& implementations() {
  static const std::vector<Implementation> registry = {
      {"seq", "sequential CPU reference: plain loops, one thread", false, make_seq_engine<float>,
       make_seq_engine<double>},
      {"omp", "OpenMP CPU: static schedule, per-thread partial sums, vectorised distances", false,
       make_omp_engine<float>, make_omp_engine<double>},
      {"naive", "GPU, one thread per object, row-major data; labels to the CPU, which updates the centroids", true,
       make_naive_engine<float>, make_naive_engine<double>},
      {"transpose", "as naive with coordinate-major data [d][N]: coalesced loads", true,
       make_transpose_engine<float>, make_transpose_engine<double>},
      {"shared", "as transpose with all centroids in shared memory", true, make_shared_engine<float>,
       make_shared_engine<double>},
      {"offload", "whole loop on the GPU: global atomics accumulate the centroids, update_centroids kernel", true,
       make_offload_engine<float>, make_offload_engine<double>},
      {"offload-block", "as offload, accumulating per block in shared memory and merging once per block", true,
       make_offload_block_engine<float>, make_offload_block_engine<double>},
      {"fused", "fastest: one pass, registers + shared memory, block-private sums; cuBLAS path for large K*d", true,
       make_fused_engine<float>, make_fused_engine<double>},
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
