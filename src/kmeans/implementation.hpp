// What one registry entry is. Each implementation's file defines its entry next to its
// engine (`extern const Implementation <name>_implementation = describe<Engine>(...)`);
// src/kmeans/registry.cpp lists the entries in ladder order. Nothing else names a variant.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/support.hpp"
#include "cuda/device.hpp"
#include "kmeans/engine.hpp"

namespace km {

enum class Where { cpu, gpu };

struct Implementation {
  const char* name;
  const char* description;
  Where where;
  std::unique_ptr<Engine<float>> (*make_float)(const Params&);
  std::unique_ptr<Engine<double>> (*make_double)(const Params&);
  // The limits of this implementation for K clusters of d coordinates of `elem` bytes on the
  // device `gpu`; nullptr: it takes every shape.
  Support (*supports)(std::size_t k, std::size_t d, std::size_t elem, const GpuInfo& gpu) = nullptr;
  // The path this implementation takes for K, d and elem, in Engine::path's words; nullptr: it has one.
  std::string (*path)(std::size_t k, std::size_t d, std::size_t elem, const FusedConfig& config) = nullptr;
  // Every decision of its plan as (name, value) pairs (fused: fused_plan.hpp); nullptr: none.
  std::vector<std::pair<std::string, std::string>> (*plan)(std::size_t k, std::size_t d, std::size_t elem,
                                                           const FusedConfig& config) = nullptr;
  // The host bytes its engine allocates for n objects, K clusters of d coordinates of `elem`
  // bytes on `threads` CPU threads, beside the data and the driver's own (registry.cpp:
  // host_bytes); nullptr: a GPU engine's staging (labels, centroids, sums and their carries).
  double (*host_bytes)(std::size_t n, std::size_t k, std::size_t d, std::size_t elem, int threads) = nullptr;

  bool needs_gpu() const { return where == Where::gpu; }
  template <class T>
  std::unique_ptr<Engine<T>> make(const Params& p) const {
    if constexpr (sizeof(T) == 4) return make_float(p);
    else return make_double(p);
  }
};

// An entry for Engine<float> and Engine<double>, both constructed from Params.
template <template <class> class E>
constexpr Implementation describe(const char* name, const char* description, Where where,
                                  Support (*supports)(std::size_t, std::size_t, std::size_t, const GpuInfo&) = nullptr,
                                  std::string (*path)(std::size_t, std::size_t, std::size_t, const FusedConfig&) = nullptr,
                                  std::vector<std::pair<std::string, std::string>> (*plan)(
                                      std::size_t, std::size_t, std::size_t, const FusedConfig&) = nullptr) {
  return {name,
          description,
          where,
          [](const Params& p) -> std::unique_ptr<Engine<float>> { return std::make_unique<E<float>>(p); },
          [](const Params& p) -> std::unique_ptr<Engine<double>> { return std::make_unique<E<double>>(p); },
          supports,
          path,
          plan};
}

// `impl` with its engine's host-memory estimate.
constexpr Implementation with_host_bytes(Implementation impl,
                                         double (*bytes)(std::size_t, std::size_t, std::size_t, std::size_t, int)) {
  impl.host_bytes = bytes;
  return impl;
}

}  // namespace km
