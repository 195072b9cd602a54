// The delta kernel's variant as a traits type: the template's switches by name, and every
// constant derived from them, each with the reason it is what it is. The helpers of fused/ take
// it as `C` (C::CELLS, C::kDynamic, ...).
#pragma once

#include <cstddef>

#include "kernels/kmeans/layouts.hpp"

namespace km::kernels {

template <class T_, int MAXD_, bool PACK_, int U_, bool BALL_, bool CELLS_, bool MMA_, bool EXACT_,
          bool TILE_, bool SORTED_, bool SHADOW_, bool FILL_>
struct DeltaTraits {
  using T = T_;
  static constexpr int MAXD = MAXD_;      // the register width: the smallest power of two >= d
  static constexpr bool PACK = PACK_;     // the centroid's index in the score's low mantissa bits
  static constexpr int U = U_;            // objects a lane a pass
  static constexpr bool BALL = BALL_;     // Elkan's test first (fused/ball.cuh)
  static constexpr bool CELLS = CELLS_;   // the cell table (fused/cell_table.cuh)
  static constexpr bool MMA = MMA_;       // the scores on the tensor cores (fused/mma_scores.cuh)
  static constexpr bool EXACT = EXACT_;   // d is the register width itself
  static constexpr bool TILE = TILE_;     // the staged loads (fused/staged_loads.cuh)
  static constexpr bool SORTED = SORTED_; // CELLS in the cells' sorted order (fused/movers.cuh)
  static constexpr bool SHADOW = SHADOW_; // the passes from the float copy (fused/float_copy.cuh)
  static constexpr bool FILL = FILL_;     // this pass writes the float copy (fused/float_copy.cuh)

  // The score table's rows (layouts.hpp): |c''|^2, then -2 c'' from AOFF.
  static constexpr int ROW = delta_row(MAXD), AOFF = delta_row_offset(MAXD);
  // Above d = 2, the centroids again as rows [k][SROW] in T, zero past d (layouts.hpp:
  // delta_centroid_row): the label's distance reads its centroid with 16-byte loads and no test
  // against d, where [d][k] took a load, an address and a test per coordinate.
  static constexpr int SROW = delta_centroid_row(MAXD, sizeof(T));
  static constexpr int KS = MAXD >= 8 ? MAXD / 8 : 1;  // MMA: k-steps of 8 coordinates
  // TILE: a buffer in T (two a warp; SHADOW: buffers of floats, as many bytes a warp at U = 2 as
  // the double kernel's at U = 1).
  static constexpr int TBE =
      static_cast<int>(delta_tile_warp_bytes(MAXD, SHADOW ? sizeof(float) : sizeof(T), U, MMA) / 2 / sizeof(T));
  static constexpr std::size_t kStageWarp =
      TILE ? delta_tile_warp_bytes(MAXD, sizeof(T), U, MMA) : delta_stage_warp_bytes(MAXD, sizeof(T), U, MMA);

  // The warps take their passes from the chunk counters (fused/staged_loads.cuh): the tensor-core
  // scores' kernel, not staged, a pass its 32 objects (U = 1: d = 32, both precisions), where fixed
  // shares left the blocks' main loops ending 60-88 us apart at d = 32, K = 64 in float (ideal
  // 72.7 us, H100).
  static constexpr bool kMmaDynamic = MMA && !TILE && !CELLS && !BALL && U == 1;
  // The staged kernel in double, and in float at d 17-32 only: at d = 16, at 128 registers, the
  // code cost 8% against 3% that the balance gave back (H100).
  static constexpr bool kDynamic = (TILE && !CELLS && (sizeof(T) == 8 || MAXD == 32)) || kMmaDynamic;
  // The cell table's lean passes likewise (H100, 2^24 x 2, double: 0.967x the time at K = 16,
  // 0.973x at K = 64, the blocks' main loops ending 4.7 us apart, not 12).
  static constexpr bool kLeanDynamic = CELLS && !TILE;
  // The warp's index and its passes' bases through a warp reduction (REDUX), which ptxas keeps in
  // uniform registers, as the fixed shares' base is: read from shared memory or derived from the
  // thread's index, the pass's loop and its addressing ran on the vector pipes (the tensor-core
  // kernel at d = 32, K = 64: 3-7% slower). Not in the staged kernel in double, where it measured
  // level or 1% slower (H100). (Whole warps: --block is a multiple of 32.)
  static constexpr bool kUniformBase = kMmaDynamic || (kDynamic && sizeof(T) == 4);

  // The centre read from shared memory where an object is centred, rather than held in registers
  // through the whole loop (MAXD of them, 2 MAXD in double), where that measured faster: in
  // double (d = 16, K = 32-64 0.96-0.97x the time, d = 4 0.95x; the staged kernel at d = 16 164 ->
  // 128 registers, 0.97x on an H200 at 2^21 x 16, K = 16), in float from width 4 (width 32 with the
  // tensor-core scores 166 -> 126 registers, 0.89-0.93x) but for the tensor-core scores at width 16
  // (1.05x) and the staged kernels (d = 32, K = 16 1.04x).
  static constexpr bool kMuShared = sizeof(T) == 8 || (MAXD >= 4 && !(MMA && MAXD == 16) && !TILE);
  // At d <= 4 the movers are summed one a lane, their coordinates read again; above, a
  // coordinate a lane from the stage (fused/movers.cuh).
  static constexpr bool kQueue = MAXD <= 4;
  // Double at 8 < d <= 16: the coordinates read again for the distance, the re-check and the stage,
  // so that their doubles are not live through the scores (H100, 256 MB, d = 16, K = 16 0.155 ->
  // 0.145 ms, d = 12, K = 32 0.259 -> 0.236; at d = 8 3% and at d = 32 10% slower, so not there).
  static constexpr bool kReload = sizeof(T) == 8 && MAXD == 16;
  // Independent FMA chains per score: 2 at d = 32 (H100, 2^20 objects, K = 32 and 64: 2-5%
  // faster; level at d = 16, and 4 chains slower at both).
  static constexpr int kChains = MAXD == 32 ? 2 : 1;
  // The FMA scores' loop over the centroids 4 at a time in the staged kernel in float at d = 16
  // (nvcc took 2; H100, 2^21 x 16, K = 16 0.985-0.991x the time, K = 24 0.977-0.991x; unrolled by 8
  // 1.01-1.03x slower). Elsewhere as nvcc chooses: unrolling by 4 changed most kernels' registers
  // (the staged kernel in double at d = 32: 172 -> 212).
  static constexpr bool kScoreUnroll4 = TILE && !MMA && sizeof(T) == 4 && MAXD == 16;
  // In float with the FMA scores at widths 16 and 32: the inertia's addend from the scores where
  // their error is provably within dist_eta of it (margin.hpp: approx_dist_bound), not a distance
  // computed again (H100, 2^21 objects: d = 16, K = 16 0.962-0.968x the time, d = 32, K = 16
  // 0.949-0.959x; at width 8, where the distance is 8 FMAs, 1.022x, so not there).
  static constexpr bool kApproxDist = sizeof(T) == 4 && !MMA && !CELLS && !BALL && MAXD >= 16;
  // MMA: the stage's rows of x'' (MAXD + 4 floats: fragment reads without bank conflicts) and the
  // m-tiles of 16 objects a warp's pass makes.
  static constexpr int RS = MAXD + 4, MT = 2 * U;
  // The movers the stage holds at a time (layouts.hpp: delta_stage_warp_bytes): with the
  // tensor-core scores in double at width 32 only the rows of x'' (18 movers), the rest staged
  // and summed in further rounds; elsewhere every one of the pass's 32 U.
  static constexpr int kMoverCap =
      TILE || kQueue ? 32 * U : static_cast<int>(delta_stage_warp_bytes(MAXD, sizeof(T), U, MMA) / (MAXD * sizeof(T)));
  static constexpr bool kMoverRounds = kMoverCap < 32 * U;
  // The block's tallies in one reduction (fused/last_block_update.cuh): with the tensor-core
  // scores only, not staged (H100, 2^20 x 32, K = 64: 0.97x the time in float, 0.98x in double);
  // elsewhere it measured slower (1.01-1.04x at d = 2, 1.09-1.13x staged at d = 16).
  static constexpr bool kOneFlush = MMA && !TILE;

  // Launch bounds. Threads: layouts.hpp: delta_max_threads (192 in double at width 32, K <= 64, not
  // staged, so that two blocks fit an SM: on an H200 0.955x the time at 256 MB, d = 32, K = 64,
  // 0.81-0.83x at d = 20-28). A minimum of blocks an SM, so a register cap, where measured faster:
  // - 2 there (at most 168 registers where ptxas took 157-217 and an SM held one block of 256);
  // - 2 with the tensor-core scores in float at width 16 (128 registers, 12 bytes spilled; H100,
  //   2^21 x 16, K = 64: 0.88x the time with 170) and at width 32 not staged (the cap cost 7%
  //   staged);
  // - 2 for EXACT at d = 16 (ptxas took 164-166 without it: 3 blocks of 128 an SM, not 4), but not
  //   for the staged loads in double with FMA scores, where ptxas takes 128 on its own, and for
  //   SHADOW;
  // - 3 for the cell table's kernel in double, not staged (80 registers, not 64: H100, 2^24 x 2,
  //   0.89-0.91x the time at K = 16, 0.84x at K = 64; in float 1.09x, so not there);
  // - elsewhere 0, as if none were given (an explicit 1 changes ptxas's register choices).
  static constexpr int kMaxThreads = delta_max_threads(sizeof(T), MAXD, PACK, TILE);
  static constexpr int kMinBlocks = (PACK && sizeof(T) == 8 && MAXD == 32 && !TILE) ? 2
                                    : (MMA && sizeof(T) == 4 && (MAXD == 16 || (MAXD == 32 && !TILE))) ||
                                              (EXACT && MAXD == 16 && !(TILE && sizeof(T) == 8 && !MMA)) ||
                                              (SHADOW && MAXD == 16)
                                        ? 2
                                        : (CELLS && !TILE && sizeof(T) == 8) ? 3 : 0;

  static_assert(ROW >= 4, "the update stages 2 k doubles in the score table's k ROW floats");
  static_assert(!CELLS || (MAXD == 2 && PACK && !BALL), "the cell table: d = 2, K <= 64 only");
  static_assert(!MMA || (delta_mma_possible(MAXD, PACK) && !BALL && !CELLS),
                "the tensor-core scores: d = 16 or 32, K <= 64, no Elkan test or cells");
  static_assert(!SORTED || (CELLS && !TILE), "the sorted order: the cell table's lean passes");
  static_assert(!TILE || (!BALL && ((EXACT && MAXD >= 8 && !CELLS) || (CELLS && MAXD == 2))),
                "the staged loads: d a constant from 8 (or the cells at d = 2), no Elkan test");
  // (d = 16: a buffer holds 34 movers' rows in T, each u's 32 at most; at d = 32 it would hold 16.)
  static_assert(!SHADOW || (TILE && EXACT && PACK && !MMA && !CELLS && sizeof(T) == 8 && MAXD == 16 &&
                            delta_tile_warp_bytes(MAXD, sizeof(float), U) / 2 >= 32 * MAXD * sizeof(T)),
                "the float copy: the staged kernel in double, d = 16, K <= 64, FMA scores");
  static_assert(!FILL || (TILE && EXACT && PACK && !MMA && !CELLS && !SHADOW && sizeof(T) == 8 && MAXD == 16),
                "the float copy's writer: the staged kernel in double reading x, d = 16, FMA scores");
};

// The features as flags, so that a variant is named without positional bools:
// DeltaVariant<T, MAXD, PACK, U, kDeltaExact | kDeltaTile> is DeltaTraits with EXACT and TILE on.
enum DeltaFeature : unsigned {
  kDeltaBall = 1u << 0,
  kDeltaCells = 1u << 1,
  kDeltaMma = 1u << 2,
  kDeltaExact = 1u << 3,
  kDeltaTile = 1u << 4,
  kDeltaSorted = 1u << 5,
  kDeltaShadow = 1u << 6,
  kDeltaFill = 1u << 7,
};

template <class T, int MAXD, bool PACK, int U, unsigned F = 0>
using DeltaVariant =
    DeltaTraits<T, MAXD, PACK, U, (F & kDeltaBall) != 0, (F & kDeltaCells) != 0,
                (F & kDeltaMma) != 0, (F & kDeltaExact) != 0, (F & kDeltaTile) != 0, (F & kDeltaSorted) != 0,
                (F & kDeltaShadow) != 0, (F & kDeltaFill) != 0>;

}  // namespace km::kernels
