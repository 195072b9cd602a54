// Step 6, fused, one-pass path for small K*d: the delta kernel. It replaces the classic one-pass
// kernel (6_fused_one_pass.cuh, still there with FusedConfig::classic, and for
// data beyond 2^48 in magnitude) where its ideas apply (docs/fused.md explains them in full):
// 1. Only the objects that move are accumulated, in 64-bit fixed point (the same bits however a
//    sum was reached), into sums the engine keeps across iterations.
// 2. The assignment is scored in float, one FMA a coordinate, on points centred at the centroids'
//    mean; where the runner-up is not provably clear of the winner (margin.hpp: filter_bound), the
//    object is redone in seq's arithmetic: the labels are seq's, in double too.
// 3. The last block to finish does the update and writes the iteration's counters to pinned host
//    memory: an iteration is one launch and one wait.
// Features, each a template switch (named in DeltaTraits, fused/traits.cuh):
//   BALL    Elkan's test first (d <= 2, 32 < K <= 64)
//   CELLS   a cell table (d = 2, K <= 64; delta_cells): H100, 256 MB, 0.73x the time at K = 16 in
//           float, 0.89x in double, 0.56-0.60x at K = 64; SORTED: in the cells' sorted order, only
//           the chunks of changed or mixed cells read (H200, 2^24 x 2, K = 16: 0.54x in double)
//   MMA     the scores on the tensor cores (d 9-32, K <= 64): H100, 256 MB, d = 32, K = 64 0.64x
//           the FMA scores' time in float, 0.71x in double
//   TILE    the staged loads (cp.async, two buffers a warp)
//   SHADOW  the passes from a float copy of x - z (double, d = 16): H200, 2^21 x 16, K = 16,
//           0.81-0.84x the kernel's time; FILL: the kernel that writes the copy
// Where the parts live (kernels/kmeans/fused/; the kernel's lambdas call them with its variables
// by reference, and they are __forceinline__, so the compiler sees one function):
//   delta_pass.cuh     DeltaPass: the launch's arguments, the host's side of the protocol
//   protocol.cuh       dependent launch, the release flag (block_acquire)
//   traits.cuh         DeltaTraits: the switches by name, derived constants, launch bounds
//   primitives.cuh     predicated stores, 16-byte runs, batched block copies, TF32 mma
//   prologue.cuh       the first passes into L2, the block's state, the centre, the score table
//   filter_scores.cuh  the float filter: x'' of a pass, its scores (FMA; d <= 2 one object at a time)
//   mma_scores.cuh     MMA: the tensor-core tables and scores, the FMA re-scores of its close calls
//   pass_steps.cuh     a pass's loads straight from x, the warp's re-checks, a label's distance
//   ball.cuh           BALL: the radii
//   cell_table.cuh     CELLS: delta_cells, the warp's ring and its rounds, the lean passes
//   staged_loads.cuh   TILE: the cp.async copies of a pass, its objects from the warp's buffer
//   movers.cuh         the movers' fixed-point sums (SORTED: by the warp)
//   float_copy.cuh     SHADOW: the deferred movers' sums
//   last_block_update.cuh  the flush, the last block's update and the release
// The kernel below: the shared memory's set-up, the start-up, the pass loop (its steps' order, the
// movers' queue) and the end.
// Measured on an H200: 2.1x the classic kernel at 256 MB, d = 2, K = 16 and 2.9x at d = 16. On an
// H100: 1.99x the memory floor at d = 2 and 1.61x at d = 16 in double, 3.1x and 2.6x in float;
// d = 2 is bound by instructions (the 4 ALU operations an object and centroid of the scores), not
// by DRAM.
#pragma once

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "kernels/gemm/6_tensor.cuh"
#include "kernels/kmeans/6_fused_one_pass.cuh"
#include "kernels/kmeans/cell_order.cuh"
#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/fused/ball.cuh"
#include "kernels/kmeans/fused/cell_table.cuh"
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/fused/filter_scores.cuh"
#include "kernels/kmeans/fused/float_copy.cuh"
#include "kernels/kmeans/fused/last_block_update.cuh"
#include "kernels/kmeans/fused/mma_scores.cuh"
#include "kernels/kmeans/fused/movers.cuh"
#include "kernels/kmeans/fused/pass_steps.cuh"
#include "kernels/kmeans/fused/primitives.cuh"
#include "kernels/kmeans/fused/prologue.cuh"
#include "kernels/kmeans/fused/protocol.cuh"
#include "kernels/kmeans/fused/staged_loads.cuh"
#include "kernels/kmeans/fused/traits.cuh"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/margin.hpp"
#include "kernels/kmeans/nearest.cuh"
#include "kernels/kmeans/stop_rule.hpp"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

// C: the variant, a DeltaTraits (fused/traits.cuh; src/kmeans/gpu/fused/delta_kernels.cuh names
// each one the engine runs). Launch bounds: C::kMaxThreads and C::kMinBlocks, where the
// measurements behind them are.
// (EXACT: d is the register width itself, d_arg == MAXD; the engine takes it where it is.)
template <class C>
__global__ void __launch_bounds__(C::kMaxThreads, C::kMinBlocks)
    fused_delta(const typename C::T* __restrict__ x, typename C::T* centroids, std::int64_t n, int d_arg, int k,
                std::int32_t* __restrict__ labels, DeltaPass p) {
  // The variant's switches by name (DeltaTraits, fused/traits.cuh).
  using T = typename C::T;
  constexpr int MAXD = C::MAXD, U = C::U;
  constexpr bool PACK = C::PACK, BALL = C::BALL, CELLS = C::CELLS, MMA = C::MMA,
                 EXACT = C::EXACT, TILE = C::TILE, SHADOW = C::SHADOW;
  // d itself, a constant where the register width decides it (widths 1 and 2 hold only d = 1, 2)
  // or where it fills the width (EXACT): the coordinate loops then test nothing (at d = 16, K = 16
  // in float compares were 7.9% of the kernel's instructions, most of them a coordinate tested
  // against d in the loads, the label's distance and the movers' stage; ncu).
  const int d = MAXD <= 2 || EXACT ? MAXD : d_arg;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float r2_shared;
  __shared__ float rounding_shared;  // MMA: the largest sum of a centroid's squared TF32 roundings
  // (16-byte aligned, so that nvcc may merge its reads into 16-byte vector loads: in the staged
  // float kernel at d = 16 4 loads of the centre where 16 took a value each; H200, 10 iterations,
  // 5 rounds: that kernel 0.976x the time at 2^21 objects, 0.969x at 2^22, the other lab rows level
  // within 0.6%. The double kernels' loads an object stay scalar behind the register pins of x'';
  // made vectors by hand they measured level.)
  __shared__ __align__(16) T mu[MAXD];
  __shared__ bool last_shared;
  __shared__ double warp_totals[32];
  __shared__ unsigned long long tallies_s[MMA && !TILE ? 5 : 1][MMA && !TILE ? kDeltaMaxThreads / 32 : 1];  // (the flush)
  const DeltaLayout<int> layout = delta_layout<int>(k, d, sizeof(T));
  unsigned long long* dsums = reinterpret_cast<unsigned long long*>(smem);
  int* dcounts = reinterpret_cast<int*>(smem + layout.counts_offset);
  float* table = reinterpret_cast<float*>(smem + layout.table_offset);
  T* s = reinterpret_cast<T*>(smem + layout.centroids_offset);
  // Above d = 2, the centroids again as rows [k][SROW] in T, zero past d (layouts.hpp:
  // delta_centroid_row): the label's distance reads its centroid with 16-byte loads and no test
  // against d, where [d][k] took a load, an address and a test per coordinate.
  constexpr int SROW = C::SROW;
  const bool has_rows = delta_has_rows(MAXD, static_cast<std::size_t>(k));  // the same in the whole grid
  T* srow = reinterpret_cast<T*>(smem + layout.rows_offset);
  // This warp's movers: (offset in the pass, (old label + 1) << 16 | new label); with BALL, its
  // objects to score (x'', |x''|^2, slot) and their results.
  const int warps_in_block = static_cast<int>((blockDim.x + 31) / 32), warp = static_cast<int>(threadIdx.x / 32);
  unsigned char* after = smem + (layout.bytes + 15) / 16 * 16;
  // (CELLS: the warp's one ring of 64 U entries instead, below; layouts.hpp: delta_queue_bytes.)
  uint2* queue = reinterpret_cast<uint2*>(after) + warp * 32 * U;
  float4* to_score = reinterpret_cast<float4*>(after + warps_in_block * 32 * U * 8) + warp * 32 * U;
  int* scored = reinterpret_cast<int*>(after + warps_in_block * 32 * U * 24) + warp * 32 * U;
  __shared__ double ball[BALL ? 64 : 1];
  // CELLS: the cell table (cells.hpp), after the rings (64 U entries of 8 bytes a warp) and their
  // coordinates (p.ring_xy); the same offsets as layouts.hpp: delta_cells_layout, which the
  // plan's bytes are tested against.
  unsigned char* cells_s = after + warps_in_block * 64 * U * (8 + (p.ring_xy ? 2 * sizeof(T) : 0));
  // ... and after it, where given (p.cell_masks, K <= 16), each cell's candidates as 16 bits.
  unsigned short* masks_s = reinterpret_cast<unsigned short*>(cells_s + (CELLS && p.cells ? p.grid.side * p.grid.side : 0));
  // Above d = 4, the warp's movers' coordinates (32 U of them, MAXD values each), after the rest
  // (MMA: at least the warp's objects as rows of MAXD + 4 floats; layouts.hpp).
  T* stage = reinterpret_cast<T*>(after + warps_in_block * 32 * U * 8 + warp * delta_stage_warp_bytes(MAXD, sizeof(T), U, MMA));
  // TILE: the warp's two buffers, each its 32 U objects' coordinates [MAXD][32 U] and old labels
  // (a row of 32 U entries of T's size), where the stage would be (layouts.hpp:
  // delta_tile_warp_bytes): cp.async brings the next pass into one while the warp scores the
  // pass in the other, which then serves as this pass's stage (its data are in registers by then).
  // (MMA: a buffer also holds the pass's rows of x'', written once its data are in registers.)
  // (SHADOW: buffers of floats, so as many bytes a warp at U = 2 as the double kernel's at U = 1.)
  constexpr int TBE = C::TBE;
  // (CELLS: after the cell table, at p.tile_offset.)
  T* const tiles = reinterpret_cast<T*>(CELLS ? smem + p.tile_offset : after + warps_in_block * 32 * U * 8) + warp * 2 * TBE;
  // MMA: the B operands and |c''|^2 in fragment order (layouts.hpp: delta_mma_table_bytes).
  constexpr int KS = C::KS;
  constexpr std::size_t kStageWarp = C::kStageWarp;
  float2* btab = reinterpret_cast<float2*>(after + warps_in_block * 32 * U * 8 + warps_in_block * kStageWarp);
  // (|c''|^2 as float4s {c0, c1, c0, c1}: the accumulators' start, both rows, in one load and
  // the mma's C registers as loaded, where a float2 took four register copies per pair of tiles.)
  float4* ctab = reinterpret_cast<float4*>(btab + (k + 15) / 16 * 2 * KS * 32);
  __shared__ double zs[MAXD];
  __shared__ __align__(16) T cpair[CELLS ? 2 * 64 : 2];
  // The passes from the chunk counters (kDynamic, kMmaDynamic, kLeanDynamic) and the warp's index in
  // a uniform register (kUniformBase): fused/traits.cuh.
  constexpr bool kMmaDynamic = C::kMmaDynamic, kDynamic = C::kDynamic, kLeanDynamic = C::kLeanDynamic;
  __shared__ int next_chunk_s[kDynamic ? kDeltaMaxThreads / 32 : 1];
  // kMmaDynamic: the warp's first object this pass, read again where its labels are written (the
  // pass's base, a warp's own with the dynamic passes, no longer in uniform registers, held through
  // the pass pushed the 128-register kernel to spill).
  __shared__ std::int64_t warp_first_s[kMmaDynamic ? kDeltaMaxThreads / 32 : 1];
  constexpr bool kUniformBase = C::kUniformBase;
  const int warp_u = kUniformBase ? static_cast<int>(__reduce_max_sync(0xffffffffu, threadIdx.x / 32)) : warp;
  __shared__ bool unsure_shared;
  const int lane = threadIdx.x & 31;
  dependent_launch_trigger();
  if (p.prefetch_first) prefetch_first_passes<C>(p, x, n, d);
  if (p.wait_grid || !p.acquire_value) dependent_wait();
  if (p.acquire_value) block_acquire(p.release, p.acquire_value);
  if (p.start_ns_out && blockIdx.x == 0 && threadIdx.x == 0) *p.start_ns_out = global_ns();
  const unsigned gated = p.gate ? __ldcg(p.gate) : 0u;  // (read now, tested after the prologue)

  if (threadIdx.x == 0) r2_shared = rounding_shared = 0;
  const int cell_side = CELLS && p.cells ? p.grid.side : 0;
  load_block_state<C>(p, centroids, k, d, cell_side, dsums, dcounts, s, cells_s, zs);
  __syncthreads();
  if constexpr (SROW > 0) centroid_rows<C>(has_rows, k, d, srow, s);
  block_centre<C>(p, k, d, s, srow, has_rows, mu, cpair);
  __syncthreads();
  score_table_rows<C>(k, d, s, mu, table, r2_shared);
  if constexpr (BALL) ball_radii<C>(s, ball, k, d);
  __syncthreads();
  if constexpr (MMA) mma_tables<C>(table, btab, ctab, k, rounding_shared);
  const float r2 = r2_shared;
  // MMA: the margin's TF32 term, root_b^2 (margin.hpp: filter_bound with mma, mma_root2).
  const float root2 = MMA ? mma_root2(r2, rounding_shared) : 0.0f;
  if (gated) return;  // (the whole grid: the last iteration met the stop rule, or SHADOW's inertia failed)
  constexpr bool kMuShared = C::kMuShared;  // the centre from shared memory (fused/traits.cuh)
  T mur[kMuShared ? 1 : MAXD];
  if constexpr (!kMuShared) {
#pragma unroll
    for (int j = 0; j < MAXD; ++j) mur[j] = mu[j];
  }
  auto centre = [&](int j) -> T {
    if constexpr (kMuShared) return mu[j];
    else return mur[j];
  };
  const int mask = PACK ? (1 << p.index_bits) - 1 : 0;

  // (fused/traits.cuh says why each is what it is.)
  constexpr bool kQueue = C::kQueue, kReload = C::kReload, kApproxDist = C::kApproxDist;
  auto mma_scores = [&](const float (&xv)[U][MAXD], float (&out_best)[U], float (&out_second)[U]) {
    mma_warp_scores<C>(xv, out_best, out_second, stage, btab, ctab, queue, k, mask, lane);
  };
  // FILL: an object's q = |x - z|^2 in fixed point, the same bits wherever it is summed.
  auto q_fixed = [&](const T* v) {
    return object_q_fixed<C>(v, d, zs, p);
  };
  // An object's move from `was` (-1: none yet) to `label`: its fixed-point addends out of one
  // cluster's sums and into the other's.
  auto add_move = [&](const T* v, int label, int was) {
    add_move_sums<C>(v, label, was, d, p, dsums, dcounts);
  };
  auto add_moves = [&](const T* v, int to, int was) {
    add_warp_moves<C>(v, to, was, d, lane, p, dsums, dcounts, add_move);
  };
  unsigned moves = 0, rechecks = 0, lookups = 0, rescores = 0;
  unsigned long long my_inertia = 0;
  [[maybe_unused]] unsigned long long fill_q = 0;  // (FILL: the objects' q, this thread's)
  // (SHADOW: the iteration's inertia by algebra, from the copy's Q, by the last block.)
  const bool count_inertia = !SHADOW && p.inertia != nullptr;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x * U;
  // BALL, CELLS: one object's packed score against centroid c folded into the least (b) and the
  // runner-up (sc); score_one over every centroid, score_some over those of mask m only, lowest
  // index first.
  auto score_step = [&](float x0, float x1, int c, float& b, float& sc) {
    score_pair_step<C>(x0, x1, c, b, sc, table, mask);
  };
  auto score_one = [&](float x0, float x1, float& b, float& sc) {
    score_all<C>(x0, x1, b, sc, k, score_step);
  };
  auto score_some = [&](float x0, float x1, auto m, float& b, float& sc) {
    score_set<C>(x0, x1, m, b, sc, score_step);
  };
  // CELLS: the warp's ring of objects to score and movers to sum (fused/cell_table.cuh: CellRing).
  constexpr int kHardRing = 64 * U;
  constexpr unsigned kMoverEntry = CellRing<C>::kMoverEntry;
  uint2* hard_ring = reinterpret_cast<uint2*>(after) + warp * kHardRing;
  // Where the plan made room (p.ring_xy), each entry's coordinates beside it, after the ring:
  // the round reads them there instead of from L1 or L2 (H100, 2^24 x 2, K = 16: 0.97-0.98x the
  // time in float, 0.96-0.97x in double; with 128 x 128 cells, K = 32 and 64, 1.00-1.05x in
  // float, 1.04x in double, so not in double there: delta_plan.cpp).
  const bool ring_xy = p.ring_xy;
  using XY = std::conditional_t<sizeof(T) == 8, double2, float2>;
  XY* hard_xy = reinterpret_cast<XY*>(after + warps_in_block * 64 * U * 8) + warp * kHardRing;
  int hard_pending = 0, hard_head = 0;
  auto hard_round = [&]() {
    cell_ring_round<C>(hard_pending, hard_head, lane, hard_ring, cells_s, ring_xy, hard_xy, x, n, d, centre, score_one,
                       score_some, p, masks_s, mask, lookups, moves, rechecks, r2, s, k, count_inertia, my_inertia,
                       labels, add_moves);
  };
  // TILE: a pass's objects for the warp are 32 U consecutive ones (object u * 32 + lane of its
  // share of the block's pass), copied 16 bytes at a time: per coordinate 32 U sizeof(T) / 16
  // chunks, then the labels' 32 U * 4 / 16 = 8 U; past n, zeros (the host asks n % 4 == 0, so a
  // chunk is wholly in or out, and rows 16-byte aligned).
  // SHADOW: a buffer holds the pass's rows of the float copy (and after them the labels) in its
  // first half, and serves as the stage (in T) as without it once they are in registers.
  using TileT = std::conditional_t<SHADOW, float, T>;
  TileT* const ttiles = reinterpret_cast<TileT*>(tiles);
  auto tile_issue = [&](std::int64_t from, int which) {
    issue_tile_copies<C>(from, which, warp_u, lane, n, p, x, ttiles, tiles, labels);
  };
  int cur = 0;
  // SHADOW: the warp's ring of deferred movers (rows of x, then entries) after every warp's
  // buffers, `deferred` of them waiting (the same in every lane), summed a pass later as the
  // stage's movers are: a lane a coordinate, their q from the row by lane 0 of each mover's lanes.
  [[maybe_unused]] T* const ring_rows = reinterpret_cast<T*>(
      after + warps_in_block * 32 * U * 8 + static_cast<std::size_t>(warps_in_block) * 2 * TBE * sizeof(T) +
      static_cast<std::size_t>(warp) * delta_shadow_ring_warp_bytes(MAXD));
  [[maybe_unused]] uint2* const ring_entries = reinterpret_cast<uint2*>(ring_rows + kShadowRing * MAXD);
  [[maybe_unused]] int deferred = 0;
  // A queued mover's coordinate j (value v) out of its old cluster's sums and into its new one's,
  // and with j = 0 its count: the warp's rounds of movers, a lane a coordinate.
  auto move_coordinate = [&](uint2 entry, int j, T v) {
    move_mover_coordinate<C>(entry, j, v, p, dsums, d, dcounts);
  };
  [[maybe_unused]] auto sum_deferred = [&]() {
    sum_deferred_movers<C>(lane, deferred, ring_entries, ring_rows, move_coordinate);
  };
  // TILE (not with the cell table), where given p.chunks: the warps take their passes as they come
  // to them, not a fixed share each (the blocks' loops otherwise end 8-24 us apart on an H100,
  // though each does the same passes give or take one). A warp's pass is chunk c, its 32 U objects
  // from c 32 U. Its first two are the fixed schedule's (g and g + G for the grid's warp g of G);
  // then chunk 2 G + v C + g % C for the v-th count of counter g % C, taken a pass ahead (so the
  // atomic's round trip hides behind a pass), C counters on their own L2 lines (one counter for
  // the grid serialised ~30 000 atomics an iteration). The next chunk waits in shared memory, not
  // in registers. Which warp sums an object does not show in the fixed-point sums. In double only
  // (kDynamic): H100, 10 iterations, 0.96x the time at 2^21 x 16, K = 16, 0.93x at 2^20 x 32,
  // K = 16; in float the staged d = 16 kernel, at 128 registers, lost more to the added code than
  // it gained (1.05x).
  const bool dynamic = kDynamic && p.chunks != nullptr && p.done != nullptr && blockDim.x % 32 == 0;
  unsigned chunk_count = 0;  // (lane 0's, from its counter)
  if (dynamic && lane == 0)
    next_chunk_s[warp] = static_cast<int>((blockIdx.x + gridDim.x) * warps_in_block + warp);
  if (dynamic) __syncwarp();
  if constexpr (TILE) {
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * U;
    if (first < n) tile_issue(first, 0);
    gemm::cp_async_commit();
    if constexpr (SHADOW) gemm::cp_async_commit();  // (the movers' group "before" the first pass: empty)
  }
  std::int64_t start = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * U;
  if constexpr (CELLS && !TILE) {
    // The lean passes (fused/cell_table.cuh: lean_cell_pass, lean_cell_passes): every whole pass;
    // the last, part of one, in the general loop below.
    if (cell_side && p.vector_cells) {
      const int first = (warp * 32 + lane) * U;
      const float inertia_scale_f = static_cast<float>(p.inertia_scale);
      const unsigned below = (1u << lane) - 1u;
      const std::int64_t whole = n - static_cast<std::int64_t>(blockDim.x) * U;  // a pass from here is whole
      const T lo0 = static_cast<T>(p.grid.lo[0]), lo1 = static_cast<T>(p.grid.lo[1]);
      const T inv0 = static_cast<T>(p.grid.inv[0]), inv1 = static_cast<T>(p.grid.inv[1]);
      const int side = p.grid.side;
      static_assert(U == 4, "a lane's labels in one 16-byte load");
      static_assert(32 * U == kCellChunk, "the sorted order's chunks (cell_order.cuh) are the passes'");
      // The lean passes with the second coordinate's row 16-byte aligned (B_WHOLE: n sizeof(T) % 16
      // == 0, its U values in one or two 16-byte loads) or not (one load a value): two copies of
      // the loops, so that a pass issues only its own loads (a run-time test issued the other
      // kind's four loads predicated off, ~2% of the pass).
      auto lean_loops = [&](auto b_whole_tag) {
        lean_cell_passes<C, decltype(b_whole_tag)::value>(
            lookups, lo0, lo1, inv0, inv1, side, cells_s, cpair, p, inertia_scale_f, my_inertia, below, lane, hard_head,
            hard_pending, hard_ring, ring_xy, hard_xy, hard_round, x, n, labels, warp, warps_in_block, start, step, first,
            whole);
      };
      if (n * static_cast<std::int64_t>(sizeof(T)) % 16 == 0) lean_loops(std::true_type{});
      else lean_loops(std::false_type{});
    }
  }
  for (std::int64_t base = start;;) {
    [[maybe_unused]] std::int64_t next_base = 0;  // (kDynamic: the next pass's base, taken below)
    [[maybe_unused]] std::int64_t mma_following = 0;  // (kMmaDynamic: likewise, at the pass's end)
    const bool more = kDynamic && dynamic ? base + warp_u * 32 * U < n : base < n;  // (fixed: the same in the whole block)
    if (!more) break;
    T xr[U][MAXD];
    [[maybe_unused]] float xsh[SHADOW ? U : 1][MAXD];  // (SHADOW: the pass's x - z, from the float copy)
    int old[U];
    std::int64_t idx[U];
    bool has[U];
    if constexpr (TILE)
      load_staged_pass<C>(base, step, dynamic, next_chunk_s, warp, warp_u, lane, warps_in_block, n, cur, tile_issue, p,
                          chunk_count, next_base, stage, tiles, ttiles, idx, has, xsh, xr, old);
    else
      load_direct_pass<C>(base, step, dynamic, next_chunk_s, warp_first_s, warp, warp_u, lane, d, n, p, x, labels, idx,
                          has, xr, old);
    float xf[U][MAXD], nx[U], best[U], second[U];
    int bi[U];
    centre_pass_objects<C>(xr, xsh, has, idx, centre, p, n, xf, nx, best, second, bi, fill_q);
    // Each object's label candidate, whether it must be redone in seq's arithmetic, and (BALL)
    // whether its distance to its old centroid, already summed, is the one to keep.
    int cand[U];
    bool close[U], known[U];
    T dold[U];
    [[maybe_unused]] float adist[kApproxDist ? U : 1];  // (kApproxDist: the addend, or -1 where it is not proved)
    if (!BALL && !CELLS) {
      // The first NU slots against every centroid (each table row read once for all of them).
      auto score = [&](auto slots) {
        score_slots<C, decltype(slots)::value>(table, k, mask, xf, best, second, bi);
      };
      if constexpr (MMA) mma_scores(xf, best, second);
      else score(std::integral_constant<int, U>{});
#pragma unroll
      for (int u = 0; u < U; ++u) {
        cand[u] = PACK ? (__float_as_int(best[u]) & mask) : bi[u];
        if constexpr (MMA) {
          const float l = (second[u] - best[u]) - (p.factor * (nx[u] + r2) + p.tiny);
          close[u] = !(l > 0.0f && l * l > root2 * nx[u]);
          // kMmaDynamic: the pass after next counted here, after the scores (in flight through
          // them, its result's register pushed the 128-register kernel to spill), its round trip
          // behind the rest of the pass.
          if (kMmaDynamic && dynamic && lane == 0 && u == U - 1) {
            const unsigned g = blockIdx.x * warps_in_block + warp;
            chunk_count = atomicAdd(p.chunks + (g % kDeltaChunkCounters) * kDeltaChunkStride, 1u);
          }
        } else {
          close[u] = !(second[u] - best[u] > p.factor * (nx[u] + r2) + p.tiny);
        }
        known[u] = false;
        dold[u] = 0;
        if constexpr (kApproxDist) {
          const float a = nx[u] + best[u];
          adist[u] = fmaf(p.dist_factor, nx[u] + r2, p.dist_tiny) <= p.dist_eta * a ? a : -1.0f;
        }
      }
    } else {
      // Objects inside their old centroid's ball (BALL) or in a labelled cell (CELLS) take
      // that label without a score; the others go to the warp's list and are scored one per
      // lane, every lane busy.
      int listed = 0;
      bool sent[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const bool valid = has[u];
        dold[u] = 0;
        known[u] = false;
        bool settled = false;
        if constexpr (CELLS) {
          cand[u] = 0;
          if (valid && cell_side) {
            const int cell = cell_of(xr[u][0], xr[u][MAXD - 1], p.grid);
            const int label = cell >= 0 ? cells_s[cell] : kCellMixed;
            settled = label != kCellMixed;
            cand[u] = settled ? label : 0;
            lookups += settled ? 1u : 0u;
          }
        } else {
          if (valid && old[u] >= 0) {
#pragma unroll
            for (int j = 0; j < MAXD; ++j) dold[u] = fused_square_add(xr[u][j] - s[j * k + old[u]], dold[u]);
            known[u] = static_cast<double>(dold[u]) < ball[old[u]];
          }
          settled = known[u];
          cand[u] = old[u];
        }
        close[u] = false;
        const bool need = valid && !settled;
        sent[u] = need;
        const unsigned list = __ballot_sync(0xffffffffu, need);
        if constexpr (CELLS) {
          // Deferred to the warp's ring (index, old label), scored 32 at a time below.
          if (need) {
            const int slot = (hard_head + hard_pending + __popc(list & ((1u << lane) - 1))) & (kHardRing - 1);
            hard_ring[slot] = make_uint2(static_cast<unsigned>(idx[u]), static_cast<unsigned>(old[u] + 1) << 16);
            if (ring_xy) hard_xy[slot] = XY{xr[u][0], xr[u][MAXD - 1]};
          }
          hard_pending += __popc(list);
          has[u] = has[u] && !need;
          sent[u] = false;
          continue;
        }
        if (need)
          to_score[listed + __popc(list & ((1u << lane) - 1))] =
              make_float4(xf[u][0], MAXD > 1 ? xf[u][MAXD > 1 ? 1 : 0] : 0.0f, nx[u], __int_as_float(u * 32 + lane));
        listed += __popc(list);
      }
      __syncwarp();
      for (int e = lane; !CELLS && e - lane < listed; e += 32) {
        if (e < listed) {
          const float4 q = to_score[e];
          float b, sc;
          score_one(q.x, q.y, b, sc);
          const bool clear = sc - b > p.factor * (q.z + r2) + p.tiny;
          scored[__float_as_int(q.w)] = clear ? (__float_as_int(b) & mask) : -1;
        }
      }
      __syncwarp();
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (sent[u]) {
          const int r = scored[u * 32 + lane];
          cand[u] = r < 0 ? 0 : r;
          close[u] = r < 0;
          known[u] = !CELLS && r == old[u];  // the same centroid: its distance is dold
        }
      }
    }
    // (SHADOW: x's own coordinates, every pass's having come from the float copy, only for the
    // objects that need them, into the stage: a close call's, a coordinate a lane, for the warp's
    // re-check; a mover's, by its lane, once it is known; below.)
    if constexpr (kReload && !SHADOW) {
      // Double at 8 < d <= 16: the coordinates read again (from L1/L2, just loaded) for the
      // distance, the re-check and the stage, so that their doubles are not live through the
      // scores (H100, 256 MB, double: d = 16, K = 16 0.155 -> 0.145 ms, d = 12, K = 32 0.259 ->
      // 0.236; at d = 8 3% and at d = 32 10% slower, so not there).
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if constexpr (TILE && !MMA) {  // (TILE: still in this pass's buffer, zero past n; MMA wrote rows there)
#pragma unroll
          for (int j = 0; j < MAXD; ++j) xr[u][j] = stage[j * 32 * U + u * 32 + lane];
        } else {
          const T* xo = x + idx[u];
#pragma unroll
          for (int j = 0; j < MAXD; ++j, xo += n) xr[u][j] = has[u] && j < d ? __ldcg(xo) : T(0);
        }
      }
      // (TILE: the buffer's reads done before a re-check below writes its object there)
      if constexpr (TILE && !MMA) __syncwarp();
    }
    // The close calls: MMA's re-scored with FMAs (fused/mma_scores.cuh), then those left redone in
    // seq's arithmetic by the whole warp (above d = 4; fused/pass_steps.cuh).
    int redone[U];
    T redone_dist[U];
    if constexpr (MMA) mma_fma_rescores<C>(stage, has, close, cand, nx, r2, lane, rescores, table, k, mask, p);
    if constexpr (!kQueue) warp_rechecks<C>(redone, redone_dist, has, close, idx, xr, stage, s, d, k, lane, p, x, n);
    if constexpr (SHADOW) {
      // The last pass's movers whose rows came by cp.async while this pass loaded and scored.
      gemm::cp_async_wait<1>();
      __syncwarp();
      sum_deferred();
      __syncwarp();  // the ring read before this pass's movers' copies go there
    }
    int queued = 0;  // the warp's movers this pass (the same in every lane)
    // Above d = 4: 32 / MAXD movers per round, a lane per coordinate: each add to a different word
    // (no retries within the warp), every lane busy, instead of d divergent adds per mover lane
    // (ncu, d = 16, K = 16, double: 24% of the kernel's instructions before).
    constexpr int kPer = 32 / MAXD;
    const int slot = lane / MAXD, j = lane % MAXD;
    auto sum_movers = [&](int first, int end) {  // queue entries first ... end - 1, staged from first
      for (int m = first + slot; m - slot < end; m += kPer) {
        if (m < end && j < d) move_coordinate(queue[m], j, stage[(m - first) * MAXD + j]);
      }
    };
    // The movers the stage holds at a time (layouts.hpp: delta_stage_warp_bytes): with the
    // tensor-core scores in double at width 32 only the rows of x'' (18 movers), the rest staged
    // and summed in further rounds; elsewhere every one of the pass's 32 U.
    constexpr int kMoverCap =
        TILE || kQueue ? 32 * U
                       : static_cast<int>(delta_stage_warp_bytes(MAXD, sizeof(T), U, MMA) / (MAXD * sizeof(T)));
    constexpr bool kMoverRounds = kMoverCap < 32 * U;
    [[maybe_unused]] int mover_at[kMoverRounds ? U : 1];  // (kMoverRounds: the lane's objects' places, -1 for none)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t i =
          kMmaDynamic ? *reinterpret_cast<volatile std::int64_t*>(&warp_first_s[warp]) + lane : idx[u];
      bool moved = false;
      int label = 0;
      if (has[u]) {
        label = cand[u];
        T dist = 0;
        label_distance<C>(u, label, dist, close, rechecks, xr, s, d, k, redone, redone_dist, known, dold, adist,
                          has_rows, srow);
        if (count_inertia) my_inertia += to_fixed(static_cast<double>(dist), p.inertia_scale);
        moved = old[u] != label;
        if (moved) labels[i] = label;
      }
      // Movers go to the warp's queue, to be summed below with every lane busy (summed here, one
      // lane in 25 would hold the warp through several shared atomics). At d <= 4 their few
      // coordinates are read again (L1/L2), cheaper than a divergent pass per object; above,
      // the mover stages its coordinates in shared memory for the warp to sum one per lane.
      // (SHADOW: a buffer holds 32 movers' rows in T, not 32 U: each u's summed in turn; where
      // the ring has room for all of them, their rows come by cp.async and are summed a pass
      // later, their latency behind the next pass's loads and scores.)
      const int u_first = SHADOW ? queued : 0;
      const unsigned movers = __ballot_sync(0xffffffffu, moved);
      [[maybe_unused]] const bool defer = SHADOW && deferred + __popc(movers) <= kShadowRing;
      if (moved) {
        const int at = queued + __popc(movers & ((1u << lane) - 1));
        const uint2 entry = make_uint2(kMmaDynamic ? u * blockDim.x + threadIdx.x
                                                   : static_cast<unsigned>(i - (CELLS ? 0 : base)),
                                       static_cast<unsigned>(old[u] + 1) << 16 | static_cast<unsigned>(label));
        if constexpr (CELLS)  // (after this pass's objects to score, a mover entry)
        {
          const int slot = (hard_head + hard_pending + at) & (kHardRing - 1);
          hard_ring[slot] = make_uint2(entry.x, entry.y | kMoverEntry);
          if (ring_xy) hard_xy[slot] = XY{xr[u][0], xr[u][MAXD - 1]};
        }
        else
          queue[at] = entry;
        if (SHADOW && defer) {
          const int r = deferred + __popc(movers & ((1u << lane) - 1));
          if (p.rows) {
            // (16 bytes a copy: d = MAXD, the row and the ring's slot both 16-byte aligned)
            constexpr int V = 16 / static_cast<int>(sizeof(T));
            const T* xo = reinterpret_cast<const T*>(p.rows) + idx[u] * MAXD;
#pragma unroll
            for (int c = 0; c < MAXD; c += V) gemm::cp_async<16>(ring_rows + r * MAXD + c, xo + c, true);
          } else {
            const T* xo = x + idx[u];
#pragma unroll
            for (int c = 0; c < MAXD; ++c, xo += n) gemm::cp_async<sizeof(T)>(ring_rows + r * MAXD + c, xo, true);
          }
          ring_entries[r] = entry;
        } else if constexpr (SHADOW) {
          // (the ring full) The mover's row of x straight into the stage.
          T* row = stage + (at - u_first) * MAXD;
          const T* xo = p.rows ? reinterpret_cast<const T*>(p.rows) + idx[u] * MAXD : x + idx[u];
          const std::int64_t stride = p.rows ? 1 : n;
#pragma unroll
          for (int c = 0; c < MAXD; ++c, xo += stride) row[c] = __ldcg(xo);
        } else if (!kQueue && (!kMoverRounds || at < kMoverCap)) {
#pragma unroll
          for (int c = 0; c < MAXD; ++c)
            if (c < d) stage[(at - u_first) * MAXD + c] = xr[u][c];
        }
        if constexpr (kMoverRounds) mover_at[u] = at;
      } else if constexpr (kMoverRounds) {
        mover_at[u] = -1;
      }
      queued += __popc(movers);
      if constexpr (SHADOW) {
        if (defer) {
          deferred += __popc(movers);
        } else {
          __syncwarp();
          sum_movers(u_first, queued);
          __syncwarp();  // the stage read before the next u's movers are written there
        }
      }
    }
    if constexpr (SHADOW) gemm::cp_async_commit();  // (this pass's deferred movers' group, maybe empty)
    if (!CELLS) moves += lane == 0 ? static_cast<unsigned>(queued) : 0u;  // (CELLS: in the round)
    if (!kQueue && !SHADOW) {
      __syncwarp();
      if constexpr (kMoverRounds) {
        // kMoverCap movers a round, the first round's staged above.
        for (int first = 0; first < queued; first += kMoverCap) {
          if (first > 0) {
            __syncwarp();  // the last round's stage read before it is written again
#pragma unroll
            for (int u = 0; u < U; ++u)
              if (mover_at[u] >= first && mover_at[u] < first + kMoverCap) {
#pragma unroll
                for (int c = 0; c < MAXD; ++c)
                  if (c < d) stage[(mover_at[u] - first) * MAXD + c] = xr[u][c];
              }
            __syncwarp();
          }
          sum_movers(first, min(queued, first + kMoverCap));
        }
      } else {
        sum_movers(0, queued);
      }
    }
    if constexpr (CELLS) {
      hard_pending += queued;
    } else if (kQueue) {
      __syncwarp();
      for (int e = lane; e < queued; e += 32) {
        const uint2 q = queue[e];
        const std::int64_t i = base + q.x;
        T v[MAXD];
#pragma unroll
        for (int j = 0; j < MAXD; ++j) v[j] = j < d ? x[j * n + i] : T(0);
        add_move(v, static_cast<int>(q.y & 0xffffu), static_cast<int>(q.y >> 16) - 1);
      }
    }
    // kMmaDynamic: the next pass's chunk, read by every lane before lane 0 replaces it with the
    // one after (the reduction waits for every lane's read), not held through the pass (its base
    // in registers pushed the 128-register kernel to spill).
    if constexpr (kMmaDynamic)
      if (dynamic)
        mma_following =
            (static_cast<std::int64_t>(__reduce_max_sync(0xffffffffu, static_cast<unsigned>(next_chunk_s[warp]))) -
             warp_u) *
            32;
    if (kDynamic && dynamic && lane == 0) {  // (read by the warp's lanes after the barrier below)
      const unsigned g = blockIdx.x * warps_in_block + warp, grid_warps = gridDim.x * warps_in_block;
      next_chunk_s[warp] = static_cast<int>(2 * grid_warps + chunk_count * kDeltaChunkCounters + g % kDeltaChunkCounters);
    }
    __syncwarp();  // the queue's and the ring's slots are read before they are written again
    if constexpr (CELLS)
      while (hard_pending >= 32) hard_round();
    if constexpr (TILE) cur ^= 1;
    if constexpr (kMmaDynamic) base = dynamic ? mma_following : base + step;
    else if constexpr (kDynamic) base = next_base;
    else base += step;
  }
  if constexpr (CELLS)
    while (hard_pending > 0) hard_round();
  if constexpr (TILE) gemm::cp_async_wait<0>();  // (none should be left: the last pass issued none)
  if constexpr (SHADOW) {  // (the last pass's deferred movers)
    __syncwarp();
    sum_deferred();
  }
  __syncthreads();
  flush_block<C>(p, dsums, dcounts, k, d, lane, warp, warps_in_block, moves, rechecks, lookups, rescores,
                 my_inertia, fill_q, tallies_s);
  if (!p.done) return;
  // The last block to get here sees every block's atomics (each fenced before counting in).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_shared = atomicAdd(p.done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last_shared) return;
  __threadfence();
  if (p.sums_out) {
    for (int t = threadIdx.x; t < k * d; t += blockDim.x) p.sums_out[t] = __ldcg(&p.held_sums[t]);
    for (int c = threadIdx.x; c < k; c += blockDim.x) p.counts_out[c] = __ldcg(&p.held_counts[c]);
  }
  if (p.update)
    last_block_update<C>(p, centroids, s, dsums, table, zs, k, d, lane, warp_totals,
                         unsure_shared);
  if (threadIdx.x == 0 && !(p.update && p.release)) {
    *p.done = 0;
    if ((kDynamic || kLeanDynamic) && p.chunks)  // (every block's warps have taken their last)
      for (int c = 0; c < kDeltaChunkCounters; ++c) p.chunks[c * kDeltaChunkStride] = 0;
    if (CELLS && p.work_count) *p.work_count = 0;
  }
}

}  // namespace km::kernels
