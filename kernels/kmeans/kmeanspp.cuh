// k-means++ on the GPU (src/kmeans/gpu/kmeanspp.cu): the data-sized steps, in the CPU's
// arithmetic so the centres come out the same bit for bit: every distance in double, summed
// over the coordinates in order with no fused multiply-add (the _rn intrinsics), and every
// sum over a chunk of objects taken by one thread in object order.
#pragma once

#include <cstdint>

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
  double v[per];
  const int c = threadIdx.x % kPlusPlusCols, r0 = threadIdx.x / kPlusPlusCols;
  constexpr int row_step = kPlusPlusRows / kPlusPlusCols;
#pragma unroll
  for (int q = 0; q < per; ++q) {
    const std::int64_t i = row0 + r0 + q * row_step;
    v[q] = i < n && p0 + c < d ? static_cast<double>(x[i * d + p0 + c]) : 0.0;
  }
#pragma unroll
  for (int q = 0; q < per; ++q) tile[r0 + q * row_step][c] = v[q];
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

// xnorm[i] = |x_i|^2 in double (for the GEMM's error bound only: any order will do).
template <class T>
__global__ void parallel_row_norms(const T* __restrict__ x, std::int64_t n, int d, double* __restrict__ xnorm) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    double s = 0;
    for (int j = 0; j < d; ++j) {
      const double v = static_cast<double>(x[i * d + j]);
      s = fma(v, v, s);
    }
    xnorm[i] = s;
  }
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
// A thread per object: the sum is a chain in coordinate order in any case.
template <class T>
__global__ void parallel_take(const T* __restrict__ x, std::int64_t n, int d, const std::int32_t* __restrict__ labels,
                              const T* __restrict__ rows, int first, double* __restrict__ closest,
                              std::int32_t* __restrict__ nearest) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int j = labels[i];
    const T* xi = x + i * d;
    const T* c = rows + static_cast<std::int64_t>(j) * d;
    double a = 0;
    for (int p = 0; p < d; ++p) {
      const double e = __dsub_rn(static_cast<double>(xi[p]), static_cast<double>(c[p]));
      a = __dadd_rn(a, __dmul_rn(e, e));
    }
    if (a < closest[i]) {
      closest[i] = a;
      nearest[i] = first + j;
    }
  }
}

// ---- k-means||'s reduction (init.cpp: reduce_weighted through the distance table), on the GPU

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
// TablePlusPlus), in one block, each value the CPU's bits:
//   - the draws: the counter-based uniform of (seed, stream, counter), counters 0 (the first
//     centre) and then `trials` a step; the chunk walk on the chunk sums and walk_chunk's on
//     closest, with the CPU's subtractions in order;
//   - each trial's chunk sums of min(closest_i, w_i table[cand][i]) in candidate order, and its
//     potential as their sum in chunk order; the least potential wins (the first on ties);
//   - the chosen centre's mins become closest, its chunk sums the chunk sums and its potential
//     the potential (the CPU recomputes them: the same operations in the same order).
// Shared memory (reduce_shared_doubles): closest and w [m], the chunk sums [chunks] and the
// trials' chunk sums [chunks][trials], so that the serial walks and sums wait on shared, not
// global, loads. picks[c] = the candidate chosen c-th.
constexpr int kReduceThreads = 1024, kReduceMaxTrials = 64, kReduceChunkMax = 64;
__host__ __device__ inline std::size_t reduce_shared_doubles(std::size_t m, std::size_t chunk, std::size_t trials) {
  return 2 * m + (m + chunk - 1) / chunk * (trials + 1);
}
static __global__ void __launch_bounds__(kReduceThreads)
    parallel_reduce(const double* __restrict__ table, int m, const double* __restrict__ weights, int k, int trials,
                    int chunk, std::uint64_t seed, std::uint64_t stream, std::int32_t* __restrict__ picks) {
  extern __shared__ double reduce_shared[];
  const int chunks = (m + chunk - 1) / chunk;
  double* closest = reduce_shared;     // [m]
  double* w = closest + m;             // [m]
  double* csum = w + m;                // [chunks]
  double* tsum = csum + chunks;        // [chunks][trials]
  __shared__ int cands[kReduceMaxTrials];
  __shared__ double pots[kReduceMaxTrials];
  __shared__ double potential;
  __shared__ int best_t, first_pick;  // shared, not read back from picks: the block sees them after the barrier
  const int tid = threadIdx.x;
  auto below = [&](std::uint64_t counter) {  // Uniform::below(m)
    const double u = unit_double(hash64(seed, stream, counter));
    const auto v = static_cast<std::uint64_t>(__dmul_rn(u, static_cast<double>(m)));
    return static_cast<int>(v < static_cast<std::uint64_t>(m - 1) ? v : m - 1);
  };
  if (tid == 0) picks[0] = first_pick = below(0);
  __syncthreads();
  const double* first = table + static_cast<std::int64_t>(first_pick) * m;
  for (int i = tid; i < m; i += blockDim.x) {
    w[i] = weights[i];
    closest[i] = __dmul_rn(weights[i], first[i]);
  }
  __syncthreads();
  for (int ch = tid; ch < chunks; ch += blockDim.x) {
    double s = 0;
    for (int i = ch * chunk, end = min(m, i + chunk); i < end; ++i) s = __dadd_rn(s, closest[i]);
    csum[ch] = s;
  }
  __syncthreads();
  if (tid == 0) {
    double p = 0;
    for (int ch = 0; ch < chunks; ++ch) p = __dadd_rn(p, csum[ch]);
    potential = p;
  }
  __syncthreads();
  for (int c = 1; c < k; ++c) {
    if (tid < trials) {
      const std::uint64_t counter = 1 + static_cast<std::uint64_t>(c - 1) * trials + tid;
      int cand;
      if (potential <= 0) {  // every candidate sits on a chosen centre: duplicates are unavoidable
        cand = below(counter);
      } else {
        // The host's walks, their next 8 values loaded ahead of the chain of subtractions.
        double r = __dmul_rn(unit_double(hash64(seed, stream, counter)), potential);
        int ch = 0;
        for (bool more = true; more;) {  // while (ch + 1 < chunks && r >= csum[ch]) r -= csum[ch++]
          double ahead[8];
#pragma unroll
          for (int q = 0; q < 8; ++q) ahead[q] = ch + q < chunks ? csum[ch + q] : 0.0;
#pragma unroll
          for (int q = 0; q < 8; ++q)
            if (more) {
              if (ch + 1 < chunks && r >= ahead[q]) {
                r = __dsub_rn(r, ahead[q]);
                ++ch;
              } else {
                more = false;
              }
            }
        }
        const int begin = ch * chunk, end = min(m, begin + chunk);  // init.cpp: walk_chunk
        cand = end - 1;
        bool found = false;
        for (int i0 = begin; i0 < end && !found; i0 += 8) {
          double ahead[8];
#pragma unroll
          for (int q = 0; q < 8; ++q) ahead[q] = i0 + q < end ? closest[i0 + q] : 0.0;
#pragma unroll
          for (int q = 0; q < 8; ++q)
            if (!found && i0 + q < end) {
              if (r < ahead[q]) {
                cand = i0 + q;
                found = true;
              } else {
                r = __dsub_rn(r, ahead[q]);
              }
            }
        }
        while (closest[cand] == 0) cand = (cand + 1) % m;
      }
      cands[tid] = cand;
    }
    __syncthreads();
    for (int item = tid; item < chunks * trials; item += blockDim.x) {
      const int ch = item / trials, t = item % trials;
      const double* row = table + static_cast<std::int64_t>(cands[t]) * m;
      const int begin = ch * chunk, end = min(m, begin + chunk);
      double s = 0;
      if (end - begin == kReduceChunkMax) {  // a whole chunk: the table's loads issued 16 ahead of the adds
#pragma unroll 16
        for (int i = begin; i < begin + kReduceChunkMax; ++i) {
          const double v = __dmul_rn(w[i], row[i]), now = closest[i];
          s = __dadd_rn(s, v < now ? v : now);
        }
      } else {
        for (int i = begin; i < end; ++i) {
          const double v = __dmul_rn(w[i], row[i]), now = closest[i];
          s = __dadd_rn(s, v < now ? v : now);
        }
      }
      tsum[item] = s;
    }
    __syncthreads();
    if (tid < trials) {
      double p = 0;
#pragma unroll 8
      for (int ch = 0; ch < chunks; ++ch) p = __dadd_rn(p, tsum[ch * trials + tid]);
      pots[tid] = p;
    }
    __syncthreads();
    if (tid == 0) {
      int bt = 0;
      double bp = INFINITY;
      for (int t = 0; t < trials; ++t)
        if (pots[t] < bp) {
          bp = pots[t];
          bt = t;
        }
      best_t = bt;
      picks[c] = cands[bt];
      potential = pots[bt];
    }
    __syncthreads();
    const double* row = table + static_cast<std::int64_t>(cands[best_t]) * m;
    for (int i = tid; i < m; i += blockDim.x) {
      const double v = __dmul_rn(w[i], row[i]), now = closest[i];
      closest[i] = v < now ? v : now;
    }
    for (int ch = tid; ch < chunks; ch += blockDim.x) csum[ch] = tsum[ch * trials + best_t];
    __syncthreads();
  }
}

// counts[t] = the objects whose nearest candidate is t (integers: any order gives the same).
static __global__ void parallel_counts(const std::int32_t* __restrict__ nearest, std::int64_t n,
                                       unsigned long long* __restrict__ counts) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    atomicAdd(counts + nearest[i], 1ull);
}

}  // namespace km::kernels
