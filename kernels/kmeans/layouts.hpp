// Shared-memory footprints and unroll factors of the k-means kernels, written once: the
// kernels carve their shared memory with these, the engines size launches with them, the
// registry's supports() answers with them and the tests check them. Plain constexpr, so
// both nvcc and the host compiler read this file.
#pragma once

#include <cmath>
#include <cstddef>

#if defined(__CUDACC__)
#define KM_HOST_DEVICE __host__ __device__
#else
#define KM_HOST_DEVICE
#endif

namespace km::kernels {

// shared, offload: every centroid value, [d][k], in T.
KM_HOST_DEVICE constexpr std::size_t centroids_bytes(std::size_t k, std::size_t d, std::size_t elem) {
  return k * d * elem;
}

// offload-block and fused's one-pass path: per block, k*d 8-byte sums (double, or 64-bit
// fixed point), k unsigned counts (padded to an even count so what follows stays 8-byte
// aligned), then the centroids [d][k] in T. In the integer type of the caller: the kernels
// use int (fewer registers than 64-bit offsets), the host size_t.
template <class I>
struct BlockSumsLayout {
  I counts_offset, centroids_offset, bytes;
};
template <class I>
KM_HOST_DEVICE constexpr BlockSumsLayout<I> block_sums_layout(I k, I d, I elem) {
  const I counts = k * d * 8;
  const I centroids = counts + (k + 1) / 2 * 2 * static_cast<I>(sizeof(unsigned));
  return {counts, centroids, centroids + k * d * elem};
}

// fused, one-pass path: coordinates are held in registers of width MAXD, the smallest power
// of two >= d (d <= 32), and each thread loads U objects before using any.
constexpr int kFusedMaxCoords = 32;
KM_HOST_DEVICE constexpr int fused_register_width(std::size_t d) {
  int w = 1;
  while (static_cast<std::size_t>(w) < d) w *= 2;
  return w;
}
KM_HOST_DEVICE constexpr int fused_unroll(int maxd) { return maxd <= 2 ? 8 : maxd <= 8 ? 4 : maxd <= 16 ? 2 : 1; }
// Owner lanes (lane c of a warp sums cluster c in registers) for 8 <= d <= 16 and K <= 32.
KM_HOST_DEVICE constexpr bool fused_owner_lanes(int maxd, std::size_t k) { return maxd >= 8 && maxd <= 16 && k <= 32; }
// The one-pass path where it is measured faster than the tensor path; otherwise the tensor
// path, which takes any shape. The crossover, from fused's two paths forced on the same data
// (N = 2^20, 10 iterations, medians of 3, an H100, the delta kernel's close calls scored by the
// whole warp): one pass wins at every K measured (up to 1024; also on an H200) for d <= 8;
// above, up to K*d = 4096
// in both precisions: d = 16, K = 256 0.50 against 0.76 ms in double, 0.45 against 0.85 in
// float; d = 32, K = 128 0.53 against 0.68 and 0.41 against 0.65; at K*d = 8192 the two are
// level (within 4%) or the tensor path wins (by 11x at d = 32, K = 256 in double). Its shared
// memory must fit too (at most 200 KB a block: the tables grow with K*d, and one block per SM
// still wins at d = 8, K = 1024). With the tensor path's movers' scheme (an H100) the same
// holds everywhere but at d = 8, K = 1024 in double, where the tensor path wins (1.12 against
// 1.30 ms; in float level, 1.12 and 1.11), so in double one pass takes 4 < d <= 8 only up to
// K*d = 4096.
constexpr std::size_t kFusedOnePassSharedLimit = 200 * 1024;
KM_HOST_DEVICE constexpr bool fused_one_pass(std::size_t k, std::size_t d, std::size_t elem) {
  const bool fits = d <= static_cast<std::size_t>(kFusedMaxCoords) &&
                    block_sums_layout<std::size_t>(k, d, elem).bytes + k * (d + 4) * 4 <= kFusedOnePassSharedLimit;
  const std::size_t kd = k * d;
  const bool faster = d <= 4 || (d <= 8 && elem == 4) || kd <= 4096u;
  return fits && faster;
}

// fused's one-pass delta kernel (6_fused_delta.cuh), per block: k*d 64-bit fixed-point sums
// of the block's moves, k int count changes (padded to 4), the float filter's table, k rows of
// delta_row(maxd) floats (the centroid's |c''|^2 and -2 c''), then the centroids [d][k] in T,
// then (delta_has_rows) the centroids as rows [k][delta_centroid_row] in T.
KM_HOST_DEVICE constexpr int delta_row(int maxd) { return maxd <= 2 ? 4 : maxd + 4; }
KM_HOST_DEVICE constexpr int delta_row_offset(int maxd) { return maxd <= 2 ? 1 : 4; }
// Above register width 2 and up to kDeltaRowsMaxK centroids, the centroids once more as rows of
// this many T (the width and 16 bytes, so that 8 lanes' 16-byte reads of rows r and r + 1 fall in
// different banks), zero past d; 0: none. (Not above: at K = 128 their shared memory cost d = 16
// in double 12% (H100, 256 MB), and at d <= 8 one pass runs to K = 2048, where they would push
// the block past the opt-in shared memory.)
constexpr int kDeltaRowsMaxK = 64;
KM_HOST_DEVICE constexpr int delta_centroid_row(int maxd, std::size_t elem) {
  return maxd <= 2 ? 0 : maxd + 16 / static_cast<int>(elem);
}
KM_HOST_DEVICE constexpr bool delta_has_rows(int maxd, std::size_t k) {
  return maxd > 2 && k <= static_cast<std::size_t>(kDeltaRowsMaxK);
}
template <class I>
struct DeltaLayout {
  I counts_offset, table_offset, centroids_offset, rows_offset, bytes;
};
template <class I>
KM_HOST_DEVICE constexpr DeltaLayout<I> delta_layout(I k, I d, I elem) {
  const int maxd = fused_register_width(static_cast<std::size_t>(d));
  const I counts = k * d * 8;
  const I table = (counts + (k + 3) / 4 * 4 * static_cast<I>(sizeof(int)) + 15) / 16 * 16;  // float4 rows
  const I centroids = table + k * static_cast<I>(delta_row(maxd)) * 4;
  const I rows = (centroids + k * d * elem + 15) / 16 * 16;
  const I row = delta_has_rows(maxd, static_cast<std::size_t>(k))
                    ? static_cast<I>(delta_centroid_row(maxd, static_cast<std::size_t>(elem)))
                    : I{0};
  return {counts, table, centroids, rows, rows + k * row * elem};
}
// Objects per thread per pass of the delta kernel: half of the classic kernel's (measured on an
// H200: 0.219 against 0.245 ms at d = 2 and 0.223 against 0.341 ms at d = 16, K = 16, double;
// the filter needs registers of its own).
// Float, with half the registers per coordinate, takes 4 up to d = 8 and 2 up to d = 16 (H100,
// 256 MB: d = 16, K = 16 0.137 -> 0.118 ms, d = 4 and 8 5-8% faster).
KM_HOST_DEVICE constexpr int delta_unroll(int maxd, std::size_t elem = 8) {
  return maxd <= 2 || (maxd <= 8 && elem == 4) ? 4 : maxd <= 8 || (maxd <= 16 && elem == 4) ? 2 : 1;
}
// Its movers' queue, after the layout above: per warp, 32 * U entries of 8 bytes (the object's
// offset in the pass, its old and new labels), for a block of `threads`. With Elkan's test
// (d <= 2, K <= 64), also the objects to score (16 bytes) and their results (4). Above d = 4,
// also the movers' coordinates (maxd values of elem bytes each; delta_stage_bytes), staged so
// that a warp sums them a coordinate per lane.
// With the scores on the tensor cores (delta_mma), a warp's stage holds at least its 32 U objects
// as rows of maxd + 4 floats (the fragments' reads conflict-free).
KM_HOST_DEVICE constexpr std::size_t delta_stage_warp_bytes(int maxd, std::size_t elem, int unroll, bool mma = false) {
  const std::size_t plain = static_cast<std::size_t>(32 * unroll * maxd) * elem;
  const std::size_t rows = static_cast<std::size_t>(32 * unroll * (maxd + 4)) * 4;
  // (mma at width 32: the rows alone, in double fewer bytes than the plain stage, so that two
  // blocks of 192 fit an SM at K = 64 (delta_max_threads); the kernel then stages its movers in
  // rounds of as many as the rows' bytes hold, 18. At width 16 in double, where the rounds
  // measured 1.01-1.02x the time and the blocks are not limited by shared memory, the plain stage.)
  return maxd <= 4 ? 0 : mma && (maxd == 32 || rows > plain) ? rows : plain;
}
KM_HOST_DEVICE constexpr std::size_t delta_stage_bytes(int maxd, int threads, std::size_t elem, int unroll,
                                                       bool mma = false) {
  return static_cast<std::size_t>((threads + 31) / 32) * delta_stage_warp_bytes(maxd, elem, unroll, mma);
}
// The delta kernel's scores on the tensor cores (6_fused_delta.cuh, MMA): register widths 16 and
// 32, the index in the scores' bits (K <= 64), neither Elkan's test nor the bounds nor the cells.
KM_HOST_DEVICE constexpr bool delta_mma_possible(int maxd, bool pack) { return (maxd == 16 || maxd == 32) && pack; }
// Its operands in fragment order, after the stage: per pair of n-tiles (16 centroids) and
// k-step, a float2 of TF32 B values per lane; then per n-tile a float4 of |c''|^2 per lane
// (columns 2t, 2t + 1, twice: the accumulators' start as loaded).
KM_HOST_DEVICE constexpr std::size_t delta_mma_table_bytes(std::size_t k, int maxd) {
  return (k + 15) / 16 * 2 * (static_cast<std::size_t>(maxd / 8) + 2) * 32 * 8;
}
// The staged loads' copy plan (6_fused_delta.cuh, TILE) for a warp's pass of 32 U objects: each of
// its maxd coordinate rows is tile_row_chunks 16-byte chunks, and copy step s of lane l takes chunk
// tile_chunk(...).col of row tile_chunk(...).row. Where a row is at most 32 chunks (and 32 a
// multiple of them), a step covers 32 / chunks rows, lane l the same chunk of row l / chunks + s
// (32 / chunks) at every step (the kernel adds a constant stride); where a row is more, step s
// takes row s % maxd, chunks (s / maxd) 32 + l (d = 2 in double). tile_copy_steps: 0 where the
// plan does not apply (the kernel asserts it does).
struct TileChunk {
  int row, col;
};
KM_HOST_DEVICE constexpr int tile_row_chunks(int unroll, std::size_t elem) {
  return static_cast<int>(static_cast<std::size_t>(32 * unroll) * elem / 16);
}
KM_HOST_DEVICE constexpr int tile_copy_steps(int maxd, int unroll, std::size_t elem) {
  const int rc = tile_row_chunks(unroll, elem);
  if (rc <= 0 || 8 * unroll > 32) return 0;
  if (rc <= 32) return 32 % rc == 0 && maxd % (32 / rc) == 0 ? maxd / (32 / rc) : 0;
  return rc % 32 == 0 ? maxd * (rc / 32) : 0;
}
KM_HOST_DEVICE constexpr TileChunk tile_chunk(int maxd, int unroll, std::size_t elem, int step, int lane) {
  const int rc = tile_row_chunks(unroll, elem);
  if (rc <= 32) return {step * (32 / rc) + lane / rc, lane % rc};
  return {step % maxd, (step / maxd) * 32 + lane};
}
// With the staged loads (6_fused_delta.cuh, TILE), in the stage's place: per warp two buffers of
// its 32 U objects' coordinates and old labels, (maxd + 1) rows of 32 U values of elem bytes
// (with mma at least the stage's rows of x'').
// SHADOW (the staged double kernel from the float copy): per warp a ring of kShadowRing movers'
// rows of x (doubles) and their entries, after every warp's buffers, where their copies land while
// the warp scores its next pass.
constexpr int kShadowRing = 16;
KM_HOST_DEVICE constexpr std::size_t delta_shadow_ring_warp_bytes(int maxd) {
  return static_cast<std::size_t>(kShadowRing) * (static_cast<std::size_t>(maxd) * 8 + 8);
}
KM_HOST_DEVICE constexpr std::size_t delta_tile_warp_bytes(int maxd, std::size_t elem, int unroll, bool mma = false) {
  const std::size_t data = static_cast<std::size_t>((maxd + 1) * 32 * unroll) * elem;
  const std::size_t rows = static_cast<std::size_t>(32 * unroll * (maxd + 4)) * 4;
  return 2 * (mma && rows > data ? rows : data);
}
// With the cell table (d = 2): a ring of 64 U entries (objects to score and movers), 8 bytes each
// (and where the plan has room, ring_xy, each entry's two coordinates: delta_ring_xy_bytes).
KM_HOST_DEVICE constexpr std::size_t delta_queue_bytes(int maxd, int threads, std::size_t elem, bool ball = false,
                                                       bool cells = false, bool mma = false, bool tile = false) {
  return static_cast<std::size_t>((threads + 31) / 32) * 32 * static_cast<std::size_t>(delta_unroll(maxd, elem)) *
             (cells ? 16 : ball && maxd <= 4 ? 28 : 8) +
         (tile ? static_cast<std::size_t>((threads + 31) / 32) * delta_tile_warp_bytes(maxd, elem, delta_unroll(maxd, elem), mma)
               : delta_stage_bytes(maxd, threads, elem, delta_unroll(maxd, elem), mma));
}
KM_HOST_DEVICE constexpr std::size_t delta_ring_xy_bytes(int threads, std::size_t elem) {
  return static_cast<std::size_t>((threads + 31) / 32) * 64 * static_cast<std::size_t>(delta_unroll(2, elem)) * 2 * elem;
}
// Where the cell table's kernel keeps what, in bytes from the end of its delta layout (16-byte
// aligned): the warps' rings (64 U entries of 8 bytes each) at 0; from `xy`, where ring_xy, each
// entry's two coordinates; from `table`, side^2 cells of a byte; from `masks`, where masks, each
// cell's 16-bit candidates; `end` past all. The plan's bytes must reach `end` (a CPU test:
// DeltaPlan.CellTableLayoutFitsThePlan). The kernel (6_fused_delta.cuh: hard_xy, cells_s,
// masks_s) forms the same offsets inline: taken from here, its PTX changed, and that is not
// measured yet.
struct CellsLayout {
  std::size_t xy = 0, table = 0, masks = 0, end = 0;
};
KM_HOST_DEVICE constexpr CellsLayout delta_cells_layout(int warps, int unroll, std::size_t elem, int side, bool ring_xy,
                                                        bool masks) {
  CellsLayout l;
  const std::size_t entries = static_cast<std::size_t>(warps) * 64 * static_cast<std::size_t>(unroll);
  const std::size_t cells = static_cast<std::size_t>(side) * static_cast<std::size_t>(side);
  l.xy = entries * 8;
  l.table = l.xy + (ring_xy ? entries * 2 * elem : 0);
  l.masks = l.table + cells;
  l.end = l.masks + (masks ? 2 * cells : 0);
  return l;
}
// The most shared memory the delta kernel asks for (a block of its most threads, Elkan's lists
// counted): where a GPU cannot give it, fused's one-pass engine runs the classic kernel instead.
constexpr int kDeltaMaxThreads = 256;
// The most threads a block of the delta kernel takes (its launch bounds): 192 in double at width
// 32 with the index packed (K <= 64), not staged (the tensor-core or the FMA scores), where two
// blocks of 192 at most 168 registers each fit an SM (the kernels took 157-217 registers and one
// block of 256 an SM: 8 warps, not 12; the plan takes 192 there: delta_plan.cpp); elsewhere
// kDeltaMaxThreads (at K = 100, d = 32 in double 192 measured 1.13x the time; the staged kernel
// at d = 32, K = 16 in blocks of 192 1.16x).
KM_HOST_DEVICE constexpr int delta_max_threads(std::size_t elem, int maxd, bool pack, bool tile) {
  return pack && elem == 8 && maxd == 32 && !tile ? 192 : kDeltaMaxThreads;
}
// The dynamic passes' counters (DeltaPass::chunks: the staged kernel in double, the cell table's
// lean passes): how many, and how far apart in unsigneds (128 bytes: each on its own L2 line).
constexpr int kDeltaChunkCounters = 16, kDeltaChunkStride = 32;
// Whether a grid of grid_warps warps may take its chunks from the counters: chunk 2 G + v C + r
// goes to a warp g with g % C == r, so every counter needs a warp (G >= C), else the chunks of a
// counter no warp reads are never taken (tests: DeltaChunks.*). Whole warps only.
KM_HOST_DEVICE constexpr bool delta_chunks_dynamic(long long grid_blocks, int block_threads) {
  return block_threads % 32 == 0 && grid_blocks * (block_threads / 32) >= kDeltaChunkCounters;
}
KM_HOST_DEVICE constexpr std::size_t delta_shared_bytes(std::size_t k, std::size_t d, std::size_t elem) {
  return delta_layout<std::size_t>(k, d, elem).bytes +
         delta_queue_bytes(fused_register_width(d), kDeltaMaxThreads, elem, true) + 16;
}
// Bits the delta kernel's float filter writes the centroid index into (0: K too large for the
// bits to cost little precision; a compare and a select track the index instead).
KM_HOST_DEVICE constexpr int delta_index_bits(std::size_t k) {
  int b = 1;
  while ((std::size_t{1} << b) < k) ++b;
  return k <= 64 ? b : 0;
}

// The exponent E of the fixed-point sums (update.cuh: to_fixed): the largest with
// bound * 2^E < 2^61, where bound = max|x| * n is the largest |sum| any cluster can reach;
// the spare bits absorb the addends' rounding (each at most 1/2).
inline int fixed_point_exponent(double bound) {
  if (!(bound > 0)) return 0;
  int e = 0;
  std::frexp(bound, &e);  // bound < 2^e
  const int exponent = 61 - e;
  return exponent < -1000 ? -1000 : exponent > 1000 ? 1000 : exponent;
}

}  // namespace km::kernels
