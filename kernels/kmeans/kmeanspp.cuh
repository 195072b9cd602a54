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

// closest[i] = 0 (and, where nearest is given, k-means||'s nearest[i] = -1) where object i's row
// is all zeros: under cosine and dot such a row has no direction; a closest of 0 (a chosen
// centre's) keeps it out of every draw, and -1 out of every candidate's weight. One thread an
// object; a row that is not zero stops at its first non-zero coordinate.
template <class T>
__global__ void plusplus_skip_zero_rows(const T* __restrict__ x, std::int64_t n, int d, double* __restrict__ closest,
                                        std::int32_t* __restrict__ nearest) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const T* row = x + i * d;
  for (int j = 0; j < d; ++j)
    if (row[j] != T(0)) return;
  closest[i] = 0.0;
  if (nearest) nearest[i] = -1;
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

// ---- k-means||'s reduction (init_parallel.cpp: reduce_weighted through the distance table), on the GPU

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

// The greedy k-means++ steps over the m weighted candidates (init_parallel.cpp: greedy_tree), each
// value the CPU's bits, every sum in its tree order (one perfect binary tree over the
// candidates padded with zeros: 64-leaf chunk subtrees, a tree of the chunk sums above them):
//   - the draws: the counter-based uniform of (seed, stream, counter), counters 0 (the first
//     centre) and then `trials` a step; each descends the tree of the potential, through the
//     chunk sums' tree to a chunk, then through that chunk's own tree to a candidate;
//   - each trial's chunk sums of min(closest_i, w_i table[cand][i]), and its potential as the
//     root of the tree of its chunk sums; the least potential wins (the first on ties);
//   - the chosen trial's mins become closest, its tree the next step's tree to walk.
// A grid of co-resident blocks (cooperative launch), each owning `per` chunks of 64 candidates:
// every step, in every block, warp t takes trial t from its draw (the draw's chunk of the step
// before's chosen mins read from mins_out, where any block may have written it) through its mins
// over the block's chunks (from the table) to their sums (a warp's shuffle tree each), which go
// to tsums[parity][chunk][trial]; after the one grid barrier of the step every block reads all
// of them, builds each trial's tree of chunk sums (warp t) and makes the same choice, so each
// knows the tree, the potential and the pick without a second barrier. H100, 2,591 candidates,
// K = 1024 (kmeans --init-timings prints each phase's cycles): ~4.5 us a step, of which the grid
// barrier ~1,900 cycles, the table's and the sums' loads ~800 each. The sums in a sequential
// order (chains of up to 64 dependent adds a phase) took 7.3 us a step; this tree order with a
// barrier of the block between draw, mins and sums 5.0 us.
// picks[c] = the candidate chosen c-th (block 0 writes them).
constexpr int kReduceThreads = 256, kReduceMaxTrials = 64, kReduceChunkMax = 64, kReduceMaxTop = 256;
constexpr int kReducePad = kReduceChunkMax + 1;  // the mins' rows, each chunk's a row apart
constexpr int kReducePhases = 7;                  // the steps' phases that --init-timings times
// The leaves of the tree of `chunks` chunk sums (init_parallel.cpp: greedy_tree): the least power of two
// at least chunks and 64 (so that a warp holds at least two a lane).
__host__ __device__ inline int reduce_top(int chunks) {
  int p = kReduceChunkMax;
  while (p < chunks) p *= 2;
  return p;
}
// Dynamic shared memory, in doubles, for `per` chunks a block and `chunks` in all.
__host__ __device__ inline std::size_t reduce_shared_doubles(std::size_t per, std::size_t chunks, std::size_t trials) {
  return per * kReduceChunkMax                                          // w of the block's chunks
         + 2 * trials * per * kReducePad                                // mins[parity][trial][chunk of the block][i]
         + trials * 2 * static_cast<std::size_t>(reduce_top(static_cast<int>(chunks)))  // each trial's tree
         + trials * 2 * kReduceChunkMax;                                // a walk's chunk tree, per trial
}

// The tree of `count` leaves (`stride` apart; zero past count) padded to pow2 = 64, 128 or 256
// leaves, across the warp (init_parallel.cpp: chunk_tree_sum and tree_heap's order): lane l sums its
// pow2 / 32 consecutive leaves pairwise in registers, then the lanes pairwise by shuffles (lane
// pairs, pairs of pairs, ...); the root in lane 0. With `heap` (2 pow2 doubles), every node
// written as a heap: leaves at pow2 + j, node j's children 2j and 2j + 1, the root at 1.
__device__ __forceinline__ double warp_tree(const double* leaves, int count, int stride, int pow2, double* heap,
                                            int lane) {
  const int q = pow2 / 32;  // leaves a lane: 2, 4 or 8
  double a[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int j = lane * q + e;
    a[e] = e < q && j < count ? leaves[j * stride] : 0.0;
    if (heap && e < q) heap[pow2 + j] = a[e];
  }
#pragma unroll
  for (int c = 8; c >= 2; c /= 2)  // c values a lane -> c / 2: the level of 16 c nodes
    if (c <= q) {
#pragma unroll
      for (int e = 0; e < c / 2; ++e) {
        a[e] = __dadd_rn(a[2 * e], a[2 * e + 1]);
        if (heap) heap[16 * c + lane * (c / 2) + e] = a[e];
      }
    }
  double s = a[0];  // node 32 + lane
  int width = 16;
  for (int off = 1; off < 32; off *= 2, width /= 2) {
    s = __dadd_rn(s, __shfl_down_sync(0xffffffffu, s, off));
    if (heap && (lane & (2 * off - 1)) == 0) heap[width + lane / (2 * off)] = s;
  }
  return s;
}

// A draw's descent (init_parallel.cpp: descend): left while r is below the left child's sum, else right
// with r less it; the leaf's index (maybe one of the padding). One thread. (Tried and not kept:
// the warp following every leaf's path at once and keeping the one that holds throughout, as
// slow again in its address arithmetic as the chain of loads it saved: 2,424 against 914 cycles
// a step at 64 leaves.)
__device__ __forceinline__ int descend(const double* heap, int pow2, double& r) {
  int node = 1;
  while (node < pow2) {
    const double left = heap[2 * node];
    if (r < left) {
      node = 2 * node;
    } else {
      r = __dsub_rn(r, left);
      node = 2 * node + 1;
    }
  }
  return node - pow2;
}

// uniforms[(c - 1) * trials + t] = step c's t-th uniform (Uniform's counter 1 + (c - 1) trials + t).
static __global__ void reduce_uniforms(std::uint64_t seed, std::uint64_t stream, int k, int trials,
                                       double* __restrict__ uniforms) {
  const int count = (k - 1) * trials;
  for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < count; q += gridDim.x * blockDim.x)
    uniforms[q] = unit_double(hash64(seed, stream, 1 + static_cast<std::uint64_t>(q)));
}

static __global__ void __launch_bounds__(kReduceThreads)
    parallel_reduce(const double* __restrict__ table, int m, const double* __restrict__ weights, int k, int trials,
                    int per, std::uint64_t seed, std::uint64_t stream, const double* __restrict__ uniforms,
                    double* __restrict__ mins_out,
                    double* __restrict__ tsums, std::int32_t* __restrict__ picks, unsigned* __restrict__ arrived,
                    unsigned long long* __restrict__ phases) {
  constexpr int chunk = kReduceChunkMax;
  extern __shared__ double reduce_shared[];
  const int chunks = (m + chunk - 1) / chunk, top = reduce_top(chunks);
  const int own0 = blockIdx.x * per, own_end = min(chunks, own0 + per);
  const int lo = own0 * chunk, hi = min(m, own_end * chunk);  // the block's candidates
  double* w = reduce_shared;                              // [per * chunk], the block's candidates from lo
  double* mins = w + per * chunk;                         // [step parity][trials][per * kReducePad]
  double* heaps = mins + 2 * trials * per * kReducePad;  // [trials][2 * top]: each trial's tree of chunk sums
  double* walked = heaps + trials * 2 * top;        // [trials][2 * chunk]: a walk's chunk tree
  __shared__ int cands[2][kReduceMaxTrials];  // by step parity: block 0's thread 0 reads a step's after the next began
  // uniform by step parity: a warp done with its trial stores the next step's while others still read this one's
  __shared__ double pots[kReduceMaxTrials], uniform[2][kReduceMaxTrials];
  __shared__ double first_potential;
  // The potential and the chosen trial, the same in every thread (each works them out).
  double potential = 0;
  int best_t = 0;
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
  // --init-timings (parallel_verbose): block 0's thread 0's clock at each phase's end, summed
  // over the steps in registers, written at the end.
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
  // Step c's uniforms, drawn before the launch (reduce_uniforms: the hash is a chain of 64-bit
  // products), loaded a step ahead.
  auto uniforms_of = [&](int c) { return tid < trials && c < k ? uniforms[(c - 1) * trials + tid] : 0.0; };
  // The first centre: closest = w table[first], in the first row of parity 0's mins (the first
  // step's walks read it as the row of the step before's best), its chunk sums as trial 0's.
  const int first = below(0);
  if (blockIdx.x == 0 && tid == 0) picks[0] = first;
  const double* row = table + static_cast<std::int64_t>(first) * m;
  for (int i = lo + tid; i < hi; i += blockDim.x) {
    w[i - lo] = weights[i];
    const double v = __dmul_rn(weights[i], row[i]);
    mins[(i - lo) / chunk * kReducePad + (i - lo) % chunk] = v;
    mins_out[i] = v;
  }
  if (tid < trials) uniform[1][tid] = uniforms_of(1);
  __syncthreads();
  for (int ch = own0 + warp; ch < own_end; ch += warps) {  // trial 0's chunk sums (the first centre's)
    const double sum =
        warp_tree(mins + (ch - own0) * kReducePad, min(m, (ch + 1) * chunk) - ch * chunk, 1, chunk, nullptr, lane);
    if (lane == 0) tsums[ch * trials] = sum;
  }
  grid_sync();
  if (warp == 0) {
    const double root = warp_tree(tsums, chunks, trials, top, heaps, lane);
    if (lane == 0) first_potential = root;
  }
  __syncthreads();
  potential = first_potential;
  for (int c = 1; c < k; ++c) {
    // closest before this step, anywhere: the step before's chosen row of mins; the block's own
    // part of it in shared memory; its tree of chunk sums: the chosen trial's heap.
    const double* prior = mins_out + (static_cast<std::int64_t>((c - 1) % 2) * trials + best_t) * m;
    const double* closest = mins + ((c - 1) % 2 * trials + best_t) * per * kReducePad;
    double* now = mins + (c % 2) * trials * per * kReducePad;  // this step's rows
    const double* tree = heaps + best_t * 2 * top;
    const double next_uniform = uniforms_of(c + 1);  // (its load in flight through the step)
    // Warp t takes trial t through the step: the draw (lane 0 descends the tree of chunk sums,
    // the warp loads that chunk of prior and builds its tree, lane 0 descends it to a candidate,
    // then on past candidates at a centre), the trial's mins over the block's candidates (the
    // table's loads issued together), and its sums over the block's chunks. (With a block
    // barrier between the three, each waited for the slowest warp: ~900 cycles a step more.)
    for (int t = warp; t < trials; t += warps) {
      int cand = 0;
      if (potential <= 0) {  // every candidate sits on a chosen centre: duplicates are unavoidable
        cand = below(1 + static_cast<std::uint64_t>(c - 1) * trials + t);
      } else {
        double r = __dmul_rn(uniform[c % 2][t], potential);
        int ch = 0;
        if (lane == 0) {
          ch = descend(tree, top, r);
          ch = ch < chunks - 1 ? ch : chunks - 1;
        }
        ch = __shfl_sync(0xffffffffu, ch, 0);
        phase(0);
        const int begin = ch * chunk, count = min(m, begin + chunk) - begin;
        double* heap = walked + t * 2 * chunk;
        warp_tree(prior + begin, count, 1, chunk, heap, lane);
        __syncwarp();
        phase(1);
        if (lane == 0) {
          int leaf = descend(heap, chunk, r);
          leaf = leaf < count - 1 ? leaf : count - 1;
          cand = begin + leaf;
          if (heap[chunk + leaf] == 0)
            do cand = (cand + 1) % m;
            while (prior[cand] == 0);
        }
        cand = __shfl_sync(0xffffffffu, cand, 0);
        phase(2);
      }
      if (lane == 0) cands[c % 2][t] = cand;
      const double* trow = table + static_cast<std::int64_t>(cand) * m;
      double* mine = now + t * per * kReducePad;
      for (int i0 = lo + lane; i0 < hi; i0 += 4 * 32) {
        double v[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) v[q] = i0 + 32 * q < hi ? trow[i0 + 32 * q] : 0.0;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int i = i0 + 32 * q;
          if (i < hi) {
            const int at = (i - lo) / chunk * kReducePad + (i - lo) % chunk;
            const double x = __dmul_rn(w[i - lo], v[q]), before = closest[at];
            const double least = x < before ? x : before;
            mine[at] = least;
            mins_out[(static_cast<std::int64_t>(c % 2) * trials + t) * m + i] = least;
          }
        }
      }
      __syncwarp();
      double* out = tsums + static_cast<std::int64_t>(c % 2) * chunks * trials;
      for (int ch = own0; ch < own_end; ++ch) {
        const double sum =
            warp_tree(mine + (ch - own0) * kReducePad, min(m, (ch + 1) * chunk) - ch * chunk, 1, chunk, nullptr, lane);
        if (lane == 0) out[ch * trials + t] = sum;
      }
    }
    if (tid < trials) uniform[(c + 1) % 2][tid] = next_uniform;  // read after the barrier
    phase(3);
    grid_sync();
    phase(4);
    // Every block: each trial's tree of all its chunk sums (warp t, read from memory), the least
    // root (the first on ties).
    const double* out = tsums + static_cast<std::int64_t>(c % 2) * chunks * trials;
    for (int t = warp; t < trials; t += warps) {
      const double root = warp_tree(out + t, chunks, trials, top, heaps + t * 2 * top, lane);
      if (lane == 0) pots[t] = root;
    }
    __syncthreads();
    phase(5);
    // Every thread the same choice (eight potentials loaded at a time, then compared).
    double bp = INFINITY;
    best_t = 0;
    for (int t0 = 0; t0 < trials; t0 += 8) {
      double p[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) p[q] = t0 + q < trials ? pots[t0 + q] : INFINITY;
#pragma unroll
      for (int q = 0; q < 8; ++q)
        if (p[q] < bp) {
          bp = p[q];
          best_t = t0 + q;
        }
    }
    potential = pots[best_t];
    if (blockIdx.x == 0 && tid == 0) picks[c] = cands[c % 2][best_t];
    phase(6);
  }
  if (timed)
    for (int p = 0; p < kReducePhases; ++p) phases[p] = spent[p];
}

// counts[t] = the objects whose nearest candidate is t (integers: any order gives the same).
static __global__ void parallel_counts(const std::int32_t* __restrict__ nearest, std::int64_t n,
                                       unsigned long long* __restrict__ counts) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    if (nearest[i] >= 0) atomicAdd(counts + nearest[i], 1ull);  // (-1: a skipped row of length 0)
}

}  // namespace km::kernels
