#include "kmeans/gpu/fused_plan.hpp"

#include <algorithm>
#include <cstdio>

#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/layouts.hpp"

namespace km::gpu {

namespace {

DeltaPlan plan_for_block(const DeltaShape& s, const FusedConfig& config) {
  using namespace km::kernels;
  DeltaPlan p;
  p.block = s.block;
  const std::size_t k = s.k, d = s.d, elem = s.elem;
  const int maxd = fused_register_width(d);
  p.maxd = maxd;
  // The delta kernel unless told otherwise (for A/B runs), or unless its float filter could
  // overflow (max|x| > 2^48: margin.hpp), or its shared memory does not fit.
  p.delta = !config.classic && s.max_abs <= 0x1p48 && k < 65535 && delta_shared_bytes(k, d, elem) <= s.shared_optin;
  if (!p.delta) return p;
  const std::size_t delta_bytes = delta_layout<std::size_t>(k, d, elem).bytes;
  p.bits = delta_index_bits(k);
  // d as a constant where it fills the register width 16 or 32 (H100, 256 MB: 0.90x the time at
  // d = 16 in float, 0.64x in double, 0.91x at d = 32, K = 64 in float). At widths 4 and 8 it
  // measured within 3% (d = 8, K = 16: 0.975x in float, 0.980x in double), so those run the kernel
  // with d at run time (half as many instantiations).
  p.exact = (maxd == 16 || maxd == 32) && static_cast<int>(d) == maxd && config.fixed_width;
  // The cell table at d = 2, K <= 64 (6_fused_delta.cuh, CELLS; cells.hpp): a lookup instead of
  // K scores for the objects of cells one centroid provably wins; u32 indices in its rings.
  if (d == 2 && k <= 64 && s.n < (std::size_t{1} << 32)) p.cells_side = config.cells ? *config.cells : cell_side_for(k, elem);
  // Elkan's test before the scores where it measured faster: d <= 2 and 32 < K <= 64, without the
  // cell table (H100, 2^25 x 1, K = 64: 0.61x the time in float, 0.64x in double; slower at
  // K <= 16).
  p.ball_wanted = maxd <= 2 && k <= 64 && config.ball.value_or(k > 32);
  p.ball = p.cells_side == 0 && p.ball_wanted;
  // The scores on the tensor cores (MMA) at register widths 16 and 32, K <= 64, where they measured
  // faster than the FMA scores (H100, 256 MB, 10 iterations, 3 rounds): d = 32, K = 64 0.45x the
  // time in float, 0.57x in double; d = 16, K = 64 0.64x / 0.61x; K = 32 0.86x / 0.81x. Level at
  // K = 16, where they are off (in float from K = 24 at d = 16, against the staged FMA scores there:
  // 0.97-0.99x; K = 20 1.15x).
  const bool mma_by_default =
      maxd == 32 ? k > 16 : elem == 8 ? k > 16 : k > 32 || (p.exact && maxd == 16 && k >= 24);
  p.queue_threads = std::min(s.block, kDeltaMaxThreads);
  const std::size_t base = (delta_bytes + 15) / 16 * 16;
  const std::size_t mma_bytes = base + delta_queue_bytes(maxd, p.queue_threads, elem, false, false, true) +
                                delta_mma_table_bytes(k, maxd);
  p.mma = !p.ball && p.cells_side == 0 && delta_mma_possible(maxd, p.bits > 0) && config.mma.value_or(mma_by_default) &&
          mma_bytes <= s.shared_optin;
  p.bytes = p.mma ? mma_bytes : base + delta_queue_bytes(maxd, p.queue_threads, elem, p.ball, p.cells_side > 0);
  if (p.cells_side) {
    // A side the device's shared memory cannot hold is halved until it can.
    const auto side_bytes = [](int side) { return static_cast<std::size_t>(side) * static_cast<std::size_t>(side); };
    while (p.cells_side > 4 && p.bytes + 16 + side_bytes(p.cells_side) > s.shared_optin) p.cells_side /= 2;
    p.bytes += 16 + side_bytes(p.cells_side);
    // Up to K = 16 each cell's candidates as 16 bits after the table, where they fit: the lean
    // passes' rounds read a mixed cell's mask from shared memory, not from L2 (6_fused_delta.cuh).
    if (k <= 16 && p.bytes + 2 * side_bytes(p.cells_side) <= s.shared_optin) {
      p.bytes += 2 * side_bytes(p.cells_side);
      p.cell_masks = true;
    }
    // (The ring holds its entries alone: the ring with its objects' coordinates beside them
    // measured 0.997-1.027x the time without them on an H100, 2^24 x 2, K = 16 and 32; not kept.)
  }
  // The staged loads (TILE) where d fills its width 16 or 32: each warp's next pass comes by
  // cp.async into shared memory while it scores this one. Where they measured faster (H100, 2^21 x 16
  // and 2^20 x 32, 10 iterations, 3 rounds): d = 16, 8 < K <= 16 (0.90x the time in float, 0.66x in
  // double); in float up to K = 56 with the tensor-core scores (K = 32: 0.96x); d = 32, K <= 16 in
  // double (0.94x). Not at d = 32 in float (K = 16: 1.88x the unstaged kernel's time), nor at
  // d = 16, K = 32 in double (1.06x), nor with the cell table. The engine takes the staged kernel
  // at launch only where n % 4 == 0 and the buffers are 16-byte aligned.
  const bool tile_by_default =
      k > 8 && ((maxd == 32 && elem == 8) || maxd == 16) && (k <= 16 || (maxd == 16 && elem == 4 && k <= 56));
  const bool tile_wanted = config.staged.value_or(tile_by_default);
  if (tile_wanted && p.cells_side > 0) {
    // (with the cell table at d = 2: the buffers after it)
    p.tile_offset = static_cast<unsigned>((p.bytes + 15) / 16 * 16);
    p.tile_bytes = p.tile_offset + static_cast<std::size_t>((p.queue_threads + 31) / 32) *
                                       delta_tile_warp_bytes(2, elem, delta_unroll(2));
    p.tile = p.tile_bytes <= s.shared_optin;
  } else if (p.exact && !p.ball && p.cells_side == 0 && (maxd == 16 || maxd == 32) && tile_wanted) {
    p.tile_bytes = base + delta_queue_bytes(maxd, p.queue_threads, elem, false, false, p.mma, true) +
                   (p.mma ? delta_mma_table_bytes(k, maxd) : 0);
    p.tile = p.tile_bytes <= s.shared_optin;
  }
  if (!p.tile) {
    p.tile_bytes = 0;
    p.tile_offset = 0;
  }
  // In double, the staged kernel with the FMA scores reading a float copy of x - z (z fixed for
  // the fit) instead of x: a pass's objects are scored as in float, half the bytes staged, no
  // per-object centring, conversion or distance in double; the close calls and the movers read
  // their rows of x, and the iteration's inertia comes by algebra from Q, the objects' sum of
  // |x - z|^2 (6_fused_delta.cuh, SHADOW; the copy written by FILL). FusedConfig::float_copy.
  p.shadow = elem == 8 && maxd == 16 && p.tile && !p.mma && p.cells_side == 0 && p.bits > 0 && p.exact &&
             config.float_copy.value_or(true);
  if (p.shadow) {
    p.shadow_bytes = base + delta_queue_bytes(maxd, p.queue_threads, sizeof(float), false, false, false, true) +
                     static_cast<std::size_t>((p.queue_threads + 31) / 32) * delta_shadow_ring_warp_bytes(maxd);
    p.shadow = p.shadow_bytes <= s.shared_optin;
  }
  if (!p.shadow) p.shadow_bytes = 0;
  return p;
}

}  // namespace

DeltaPlan plan_delta(const DeltaShape& s, const FusedConfig& config) {
  if (s.block_given) {
    // --block, up to the most threads the planned kernel takes (its launch bounds), so that the
    // queues are sized for the block that runs.
    const DeltaPlan given = plan_for_block(s, config);
    const int most = kernels::delta_max_threads(s.elem, given.maxd, given.bits > 0, given.tile);
    if (!given.delta || s.block <= most) return given;
    DeltaShape capped = s;
    capped.block = most;
    return plan_for_block(capped, config);
  }
  // Without --block, the threads per block that measured faster (256 MB-class data, 10 iterations,
  // 128, 192 and 256 in one call): 256 in general (fewer, larger blocks pay where the warps an SM
  // are the same: each block builds its tables and flushes its K d sums with global atomics); 128
  // in float at d 3-8 up to K = 16 (256 1.00-1.04x the time, 192 1.09x); 192 in float at width 32
  // where the staged kernel runs (two blocks of 192 hold 12 warps an SM at its 168 registers, one
  // of 256 holds 8). The kernels in double at width 32, K <= 64, not staged take 192
  // (delta_max_threads). (Shared memory is sized for the block: plan it for 256 first, the most a
  // smaller block needs, then for the block chosen.)
  DeltaShape wide = s;
  wide.block = kernels::kDeltaMaxThreads;
  const DeltaPlan at256 = plan_for_block(wide, config);
  if (!at256.delta) return plan_for_block(s, config);
  const int maxd = at256.maxd;
  int block = 256;
  if (s.elem == 4 && maxd >= 4 && maxd <= 8 && s.k <= 16) block = 128;
  if (s.elem == 4 && maxd == 32 && s.k <= 64 && at256.tile) block = 192;
  // In double at width 32, K <= 64, not staged: at most 192 threads a block, two blocks an SM
  // (layouts.hpp: delta_max_threads).
  if (block == 256) block = kernels::delta_max_threads(s.elem, maxd, at256.bits > 0, at256.tile);
  if (block == 256) return at256;
  DeltaShape chosen = s;
  chosen.block = block;
  return plan_for_block(chosen, config);
}

std::string DeltaPlan::describe() const {
  std::string out;
  auto add = [&out](const char* part) { out += out.empty() ? std::string(part) : std::string(", ") + part; };
  if (!delta) return out;
  if (exact) add("d fixed");
  if (tile) add("staged");
  if (shadow) add("float copy");
  if (mma) add("mma");
  if (cells_side) add("cells");
  return out;
}


namespace {

// wgmma's objects' tile holds d whole in shared memory up to this (6_fused_wgmma.cuh: MAX_D).
constexpr std::size_t kWgmmaMaxCoords = 128;

// The path: one pass where its kernels fit and measured faster (layouts.hpp: fused_one_pass, the
// crossover), else the tensor cores; FusedConfig::path forces one (one pass still needs d <= 32
// and its shared memory).
FusedPlan::Path choose_path(const DeltaShape& s, const DeviceFacts& device, const FusedConfig& config,
                            const char*& why) {
  using namespace km::kernels;
  const std::size_t k = s.k, d = s.d, elem = s.elem;
  if (config.path == FusedConfig::Path::tensor) {
    why = "forced (path=tensor)";
    return FusedPlan::Path::tensor;
  }
  if (config.path == FusedConfig::Path::one_pass) {
    const bool fits = d <= static_cast<std::size_t>(kFusedMaxCoords) &&
                      block_sums_layout<std::size_t>(k, d, elem).bytes <= device.shared_optin;
    why = fits ? "forced (path=one-pass)" : "path=one-pass asked, but its kernels do not fit this shape";
    return fits ? FusedPlan::Path::one_pass : FusedPlan::Path::tensor;
  }
  if (!fused_one_pass(k, d, elem)) {
    why = d > static_cast<std::size_t>(kFusedMaxCoords) ? "d > 32" : "K*d above the one-pass crossover";
    return FusedPlan::Path::tensor;
  }
  // Above K*d = 1024 (d > 8) one pass wins only through the delta kernel: where its shared memory
  // does not fit the GPU, the classic kernel it would fall back to loses to the tensor path
  // (H100, d = 32, K = 256: 10.6 against 0.94 ms). On sm_90 (227 KB) it always fits there.
  if (d <= 8 || k * d <= 1024 || delta_shared_bytes(k, d, elem) <= device.shared_optin) {
    why = "small K*d: one read of the data an iteration";
    return FusedPlan::Path::one_pass;
  }
  why = "the delta kernel's shared memory does not fit this GPU";
  return FusedPlan::Path::tensor;
}

// The tensor cores' scores for the shape (fused/tensor.cu: tensor_kernels, the same choices).
const char* tensor_scores(const DeltaShape& s, const DeviceFacts& device, const FusedConfig& config) {
  const std::size_t d = s.d;
  const bool wgmma = config.wgmma && device.compute_capability == 90 && d > 32 && d <= kWgmmaMaxCoords && d % 4 == 0;
  if (s.elem == 4) {
    if (d <= 16) return "TF32 mma.sync m16n8k8, 16-deep slices";
    if (d <= 32) return "TF32 mma.sync m16n8k8";
    // float16 wgmma from a centred, scaled float16 copy where the copy fits (0.77-0.86x TF32's
    // iteration on the real-data rows, H100); else TF32's copy.
    if (wgmma && config.f16_scores && config.tensor_copy)
      return "FP16 wgmma from the centred float16 copy (where room)";
    return wgmma ? "TF32 wgmma from the centred copy" : "TF32 mma.sync m16n8k8, 64-deep slices";
  }
  if (config.tf32_in_double)
    return wgmma ? "TF32 wgmma keys, FP64 re-check of close calls (where room; else FP64 DMMA)"
                 : "TF32 mma.sync keys, FP64 re-check of close calls (where room; else FP64 DMMA)";
  if (device.compute_capability >= 90) return d > 16 ? "FP64 DMMA m16n8k4, 32-deep slices" : "FP64 DMMA m16n8k4";
  return "FP64 DMMA m8n8k4";
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

FusedPlan plan_fused(const DeltaShape& s, const DeviceFacts& device, const FusedConfig& config) {
  FusedPlan p;
  p.path = choose_path(s, device, config, p.path_reason);
  if (p.path == FusedPlan::Path::tensor) {
    p.scores = tensor_scores(s, device, config);
    p.tensor_copy = s.elem == 4 && config.tensor_copy;
    p.movers_after = config.movers_after.value_or(0.2);
    return p;
  }
  DeltaShape shape = s;
  shape.shared_optin = device.shared_optin;
  p.delta = plan_delta(shape, config);
  const int maxd = km::kernels::fused_register_width(s.d);
  // The software prefetch of the next pass into L1: with the tensor-core scores at d 17-32 and
  // with the FMA scores in float at d 9-16 (H100, 2^21 x 16, K = 16: 0.97x the time; level or
  // slower elsewhere). Not for the staged or the bounds kernels.
  p.prefetch = config.prefetch.value_or((p.delta.mma && maxd == 32) || (!p.delta.mma && maxd == 16 && s.elem == 4));
  p.float_copy_after = config.float_copy_after.value_or(0.25);
  p.launch_ahead = config.launch_ahead;
  p.dependent_launch = config.dependent_launch && device.compute_capability >= 90;
  return p;
}

std::string FusedPlan::describe() const {
  if (path == Path::tensor) return std::string("tensor, ") + scores;
  const std::string variant = delta.describe();
  return variant.empty() ? "one-pass" : "one-pass, " + variant;
}

std::vector<std::pair<std::string, std::string>> FusedPlan::fields() const {
  std::vector<std::pair<std::string, std::string>> f;
  const auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
  f.emplace_back("path", path == Path::tensor ? "tensor" : "one-pass");
  f.emplace_back("why", path_reason);
  if (path == Path::tensor) {
    f.emplace_back("scores", scores);
    f.emplace_back("tensor_copy", tensor_copy ? "yes (where room)" : "no");
    f.emplace_back("movers_after", number(movers_after));
    return f;
  }
  f.emplace_back("kernel", delta.delta ? "delta" : "classic (data beyond 2^48, K >= 65535, or no room)");
  if (!delta.delta) return f;
  f.emplace_back("block", std::to_string(delta.block));
  f.emplace_back("register_width", std::to_string(delta.maxd));
  f.emplace_back("index_bits", std::to_string(delta.bits));
  f.emplace_back("fixed_width", yes(delta.exact));
  f.emplace_back("scores", delta.mma ? "TF32 mma.sync m16n8k8, FMA re-score of close calls" : "float FMA");
  f.emplace_back("staged", delta.tile ? "yes (where n % 4 == 0 and aligned)" : "no");
  f.emplace_back("float_copy", delta.shadow ? "yes (where room), after " + number(float_copy_after) + " moved" : "no");
  f.emplace_back("elkan", yes(delta.ball));
  f.emplace_back("cells", delta.cells_side ? std::to_string(delta.cells_side) + " x " + std::to_string(delta.cells_side) +
                                                 " (once the data's range gives a grid)"
                                           : "no");
  if (delta.cells_side) {
    f.emplace_back("cell_masks", yes(delta.cell_masks));
  }
  f.emplace_back("prefetch", prefetch == 0 ? "none" : "L1");
  f.emplace_back("shared_bytes", std::to_string(delta.bytes));
  f.emplace_back("launch_ahead", launch_ahead ? (dependent_launch ? "yes, dependent launch" : "yes") : "no");
  return f;
}

}  // namespace km::gpu
