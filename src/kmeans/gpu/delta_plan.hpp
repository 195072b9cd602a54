// Which variant of fused's delta kernel (kernels/kmeans/6_fused_delta.cuh) a shape takes, and the
// shared memory each asks for: one pure function of the shape, the device's shared-memory limit
// and the KMEANS_* overrides, so that the engine (fused.cu: FusedOnePass::prepare) and `--list`
// answer from the same decisions, and a CPU test can check them. The measurements behind each
// default are cited where they are made (delta_plan.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace km::gpu {

// The environment's overrides (for A/B runs); unset: the measured default.
struct DeltaOverrides {
  bool classic = false;            // KMEANS_ONE_PASS=classic: the classic one-pass kernel
  bool no_exact = false;           // KMEANS_DELTA_EXACT=0: d at run time
  std::optional<bool> ball;        // KMEANS_DELTA_BALL=0|1 (Elkan's test at d <= 2, K <= 64)
  std::optional<int> cells;        // KMEANS_DELTA_CELLS=S: S x S cells (0: none; else a multiple of 4 up to 256)
  std::optional<bool> mma;         // KMEANS_DELTA_MMA=0|1 (the scores on the tensor cores)
  std::optional<bool> tile;        // KMEANS_DELTA_TILE=0|1 (the staged loads)
  std::optional<bool> ring_xy;     // KMEANS_CELLS_XY=0|1 (the cells' ring with its coordinates, where they fit)
  std::optional<bool> shadow;      // KMEANS_DELTA_SHADOW=0|1 (the staged kernel in double from a float copy)
  static DeltaOverrides from_environment();
};

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
  bool ring_xy = false;            // the cell table's ring holds its objects' coordinates too
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

DeltaPlan plan_delta(const DeltaShape& shape, const DeltaOverrides& env);

}  // namespace km::gpu
