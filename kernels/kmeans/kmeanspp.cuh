// k-means++ on the GPU (src/kmeans/gpu/kmeanspp.cu): the data-sized steps, in the CPU's
// arithmetic so the centres come out the same bit for bit: every distance in double, summed
// over the coordinates in order with no fused multiply-add (the _rn intrinsics), and every
// sum over a chunk of objects taken by one thread in object order.
#pragma once

#include <cstdint>

#include <cuda/atomic>

#include "kmeans/parallel_draw.hpp"

namespace km::kernels {

// Both distance passes stage their objects through shared memory: a block of kRows objects
// reads kCols coordinates of each row at a time, coalesced, as doubles (rows padded to
// kCols + 1: conflict-free when each thread walks its own row). Each distance is still summed
// in coordinate order.
constexpr int kPlusPlusRows = 128, kPlusPlusCols = 32;

// The block's kPlusPlusRows objects, coordinates [p0, p0 + kPlusPlusCols), into the tile as
// doubles: every thread issues all its loads before storing any (kPlusPlusCols of them in
// flight), a warp reading one row's columns, coalesced.
template <class T>
__device__ __forceinline__ void plusplus_stage(const T* __restrict__ x, std::int64_t n, int d, std::int64_t row0,
                                               int p0, double (*tile)[kPlusPlusCols + 1]) {
  constexpr int per = kPlusPlusRows * kPlusPlusCols / kPlusPlusRows;  // = kPlusPlusCols
  T v[per];  // as loaded: converted only at the stores, so no conversion waits among the loads
  const int c = threadIdx.x % kPlusPlusCols, r0 = threadIdx.x / kPlusPlusCols;
  constexpr int row_step = kPlusPlusRows / kPlusPlusCols;
  const T* at = x + (row0 + r0) * d + p0 + c;  // stepped, not recomputed: one address live
  const std::int64_t step = static_cast<std::int64_t>(row_step) * d;
#pragma unroll
  for (int q = 0; q < per; ++q, at += step) v[q] = row0 + r0 + q * row_step < n && p0 + c < d ? *at : T(0);
#pragma unroll
  for (int q = 0; q < per; ++q) tile[r0 + q * row_step][c] = static_cast<double>(v[q]);
}

// The block's kPlusPlusRows objects staged a tile at a time (plusplus_stage); each thread then
// calls visit(p, x_ip) for its own object's coordinates p = 0, 1, ..., d - 1 in order.
template <class T, class Visit>
__device__ __forceinline__ void plusplus_walk_rows(const T* __restrict__ x, std::int64_t n, int d, std::int64_t row0,
                                                   double (*tile)[kPlusPlusCols + 1], Visit&& visit) {
  for (int p0 = 0; p0 < d; p0 += kPlusPlusCols) {
    __syncthreads();  // the previous tile is used up
    plusplus_stage(x, n, d, row0, p0, tile);
    __syncthreads();
    const int cols = d - p0 < kPlusPlusCols ? d - p0 : kPlusPlusCols;
    for (int q = 0; q < cols; ++q) visit(p0 + q, tile[threadIdx.x][q]);
  }
}

// mins[t][i] = min(closest[i], distance to centre t) for `count` centres of d doubles
// (centres[t][d]), or (mins null) closest[i] = that minimum (count 1) -- or, with `first`,
// the distance itself. Blocks of kPlusPlusRows threads, one object each; the centres' slice
// of coordinates is staged beside the objects'. G (1, 2, 4, 8 or 16) centres at a time, so a
// pass over one centre does not pay for sixteen.
template <class T, int G>
__global__ void __launch_bounds__(kPlusPlusRows)
    plusplus_distances(const T* __restrict__ x, std::int64_t n, int d, const double* __restrict__ centres,
                       int count, bool first, double* __restrict__ closest, double* __restrict__ mins) {
  __shared__ double tile[kPlusPlusRows][kPlusPlusCols + 1];
  __shared__ double cs[G][kPlusPlusCols];
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kPlusPlusRows;
  const std::int64_t i = row0 + threadIdx.x;
  const double cl = i < n && !first ? closest[i] : 0.0;
  for (int t0 = 0; t0 < count; t0 += G) {
    const int group = count - t0 < G ? count - t0 : G;
    double acc[G];
#pragma unroll
    for (int t = 0; t < G; ++t) acc[t] = 0;
    for (int p0 = 0; p0 < d; p0 += kPlusPlusCols) {
      __syncthreads();  // the previous tiles are used up
      plusplus_stage(x, n, d, row0, p0, tile);
      for (int f = threadIdx.x; f < G * kPlusPlusCols; f += blockDim.x) {
        const int t = f / kPlusPlusCols, c = f % kPlusPlusCols;
        cs[t][c] = t < group && p0 + c < d ? centres[static_cast<std::int64_t>(t0 + t) * d + p0 + c] : 0.0;
      }
      __syncthreads();
      const int cols = d - p0 < kPlusPlusCols ? d - p0 : kPlusPlusCols;
      for (int c = 0; c < cols; ++c) {
        const double v = tile[threadIdx.x][c];
#pragma unroll
        for (int t = 0; t < G; ++t) {  // padding centres (t >= group) are computed, never stored
          const double e = __dsub_rn(v, cs[t][c]);
          acc[t] = __dadd_rn(acc[t], __dmul_rn(e, e));
        }
      }
    }
    if (i < n) {
#pragma unroll
      for (int t = 0; t < G; ++t)
        if (t < group) {
          const double m = first ? acc[t] : acc[t] < cl ? acc[t] : cl;
          if (mins)
            mins[(t0 + t) * n + i] = m;
          else
            closest[i] = m;
        }
    }
  }
}

// (The two kernels below are static: several translation units include this header, e.g. the
// GPU engines' final inertia, engine.cu.)
// out[ch * rows + r] = the sum, in object order, of values[r][chunk ch] (rows of n values):
// one warp per (chunk, row). Lane 0 adds the chunk's values in order (the CPU's order: the same
// bits) from a batch of 256 in shared memory, while the warp's loads of the next batch are in
// flight (two batches a warp, each lane carrying 8 values from the load to the store).
constexpr int kSumWarps = 4, kSumBatch = 256;

// A warp's next batch of kSumBatch values on its way from memory to shared memory: each lane loads
// 8 (zeros past `end`) into registers, so the loads are in flight while lane 0 works through the
// batch before; `put` stores them once it has.
struct NextBatch {
  static constexpr int per = kSumBatch / 32;
  double v[per];
  __device__ __forceinline__ void fetch(const double* __restrict__ values, std::int64_t b, std::int64_t end,
                                        int lane) {
#pragma unroll
    for (int q = 0; q < per; ++q) v[q] = b + lane + 32 * q < end ? values[b + lane + 32 * q] : 0.0;
  }
  __device__ __forceinline__ void put(double* slot, int lane) const {
#pragma unroll
    for (int q = 0; q < per; ++q) slot[lane + 32 * q] = v[q];
  }
};

static __global__ void __launch_bounds__(kSumWarps * 32)
    plusplus_chunk_sums(const double* __restrict__ values, std::int64_t n, int rows, std::int64_t chunk,
                        std::int64_t chunks, double* __restrict__ out) {
  __shared__ double batch[2][kSumWarps][kSumBatch];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * kSumWarps + warp;
  if (t >= chunks * rows) return;  // whole warps leave together
  const std::int64_t ch = t / rows;
  const int r = static_cast<int>(t % rows);
  const std::int64_t begin = ch * chunk, end = begin + chunk < n ? begin + chunk : n;
  const double* v = values + static_cast<std::int64_t>(r) * n;
  NextBatch next;
  next.fetch(v, begin, end, lane);
  next.put(batch[0][warp], lane);
  __syncwarp();
  double s = 0;
  int buf = 0;
  for (std::int64_t b = begin; b < end; b += kSumBatch) {
    const int count = static_cast<int>(end - b < kSumBatch ? end - b : kSumBatch);
    const bool more = b + kSumBatch < end;
    if (more) next.fetch(v, b + kSumBatch, end, lane);  // lands while lane 0 adds this batch
    if (lane == 0)
      for (int q = 0; q < count; ++q) s = __dadd_rn(s, batch[buf][warp][q]);
    if (more) next.put(batch[buf ^ 1][warp], lane);  // the other buffer: lane 0 finished with it a batch ago
    __syncwarp();
    buf ^= 1;
  }
  if (lane == 0) out[t] = s;
}

// The draws' walks (init.hpp: PlusPlusSteps::Draw), one warp per draw: the first object of the
// chunk, in order, where the running remainder r (r less each earlier object's closest, with the
// CPU's subtractions: the same bits) falls below the object's closest; then on past objects already
// at a centre. Batch by batch (256 values, the next batch's loads in flight meanwhile): lane 0 runs
// the remainder's chain alone, a subtraction a value, writing each value's r beside it; then every
// lane compares its 8 values and a ballot finds the first. (Lane 0 comparing and branching at
// each value took ~60 cycles a value, 0.6 ms a draw at 16,384-object chunks.)
static __global__ void __launch_bounds__(kSumWarps * 32)
    plusplus_walk(const double* __restrict__ closest, std::int64_t n, std::int64_t chunk,
                  const std::int64_t* __restrict__ chunks, const double* __restrict__ rs, int count,
                  std::int64_t* __restrict__ cands) {
  constexpr int per = kSumBatch / 32;
  __shared__ double batch[2][kSumWarps][kSumBatch];
  __shared__ double before[kSumWarps][kSumBatch];  // r before each value's subtraction
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int w = blockIdx.x * kSumWarps + warp;
  if (w >= count) return;  // whole warps leave together
  const std::int64_t begin = chunks[w] * chunk, end = begin + chunk < n ? begin + chunk : n;
  NextBatch next;
  next.fetch(closest, begin, end, lane);
  next.put(batch[0][warp], lane);
  __syncwarp();
  double r = rs[w];
  std::int64_t cand = end - 1;
  int buf = 0;
  for (std::int64_t b = begin; b < end; b += kSumBatch) {
    const int size = static_cast<int>(end - b < kSumBatch ? end - b : kSumBatch);
    const bool more = b + kSumBatch < end;
    if (more) next.fetch(closest, b + kSumBatch, end, lane);  // lands while lane 0 runs this batch's chain
    const double* v = batch[buf][warp];
    if (lane == 0)  // 8 values read ahead (the stores of r could alias them: read first, then run)
      for (int q0 = 0; q0 < size; q0 += 8) {
        double e[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) e[u] = v[q0 + u];
#pragma unroll
        for (int u = 0; u < 8; ++u) {  // past size: the batch's zero padding, r - 0 = r, never compared
          before[warp][q0 + u] = r;
          r = __dsub_rn(r, e[u]);
        }
      }
    __syncwarp();
    unsigned hit = 0;  // bit q: this lane's value q (object b + lane + 32 q) is where r falls below
#pragma unroll
    for (int q = 0; q < per; ++q) {
      const int at = lane + 32 * q;
      if (at < size && before[warp][at] < v[at]) hit |= 1u << q;
    }
    // the first hit in object order: the least q with a hit in any lane, then the least lane
    int first = -1;
#pragma unroll
    for (int q = per - 1; q >= 0; --q) {
      const unsigned lanes = __ballot_sync(0xffffffffu, (hit >> q) & 1u);
      if (lanes) first = 32 * q + (__ffs(lanes) - 1);
    }
    if (first >= 0) {
      cand = b + first;
      break;  // the whole warp: first is the same in every lane
    }
    if (more) next.put(batch[buf ^ 1][warp], lane);
    __syncwarp();
    buf ^= 1;
  }
  if (lane == 0) {
    while (closest[cand] == 0) cand = (cand + 1) % n;
    cands[w] = cand;
  }
}

// ---- k-means|| (src/kmeans/gpu/kmeanspp.cu: GpuParallel)

// flags[i] = whether round `round` draws object i (init.hpp: parallel_drawn, the CPU's rule).
static __global__ void parallel_draw_flags(const double* __restrict__ closest, std::int64_t n, std::uint64_t seed,
                                           int round, double ell, double potential, unsigned char* __restrict__ flags) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    flags[i] = parallel_drawn(seed, round, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(i), closest[i],
                              ell, potential)
                   ? 1
                   : 0;
}

// xnorm[i] = |x_i|^2 in double (for the GEMM's error bound and the largest |x| only: any order
// will do). Blocks of kPlusPlusRows objects, staged as plusplus_distances' (a thread walking its
// own row reads 32 rows a warp load: 2x slower at 1M x 128).
template <class T>
__global__ void __launch_bounds__(kPlusPlusRows)
    parallel_row_norms(const T* __restrict__ x, std::int64_t n, int d, double* __restrict__ xnorm) {
  __shared__ double tile[kPlusPlusRows][kPlusPlusCols + 1];
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kPlusPlusRows, i = row0 + threadIdx.x;
  double s = 0;
  plusplus_walk_rows(x, n, d, row0, tile, [&](int, double v) { s = fma(v, v, s); });
  if (i < n) xnorm[i] = s;
}

// The bound on how far a GEMM score s_j = |c_j|^2 - 2 fl(x . c_j) may stray from the exact
// S_j = |c_j|^2 - 2 x . c_j: the dot product of d terms in a precision of unit roundoff u_gemm,
// in any order, with or without FMA, errs by at most gamma_d sum |x_k c_jk| <= gamma_d |x| |c_j|
// (Cauchy-Schwarz); |c_j|^2 in double by gamma_d |c_j|^2; the subtraction by u |s_j|; products
// flushed or underflowing by at most `tiny` each. So, with |c_j| <= cmax,
//   E = (d + 3) u_gemm (cmax^2 + 2 |x| cmax) + 4 (d + 2) tiny.
// The exact distances dd_j (the CPU's direct formula in double: d + 1 roundings of non-negative
// terms) stay within rho = (d + 3) 2^-53 of D_j = |x|^2 + S_j, relatively. If j* has the least dd
// and jm the least s: D_j* <= D_jm (1 + rho) / (1 - rho), so
//   s_j* <= S_j* + E <= S_jm + E + 2.01 rho D_jm <= s_min + 2E + 2.01 rho (s_min + E + |x|^2),
// and every j within that window of s_min is re-checked with the direct formula: the least dd
// (the first j on ties) is the CPU's, bit for bit. The window is widened by half again for the
// rounding of its own arithmetic.
__device__ __forceinline__ double parallel_window(double smin, double xnorm, double cmax, int d, double u_gemm,
                                                  double tiny) {
  const double e = (d + 3) * u_gemm * (cmax * cmax + 2 * sqrt(xnorm) * cmax) + 4.0 * (d + 2) * tiny;
  const double rho = (d + 3) * 0x1.0p-53;
  const double reach = smin + e + xnorm * (1 + rho);
  return 1.5 * (2 * e + 2.01 * rho * (reach > 0 ? reach : 0) + (d + 3) * 0x1.0p-1021);
}

// One warp per object of the tile: from the GEMM's row g[r][0..mb) of x_i . c_j (candidates
// j0 .. j0 + mb of the list, double rows cd, squared norms cnorm, the largest norm cmax), the
// least score; then every candidate in the window (parallel_window) is re-checked with the
// CPU's direct formula, each by its own lane; the least distance (the first candidate on ties)
// replaces closest[i] and nearest[i] only when strictly less (an earlier candidate keeps a tie).
// rechecked counts the objects with more than one candidate in the window.
constexpr int kParallelWarps = 8;
template <class T>
__global__ void __launch_bounds__(kParallelWarps * 32)
    parallel_nearest(const T* __restrict__ x, std::int64_t i0, std::int64_t rows, int d, const T* __restrict__ g,
                     int mb, int j0, const double* __restrict__ cd, const double* __restrict__ cnorm, double cmax,
                     double u_gemm, double tiny, const double* __restrict__ xnorm, double* __restrict__ closest,
                     std::int32_t* __restrict__ nearest, unsigned long long* __restrict__ rechecked) {
  const int lane = threadIdx.x % 32;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kParallelWarps + threadIdx.x / 32;
  if (r >= rows) return;  // whole warps leave together
  const std::int64_t i = i0 + r;
  const T* gi = g + r * mb;
  double mine = INFINITY;
  for (int j = lane; j < mb; j += 32) mine = fmin(mine, cnorm[j] - 2.0 * static_cast<double>(gi[j]));
  double smin = mine;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) smin = fmin(smin, __shfl_xor_sync(0xffffffffu, smin, o));
  const double limit = smin + parallel_window(smin, xnorm[i], cmax, d, u_gemm, tiny);
  const T* xi = x + i * d;
  double best = INFINITY;
  int bj = mb, inside = 0;
  // Only a lane whose own least score is in the window has candidates there: the others skip
  // the second read of their scores (usually all lanes but one).
  for (int j = mine <= limit ? lane : mb; j < mb; j += 32) {
    if (!(cnorm[j] - 2.0 * static_cast<double>(gi[j]) <= limit)) continue;
    ++inside;
    const double* c = cd + static_cast<std::int64_t>(j) * d;
    double a = 0;
    for (int k = 0; k < d; ++k) {
      const double e = __dsub_rn(static_cast<double>(xi[k]), c[k]);
      a = __dadd_rn(a, __dmul_rn(e, e));
    }
    if (a < best) {  // j rises within a lane: the first keeps a tie
      best = a;
      bj = j;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    const double ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oj = __shfl_xor_sync(0xffffffffu, bj, o);
    inside += __shfl_xor_sync(0xffffffffu, inside, o);
    if (ob < best || (ob == best && oj < bj)) {
      best = ob;
      bj = oj;
    }
  }
  if (lane == 0) {
    if (best < closest[i]) {
      closest[i] = best;
      nearest[i] = j0 + bj;
    }
    if (inside > 1) atomicAdd(rechecked, 1ull);
  }
}

// After the round's nearest candidates (labels, from tensor_nearest.cu: the first of the least
// CPU distances among the round's rows): the CPU's distance to it, in its order and rounding,
// replaces closest[i] and nearest[i] only when strictly less (an earlier candidate keeps a tie).
// A thread per object, each sum a chain in coordinate order; blocks of kPlusPlusRows objects
// stage the differences x_ip - c_jp (j = labels[i]) through shared memory, kPlusPlusCols
// coordinates at a time, both rows read coalesced (a thread walking its own rows read 32 rows a
// warp load, which the L1 evicted before their next coordinates: 1.56 ms a round at 1M x 128
// in double, 4x the data's read).
template <class T>
__global__ void __launch_bounds__(kPlusPlusRows)
    parallel_take(const T* __restrict__ x, std::int64_t n, int d, const std::int32_t* __restrict__ labels,
                  const T* __restrict__ rows, int first, double* __restrict__ closest,
                  std::int32_t* __restrict__ nearest) {
  __shared__ double tile[kPlusPlusRows][kPlusPlusCols + 1];
  __shared__ int label[kPlusPlusRows];
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kPlusPlusRows, i = row0 + threadIdx.x;
  // -1: no row of the round beats closest (TensorNearest's ceiling); such an object's row is
  // not read, and a block of them returns at once.
  const int own = i < n ? labels[i] : -1;
  label[threadIdx.x] = own;
  if (!__syncthreads_or(own >= 0)) return;
  const int c = threadIdx.x % kPlusPlusCols, r0 = threadIdx.x / kPlusPlusCols;
  constexpr int per = kPlusPlusCols, row_step = kPlusPlusRows / kPlusPlusCols;
  double a = 0;
  for (int p0 = 0; p0 < d; p0 += kPlusPlusCols) {
    __syncthreads();  // the labels are in; the previous tile is used up
    T xv[per], cv[per];  // every load in flight before the first conversion or store
    const T* at = x + (row0 + r0) * d + p0 + c;
    const std::int64_t step = static_cast<std::int64_t>(row_step) * d;
#pragma unroll
    for (int q = 0; q < per; ++q, at += step) {
      const int r = r0 + q * row_step;
      const bool in = row0 + r < n && p0 + c < d && label[r] >= 0;
      xv[q] = in ? *at : T(0);
      cv[q] = in ? rows[static_cast<std::int64_t>(label[r]) * d + p0 + c] : T(0);
    }
#pragma unroll
    for (int q = 0; q < per; ++q)
      tile[r0 + q * row_step][c] = __dsub_rn(static_cast<double>(xv[q]), static_cast<double>(cv[q]));
    __syncthreads();
    const int cols = d - p0 < kPlusPlusCols ? d - p0 : kPlusPlusCols;
    for (int q = 0; q < cols; ++q) a = __dadd_rn(a, __dmul_rn(tile[threadIdx.x][q], tile[threadIdx.x][q]));
  }
  if (own >= 0 && a < closest[i]) {
    closest[i] = a;
    nearest[i] = first + own;
  }
}

// ---- k-means||'s reduction (init.cpp: reduce_weighted through the distance table), on the GPU

// out[t] = row objects[t] of x ([n][d]), as U: a block a row.
template <class T, class U>
__global__ void gather_rows(const T* __restrict__ x, const std::int64_t* __restrict__ objects, int d,
                            U* __restrict__ out) {
  const T* row = x + objects[blockIdx.x] * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    out[static_cast<std::int64_t>(blockIdx.x) * d + j] = static_cast<U>(row[j]);
}

// table[a][b] = the CPU's distance between pool rows a and b ([m][d], double: the candidates'
// values, exact): the direct sum in coordinate order, each step rounded, as squared_distance_double
// (symmetric: x - y is -(y - x) exactly, so the CPU's mirrored triangle is this whole square).
// A block takes 32 x 32 pairs through shared tiles of 32 coordinates; each thread 4 of them.
constexpr int kTableTile = 32, kTableRowsPerThread = 4;
static __global__ void __launch_bounds__(kTableTile * kTableTile / kTableRowsPerThread)
    parallel_table(const double* __restrict__ pool, int m, int d, double* __restrict__ table) {
  __shared__ double as[kTableTile][kTableTile + 1], bs[kTableTile][kTableTile + 1];
  constexpr int kRows = kTableTile / kTableRowsPerThread;
  const int tx = threadIdx.x % kTableTile, ty = threadIdx.x / kTableTile;
  const int a0 = blockIdx.y * kTableTile, b0 = blockIdx.x * kTableTile;
  double s[kTableRowsPerThread] = {};
  for (int p0 = 0; p0 < d; p0 += kTableTile) {
    for (int r = ty; r < kTableTile; r += kRows) {  // row r of each tile, coordinate p0 + tx
      const int p = p0 + tx;
      as[r][tx] = a0 + r < m && p < d ? pool[static_cast<std::int64_t>(a0 + r) * d + p] : 0.0;
      bs[r][tx] = b0 + r < m && p < d ? pool[static_cast<std::int64_t>(b0 + r) * d + p] : 0.0;
    }
    __syncthreads();
    const int span = d - p0 < kTableTile ? d - p0 : kTableTile;
    for (int p = 0; p < span; ++p)
#pragma unroll
      for (int q = 0; q < kTableRowsPerThread; ++q) {
        const double e = __dsub_rn(as[ty + q * kRows][p], bs[tx][p]);
        s[q] = __dadd_rn(s[q], __dmul_rn(e, e));
      }
    __syncthreads();
  }
#pragma unroll
  for (int q = 0; q < kTableRowsPerThread; ++q) {
    const int a = a0 + ty + q * kRows, b = b0 + tx;
    if (a < m && b < m) table[static_cast<std::int64_t>(a) * m + b] = s[q];
  }
}

// The greedy k-means++ steps over the m weighted candidates (init.cpp: pick_kmeanspp with
// TablePlusPlus), each value the CPU's bits:
//   - the draws: the counter-based uniform of (seed, stream, counter), counters 0 (the first
//     centre) and then `trials` a step; the chunk walk on the chunk sums and walk_chunk's on
//     closest, with the CPU's subtractions in order;
//   - each trial's chunk sums of min(closest_i, w_i table[cand][i]) in candidate order, and its
//     potential as their sum in chunk order; the least potential wins (the first on ties);
//   - the chosen centre's mins become closest, its chunk sums the chunk sums and its potential
//     the potential (the CPU recomputes them: the same operations in the same order).
// Spread over a grid of co-resident blocks (a cooperative launch), one grid barrier a step:
// block b owns chunks [b * per, (b + 1) * per) -- their closest and w in shared memory -- and
// writes its chunks' trial sums to tsums[parity][chunk][trial] and every trial's mins to
// mins_out[parity][trial][candidate]; after the barrier every block reads the sums and makes the
// same choice (the same operations on the same values), so each knows the chunk sums, the
// potential and the pick without a second barrier, and the chosen trial's row of mins is the
// new closest, which the next step's walks read in whatever chunk they land. (One block of 1024
// threads doing every step alone spent 13.8 us a step at 2,591 candidates: chains of 64
// dependent table loads.)
// picks[c] = the candidate chosen c-th (block 0 writes them).
constexpr int kReduceThreads = 256, kReduceMaxTrials = 64, kReduceChunkMax = 64;
constexpr int kReducePad = kReduceChunkMax + 1;  // the mins' rows: a trial's chain reads its own bank
constexpr int kReducePhases = 13;                 // the steps' phases that KMEANS_PARALLEL_VERBOSE times
// Dynamic shared memory, in doubles, for `per` chunks a block and `chunks` in all.
__host__ __device__ inline std::size_t reduce_shared_doubles(std::size_t per, std::size_t chunks, std::size_t trials) {
  return 2 * per * kReduceChunkMax          // closest and w of the block's chunks
         + trials * per * kReducePad        // mins[trial][chunk of the block][i]
         + chunks * trials + chunks         // every chunk's trial sums; the chunk sums
         + trials * 2 * kReduceChunkMax     // a walk's chunk of closest and its remainders, per trial
         + trials * chunks;                 // a walk's remainders over the chunks, per trial
}

// The sum 0 + v[0] + v[stride] + ... (n values) in that order, v in shared memory: 16 values
// loaded ahead of each stretch of the chain of adds, whole stretches without a test a value.
__device__ __forceinline__ double chain_sum(const double* v, int n, int stride = 1) {
  double s = 0;
  int q0 = 0;
  for (; q0 + 16 <= n; q0 += 16) {
    double a[16];
#pragma unroll
    for (int q = 0; q < 16; ++q) a[q] = v[(q0 + q) * stride];
#pragma unroll
    for (int q = 0; q < 16; ++q) s = __dadd_rn(s, a[q]);
  }
  if (q0 < n) {  // the last stretch, loaded ahead too
    double a[16];
#pragma unroll
    for (int q = 0; q < 16; ++q) a[q] = q0 + q < n ? v[(q0 + q) * stride] : 0.0;
#pragma unroll
    for (int q = 0; q < 16; ++q)
      if (q0 + q < n) s = __dadd_rn(s, a[q]);
  }
  return s;
}

// A walk's remainders: before[q] = r less v[0], ..., v[q - 1], each subtraction rounded in turn
// (the host's chain, with no compare in it); returns r less all n.
__device__ __forceinline__ double chain_remainders(double r, const double* v, int n, double* before) {
  int q0 = 0;
  for (; q0 + 16 <= n; q0 += 16) {
    double a[16];
#pragma unroll
    for (int q = 0; q < 16; ++q) a[q] = v[q0 + q];
#pragma unroll
    for (int q = 0; q < 16; ++q) {
      before[q0 + q] = r;
      r = __dsub_rn(r, a[q]);
    }
  }
  if (q0 < n) {
    double a[16];
#pragma unroll
    for (int q = 0; q < 16; ++q) a[q] = q0 + q < n ? v[q0 + q] : 0.0;
#pragma unroll
    for (int q = 0; q < 16; ++q)
      if (q0 + q < n) {
        before[q0 + q] = r;
        r = __dsub_rn(r, a[q]);
      }
  }
  return r;
}

// A walk, across the warp (every lane calls it): lane 0 runs the remainders' chain from r over v
// 16 values at a time (chain_remainders into before), and after each stretch the warp looks for
// the first q where stop(q) holds; the chain goes no further than that stretch. Returns that q,
// else n (before then holds every remainder).
template <class Stop>
__device__ __forceinline__ int walk_first(double r, const double* v, int n, double* before, int lane, Stop stop) {
  for (int q0 = 0; q0 < n; q0 += 16) {
    const int len = n - q0 < 16 ? n - q0 : 16;
    if (lane == 0) r = chain_remainders(r, v + q0, len, before + q0);
    __syncwarp();
    const unsigned hits = __ballot_sync(0xffffffffu, lane < len && stop(q0 + lane));
    if (hits) return q0 + __ffs(hits) - 1;
  }
  return n;
}

static __global__ void __launch_bounds__(kReduceThreads)
    parallel_reduce(const double* __restrict__ table, int m, const double* __restrict__ weights, int k, int trials,
                    int per, std::uint64_t seed, std::uint64_t stream, double* __restrict__ mins_out,
                    double* __restrict__ tsums, std::int32_t* __restrict__ picks, unsigned* __restrict__ arrived,
                    unsigned long long* __restrict__ phases) {
  constexpr int chunk = kReduceChunkMax;
  extern __shared__ double reduce_shared[];
  const int chunks = (m + chunk - 1) / chunk;
  const int own0 = blockIdx.x * per, own_end = min(chunks, own0 + per);
  const int lo = own0 * chunk, hi = min(m, own_end * chunk);  // the block's candidates
  double* closest = reduce_shared;                  // [per * chunk], the block's candidates from lo
  double* w = closest + per * chunk;                // [per * chunk]
  double* mins = w + per * chunk;                   // [trials][per * kReducePad]
  double* tsum = mins + trials * per * kReducePad;  // [chunks][trials]
  double* csum = tsum + chunks * trials;            // [chunks]
  double* walked = csum + chunks;                   // [trials][2 * chunk]: closest, then the remainders
  double* rests = walked + trials * 2 * chunk;      // [trials][chunks]
  __shared__ int cands[kReduceMaxTrials];
  __shared__ double pots[kReduceMaxTrials], uniform[kReduceMaxTrials];
  __shared__ double potential;
  __shared__ int best_t;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  // The grid's barrier (as CUTLASS's): every block adds one to `arrived` (zero at the launch),
  // releasing its writes (ordered before by the block's barrier), and waits, acquiring, for the
  // count of this barrier.
  unsigned barriers = 0;
  auto grid_sync = [&] {
    __syncthreads();
    ++barriers;
    if (tid == 0) {
      ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_device> count(*arrived);
      count.fetch_add(1, ::cuda::memory_order_release);
      const unsigned target = barriers * gridDim.x;
      while (count.load(::cuda::memory_order_acquire) < target) {
      }
    }
    __syncthreads();
  };
  // KMEANS_PARALLEL_VERBOSE: block 0's thread 0's clock at each phase's end, summed over the
  // steps in registers, written at the end.
  const bool timed = phases && blockIdx.x == 0 && tid == 0;
  long long tick = clock64();
  unsigned long long spent[kReducePhases] = {};
  auto phase = [&](int p) {
    if (timed) {
      const long long now = clock64();
      spent[p] += static_cast<unsigned long long>(now - tick);
      tick = now;
    }
  };
  auto below = [&](std::uint64_t counter) {  // Uniform::below(m)
    const double u = unit_double(hash64(seed, stream, counter));
    const auto v = static_cast<std::uint64_t>(__dmul_rn(u, static_cast<double>(m)));
    return static_cast<int>(v < static_cast<std::uint64_t>(m - 1) ? v : m - 1);
  };
  auto draw_uniforms = [&](int c) {  // step c's, ahead of it (the hash is a chain of 64-bit products)
    if (tid < trials && c < k)
      uniform[tid] = unit_double(hash64(seed, stream, 1 + static_cast<std::uint64_t>(c - 1) * trials + tid));
  };
  // The first centre: closest = w table[first], in the first row of parity 0's mins (the first
  // step's walks read it as the row of the step before's best).
  const int first = below(0);
  if (blockIdx.x == 0 && tid == 0) picks[0] = first;
  const double* row = table + static_cast<std::int64_t>(first) * m;
  for (int i = lo + tid; i < hi; i += blockDim.x) {
    w[i - lo] = weights[i];
    closest[i - lo] = __dmul_rn(weights[i], row[i]);
    mins_out[i] = closest[i - lo];
  }
  draw_uniforms(1);
  __syncthreads();
  for (int ch = own0 + tid; ch < own_end; ch += blockDim.x)
    tsums[ch] = chain_sum(closest + (ch - own0) * chunk, min(m, (ch + 1) * chunk) - ch * chunk);
  grid_sync();
  for (int ch = tid; ch < chunks; ch += blockDim.x) csum[ch] = tsums[ch];
  __syncthreads();
  if (tid == 0) {
    double p = 0;
    for (int ch = 0; ch < chunks; ++ch) p = __dadd_rn(p, csum[ch]);
    potential = p;
    best_t = 0;
  }
  __syncthreads();
  for (int c = 1; c < k; ++c) {
    // closest before this step, anywhere: the step before's chosen row of mins.
    const double* prior = mins_out + (static_cast<std::int64_t>((c - 1) % 2) * trials + best_t) * m;
    // The draws: warp t walks trial t, as the host: the chunk where the remainder first falls
    // below the chunk's sum (else the last), then the candidate where it first falls below its
    // closest (else the chunk's last), then on past candidates at a centre. Lane 0 runs each
    // chain of subtractions alone, keeping every remainder; the lanes then find the first stop.
    for (int t = warp; t < trials; t += warps) {
      if (potential <= 0) {  // every candidate sits on a chosen centre: duplicates are unavoidable
        if (lane == 0) cands[t] = below(1 + static_cast<std::uint64_t>(c - 1) * trials + t);
        continue;
      }
      double* rest = rests + t * chunks;
      const int ch = walk_first(__dmul_rn(uniform[t], potential), csum, chunks - 1, rest, lane,
                                [&](int j) { return !(rest[j] >= csum[j]); });
      phase(0);
      phase(1);
      const int begin = ch * chunk, end = min(m, begin + chunk);
      double* v = walked + t * 2 * chunk;
      double* before = v + chunk;
      for (int i = begin + lane; i < end; i += 32) v[i - begin] = prior[i];
      __syncwarp();
      phase(2);
      // r after the chunks before ch (the chain reached ch - 1): rest[ch - 1] less csum[ch - 1]
      double r = __dmul_rn(uniform[t], potential);
      if (ch > 0) r = __dsub_rn(rest[ch - 1], csum[ch - 1]);
      const int q = walk_first(r, v, end - begin, before, lane, [&](int j) { return before[j] < v[j]; });
      phase(3);
      if (lane == 0) {
        int cand = q < end - begin ? begin + q : end - 1;
        if (v[cand - begin] == 0)
          do cand = (cand + 1) % m;
          while (prior[cand] == 0);
        cands[t] = cand;
      }
      __syncwarp();
      phase(4);
    }
    __syncthreads();
    phase(5);
    // The block's chunks: every trial's mins, then each (trial, chunk)'s sum in candidate order.
    const int span = hi - lo;
    for (int item = tid; item < trials * span; item += blockDim.x) {
      const int t = item / span, i = lo + item % span;
      const double v = __dmul_rn(w[i - lo], table[static_cast<std::int64_t>(cands[t]) * m + i]), now = closest[i - lo];
      const int at = (i - lo) / chunk * kReducePad + (i - lo) % chunk;
      mins[t * per * kReducePad + at] = v < now ? v : now;
      mins_out[(static_cast<std::int64_t>(c % 2) * trials + t) * m + i] = v < now ? v : now;
    }
    __syncthreads();
    phase(6);
    double* out = tsums + static_cast<std::int64_t>(c % 2) * chunks * trials;
    for (int item = tid; item < trials * (own_end - own0); item += blockDim.x) {
      const int t = item % trials, ch = own0 + item / trials;
      out[ch * trials + t] =
          chain_sum(mins + t * per * kReducePad + (ch - own0) * kReducePad, min(m, (ch + 1) * chunk) - ch * chunk);
    }
    draw_uniforms(c + 1);  // read after the barrier
    phase(7);
    grid_sync();
    phase(8);
    // Every block: all the trials' sums, the potentials in chunk order, the least (the first on ties).
    for (int f = tid; f < chunks * trials; f += blockDim.x) tsum[f] = out[f];
    __syncthreads();
    phase(9);
    if (tid < trials) pots[tid] = chain_sum(tsum + tid, chunks, trials);
    __syncthreads();
    phase(10);
    if (tid == 0) {
      int bt = 0;
      double bp = INFINITY;
      for (int t = 0; t < trials; ++t)
        if (pots[t] < bp) {
          bp = pots[t];
          bt = t;
        }
      best_t = bt;
      potential = pots[bt];
      if (blockIdx.x == 0) picks[c] = cands[bt];
    }
    __syncthreads();
    phase(11);
    const int bt = best_t;
    for (int ch = tid; ch < chunks; ch += blockDim.x) csum[ch] = tsum[ch * trials + bt];
    for (int i = lo + tid; i < hi; i += blockDim.x)
      closest[i - lo] = mins[bt * per * kReducePad + (i - lo) / chunk * kReducePad + (i - lo) % chunk];
    __syncthreads();
    phase(12);
  }
  if (timed)
    for (int p = 0; p < kReducePhases; ++p) phases[p] = spent[p];
}

// counts[t] = the objects whose nearest candidate is t (integers: any order gives the same).
static __global__ void parallel_counts(const std::int32_t* __restrict__ nearest, std::int64_t n,
                                       unsigned long long* __restrict__ counts) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    atomicAdd(counts + nearest[i], 1ull);
}

}  // namespace km::kernels
