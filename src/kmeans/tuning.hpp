// The engines' tuning choices as typed configuration. Every field's default is the measured best
// (docs/performance.md, "Alternatives measured"), so a user never sets one; tests set them in code
// (Params::fused, Params::gpu_init, Params::stream_rows) and measurement tools through the hidden
// CLI option `--fused-config=name=value,...` (apply_fused_config). Nothing here is read from the
// environment. An unset std::optional means "the plan decides by shape" (src/kmeans/gpu/fused_plan.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace km {

// fused's choices (docs/fused.md explains each feature; docs/configuration.md lists the names).
struct FusedConfig {
  enum class Path { automatic, one_pass, tensor };
  /// The path: automatic (the measured crossover), or forced (one-pass still needs d <= 32 and its
  /// shared memory). Name: path=auto|one-pass|tensor.
  Path path = Path::automatic;
  /// The classic one-pass kernel instead of the delta kernel (it is kept for data beyond 2^48 in
  /// magnitude, where the delta kernel's float filter could overflow). Name: classic.
  bool classic = false;
  /// d as a compile-time constant where it fills its register width 16 or 32. Name: fixed_width.
  bool fixed_width = true;
  /// Elkan's test before the scores (d <= 2, K <= 64, without the cell table). Name: ball.
  std::optional<bool> ball;
  /// The cell table's side at d = 2 (0: no table; else a multiple of 4 up to 256). Name: cells.
  std::optional<int> cells;
  /// The scores on the tensor cores (register widths 16 and 32, K <= 64). Name: mma.
  std::optional<bool> mma;
  /// The staged loads (cp.async into shared memory, two buffers a warp). Name: staged.
  std::optional<bool> staged;
  /// In double at d = 16, the staged kernel reading a float copy of x - z. Name: float_copy.
  std::optional<bool> float_copy;
  /// The float copy's kernel once at most this fraction of the objects moved (1: from the third
  /// iteration; given, the copy's writer runs however few iterations are left). Name: float_copy_after.
  std::optional<double> float_copy_after;
  /// The copy's movers and close calls read their rows from the row-major upload (else from x [d][n]).
  /// Name: copy_rows.
  bool copy_rows = true;
  /// The largest error bound / inertia the algebraic inertia (float copy, tensor movers) may
  /// have before the host sums it from the objects (0: always from the objects). Name: guard.
  double guard = 1e-11;
  /// Software prefetch of the next pass (0 none, 1 into L1; not the staged kernels). Name: prefetch.
  std::optional<int> prefetch;
  /// In float, every inertia addend a distance in float (else from the scores where provably within
  /// 2^-15). Name: exact_addends.
  bool exact_addends = false;
  /// Launch the next iteration's kernel before this one's counters are read. Name: launch_ahead.
  bool launch_ahead = true;
  /// ... as a programmatic dependent launch (sm_90). Name: dependent_launch.
  bool dependent_launch = true;
  /// Events around each iteration's kernel (and with them no overlap of launches). Name: events.
  bool iteration_events = false;
  /// The cell table's lean passes where x and the labels are 16-byte aligned. Name: lean_cells.
  bool lean_cells = true;
  /// Passes taken from chunk counters as the warps come to them. Name: dynamic_chunks.
  bool dynamic_chunks = true;
  enum class Candidates { automatic, off, on, global };
  /// The cell table's candidate masks: automatic, off, on (always), global (always, from L2).
  /// Name: cell_candidates.
  Candidates cell_candidates = Candidates::automatic;
  /// The cells' sorted order (only chunks of changed or mixed cells read). Name: sorted.
  std::optional<bool> sorted;
  // Tensor path.
  /// wgmma from the centred copy on sm_90 at 32 < d <= 128 (else mma.sync). Name: wgmma.
  bool wgmma = true;
  /// In double, TF32 keys with an exact re-check (else FP64 DMMA keys). Name: tf32_in_double.
  bool tf32_in_double = true;
  /// In float, the objects centred and rounded to TF32 once, in a copy. Name: tensor_copy.
  bool tensor_copy = true;
  /// In float where wgmma runs: the centred copy in float16 (scaled by a power of two; rows padded
  /// to a multiple of 8) instead of TF32, scored on float16 tensor cores. Name: f16_scores.
  bool f16_scores = true;
  /// Only the movers accumulated from the iteration after one where at most this fraction moved
  /// (0: never). Name: movers_after.
  std::optional<double> movers_after;
  /// k-means|| reads the tensor path's centred copy instead of making its own. Name: share_copy.
  bool share_copy = true;
  /// The problems sharing the GPU at once (a batch's graph: batch_graph.cu): the tensor path's
  /// grid-stride kernels launch 1/share of their one-problem grid. Name: share.
  int share = 1;
};

// k-means|| on the GPU (src/kmeans/gpu/kmeanspp.cu); test hooks for its fallbacks.
struct GpuInitConfig {
  enum class Nearest { automatic, gemm };
  Nearest nearest = Nearest::automatic;  ///< the rounds' nearest candidates: tensor cores, else cuBLAS GEMM
  enum class Reduce { automatic, host, gpu };
  Reduce reduce = Reduce::automatic;     ///< the greedy reduction: GPU where it fits; host; gpu (or fail)
  int reduce_chunks_per_block = 0;       ///< at least this many chunks a block (0: the fewest)
  bool preload = true;                   ///< load its kernels on a thread while the data go up
};

// Sets the fields named in `spec` ("name=value,name=value"); throws UsageError naming the field
// or value that is wrong. The names are those in the field comments above.
void apply_fused_config(FusedConfig& config, const std::string& spec);

// Every field as "name=value", in declaration order (the report's and --list's words).
std::vector<std::string> describe_fused_config(const FusedConfig& config);

}  // namespace km
