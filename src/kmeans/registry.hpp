// The one registry: implementation name -> engine factory + one-line description. The
// CLI, the tests and the benchmarks all iterate over implementations(); adding a variant
// is one file plus one line in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kmeans/driver.hpp"
#include "kmeans/engine.hpp"

namespace km {

struct Implementation {
  std::string name;
  std::string description;
  bool needs_gpu = false;
  std::unique_ptr<Engine<float>> (*make_float)(const Params&) = nullptr;
  std::unique_ptr<Engine<double>> (*make_double)(const Params&) = nullptr;
};

const std::vector<Implementation>& implementations();

// Throws UsageError listing the known names.
const Implementation& find_implementation(const std::string& name);

// "fused" when a GPU is present and fused is registered, else "omp".
std::string default_implementation(bool gpu_present);

// Throws UsageError when the implementation needs a GPU and none is present.
void require_runnable(const Implementation& impl, bool gpu_present, const std::string& why_no_gpu);

template <class T>
Result<T> run(const Implementation& impl, const Dataset<T>& data, const Params& params,
              const IterationObserver& observer = {});

// Factories, one per implementation file.
template <class T>
std::unique_ptr<Engine<T>> make_seq_engine(const Params& params);
template <class T>
std::unique_ptr<Engine<T>> make_omp_engine(const Params& params);
template <class T>
std::unique_ptr<Engine<T>> make_naive_engine(const Params& params);
template <class T>
std::unique_ptr<Engine<T>> make_transpose_engine(const Params& params);
template <class T>
std::unique_ptr<Engine<T>> make_shared_engine(const Params& params);
template <class T>
std::unique_ptr<Engine<T>> make_offload_engine(const Params& params);
template <class T>
std::unique_ptr<Engine<T>> make_offload_block_engine(const Params& params);
template <class T>
std::unique_ptr<Engine<T>> make_fused_engine(const Params& params);

}  // namespace km
