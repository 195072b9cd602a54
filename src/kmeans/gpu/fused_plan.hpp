// fused's plan: everything about how a shape runs — the path (one pass or tensor cores), the delta
// kernel's variant and launch shape, each feature on or off — decided by one pure function of the
// shape, the device's facts and the configuration (kmeans/tuning.hpp), plan_fused(). The engine
// (src/kmeans/gpu/fused/), `kmeans --list`, the JSON report's `plan` and Python's implementations() all answer
// from it, and CPU tests check it (tests/cpu/plan.cpp). Decisions that depend on memory
// free at run time (room for the bounds, the float copy, the tensor copy) are marked "where room".
// The measurements behind each default are stated where they are made (fused_plan.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kmeans/tuning.hpp"

namespace km::gpu {

struct DeltaShape {
  std::size_t n = 0, d = 0, k = 0, elem = 8;
  double max_abs = 0;              // the data's largest |x| (above 2^48 the float filter could overflow)
  int block = 128;                 // --block
  bool block_given = false;        // ... given by the user (else the plan's measured choice)
  std::size_t shared_optin = 0;    // the device's opt-in shared memory per block
};

struct DeltaPlan {
  bool delta = false;              // the delta kernel (else the classic one-pass kernel)
  int maxd = 0;                    // the register width
  int bits = 0;                    // index bits packed into the scores (0: tracked apart, K > 64)
  int block = 0;                   // threads per block (--block where given, up to the kernel's launch
                                   // bounds; else the measured best)
  int queue_threads = 0;           // threads per block the queues are sized for
  bool exact = false;              // d a compile-time constant ("d fixed")
  bool ball = false;               // Elkan's test first
  bool ball_wanted = false;        // ... wanted (with the cell table: the kernel that runs without a grid)
  int cells_side = 0;              // the cell table's side (0: none; "cells" once a grid exists)
  bool cell_masks = false;         // K <= 16: each cell's candidates (16 bits) in shared memory too
  bool mma = false;                // the scores on the tensor cores ("mma")
  std::size_t bytes = 0;           // the delta kernel's dynamic shared memory
  bool tile = false;               // a staged kernel exists ("staged" where n % 4 == 0 and aligned)
  std::size_t tile_bytes = 0;      // its dynamic shared memory
  unsigned tile_offset = 0;        // with the cell table: where its buffers start
  // In double, the staged kernel reading a float copy of x - z instead of x (6_fused_delta.cuh,
  // SHADOW; "float copy" where the engine has room for it beside the data and the staged kernel runs).
  bool shadow = false;
  std::size_t shadow_bytes = 0;    // its dynamic shared memory (buffers of floats, as many objects a lane as float's)
  // The variants in the report's order and words ("d fixed, staged, float copy, mma, cells"; "" for none).
  std::string describe() const;
};

DeltaPlan plan_delta(const DeltaShape& shape, const FusedConfig& config);

// The device facts the plan reads (cuda/device.hpp: GpuInfo; without a GPU, an H100's).
struct DeviceFacts {
  std::size_t shared_optin = 232448;  // opt-in shared memory per block, bytes
  int compute_capability = 90;        // major * 10 + minor
};

struct FusedPlan {
  enum class Path { one_pass, tensor };
  Path path = Path::one_pass;
  const char* path_reason = "";     // why this path (the crossover's words)
  // One pass.
  DeltaPlan delta;                  // the delta kernel (delta.delta false: the classic kernel)
  int prefetch = 0;                 // software prefetch of the next pass into L1 (0: none)
  double float_copy_after = 0.25;   // the float copy's kernel once at most this fraction moved
  bool launch_ahead = true, dependent_launch = true;
  // Tensor path.
  const char* scores = "";          // the tensor cores' instruction and precision of the scores
  bool tensor_copy = false;         // float: the centred copy, TF32 or float16 by `scores` (where room)
  double movers_after = 0.2;        // only the movers accumulated after an iteration this quiet
  // The plan in the report's words: "one-pass, d fixed, staged, ..." or "tensor, ...".
  std::string describe() const;
  // Every decision as (name, value) pairs, for --list's and the report's "plan" object.
  std::vector<std::pair<std::string, std::string>> fields() const;
};

// The one place a shape's handling is decided. `n` and `max_abs` may be 0 (for --list: any n,
// data within 2^48).
FusedPlan plan_fused(const DeltaShape& shape, const DeviceFacts& device, const FusedConfig& config);

// This GPU's facts (without a GPU, an H100's; defined in fused/engine.cu, which has the CUDA runtime).
DeviceFacts device_facts();

}  // namespace km::gpu
