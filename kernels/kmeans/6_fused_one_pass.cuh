// Step 6, fused: the fastest design we have, in two paths; this file is the one-pass path,
// 6_fused_tensor.cuh the other. The engine (src/kmeans/gpu/fused/) picks by
// layouts.hpp: fused_one_pass.
//
// one pass (small K*d, where it measures faster; d <= 32 and the block's centroids +
//   accumulators fit in shared memory): one pass
//   over the objects per iteration. Objects are coordinate-major, so each load of a warp
//   is 32 consecutive values; U objects per thread per pass are loaded before any is
//   used (memory-level parallelism: at d = 2 one object's loads left 80% of the cycles
//   waiting on memory); coordinates stay in registers; centroids sit in shared memory and
//   are read as broadcasts. Each block accumulates its objects over a grid-stride loop
//   (one wave of resident blocks) in shared memory and merges once. The block and global
//   sums are 64-bit fixed point (update.cuh: to_fixed; the exponent is chosen on the host
//   from the largest |x| and N, so they cannot overflow): integer addition is associative,
//   so the sums are the same bits on every run (on sm_90 a shared 64-bit integer atomicAdd
//   is a short compare-and-swap loop in the SASS, ATOMS.CAST.SPIN.64, like a double one;
//   shared double atomics measured 20x the memory floor on a hot cluster). With d >= 8 and
//   K <= 32 (OWNER) even the integer atomics collide too often (d of them per object), so
//   lane c of each warp owns cluster c: each object's fixed-point coordinates (integers,
//   held in T) are passed round the warp by shuffles and only the owner adds them, in double
//   registers where integer sums stay exact, merging into the block's sums once at the end. The change count is kept per thread and flushed with
//   one atomic per block. Distances use fused multiply-adds (one instruction per
//   coordinate); the runner-up is tracked, and an object whose runner-up is within the
//   two sums' error bound of the nearest is redone in seq's arithmetic, so the labels are
//   seq's.
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/nearest.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

// diff * diff + s as one fused multiply-add, whatever nvcc's -fmad setting.
__device__ __forceinline__ float fused_square_add(float diff, float s) { return __fmaf_rn(diff, diff, s); }
__device__ __forceinline__ double fused_square_add(double diff, double s) { return __fma_rn(diff, diff, s); }
// To the nearest integer, ties to even, in T.
__device__ __forceinline__ float nearest_integer(float v) { return rintf(v); }
__device__ __forceinline__ double nearest_integer(double v) { return rint(v); }

template <class T, int MAXD, bool OWNER>
__global__ void fused_one_pass(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n, int d, int k,
                            std::int32_t* __restrict__ labels, unsigned long long* changed,
                            unsigned long long* __restrict__ sums,
                            unsigned long long* __restrict__ counts, double scale,
                            unsigned long long* inertia, double inertia_scale) {
  extern __shared__ unsigned char smem[];
  const BlockSumsLayout<int> layout = block_sums_layout<int>(k, d, sizeof(T));
  unsigned long long* block_sums = reinterpret_cast<unsigned long long*>(smem);  // fixed point, two's complement
  unsigned* block_counts = reinterpret_cast<unsigned*>(smem + layout.counts_offset);
  T* s = reinterpret_cast<T*>(smem + layout.centroids_offset);
  const bool accumulate = sums != nullptr;
  if (accumulate) {
    for (int t = threadIdx.x; t < k * d; t += blockDim.x) block_sums[t] = 0;
    for (int t = threadIdx.x; t < k; t += blockDim.x) block_counts[t] = 0;
  }
  for (int t = threadIdx.x; t < k * d; t += blockDim.x) s[t] = centroids[t];
  __syncthreads();

  // The near-tie test (see below): 4.1 g with g = (d + 2) u / (1 - (d + 2) u), u = T's unit
  // roundoff, and an absolute term for products that underflow.
  constexpr double unit = sizeof(T) == 8 ? 0x1p-53 : 0x1p-24;
  constexpr double smallest = sizeof(T) == 8 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
  const T near_tie = static_cast<T>(4.1 * (d + 2) * unit / (1 - (d + 2) * unit));
  const T tiny = static_cast<T>(8 * (d + 2) * smallest);
  unsigned moves = 0;  // objects of this thread whose label changed
  unsigned long long my_inertia = 0;  // this thread's objects' squared distances, fixed point
  const int lane = threadIdx.x & 31;
  // OWNER: the sums of cluster `lane`, fixed-point integers held exactly in double (see below),
  // and its count.
  double acc[OWNER ? MAXD : 1] = {};
  unsigned owned = 0;
  const T tscale = static_cast<T>(scale);  // exact: the engine takes OWNER in float only when 2^E fits
  constexpr int U = fused_unroll(MAXD);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x * U;
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * U; base < n; base += step) {
    T xr[U][MAXD];
    int old[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t i = base + u * blockDim.x + threadIdx.x;
      if (i < n) {
#pragma unroll
        for (int j = 0; j < MAXD; ++j) xr[u][j] = j < d ? x[j * n + i] : T(0);
        old[u] = labels[i];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t i = base + u * blockDim.x + threadIdx.x;
      int label = -1;
      if (i < n) {
        // Distances with fused multiply-adds (one instruction per coordinate, not seq's two),
        // the nearest and the runner-up. Both sums lie within g T of the true distance T
        // (g = gamma_{d+2}), so when the runner-up is more than ~4g above the nearest, seq's
        // choice is the same; otherwise (near-ties, exact ties) the object is redone in seq's
        // arithmetic, lowest index first.
        int best = 0;
        T best_dist = 0, second = T(INFINITY);
        for (int c = 0; c < k; ++c) {
          T dist = 0;
#pragma unroll
          for (int j = 0; j < MAXD; ++j) {
            if (j < d) {
              const T diff = xr[u][j] - s[j * k + c];
              dist = fused_square_add(diff, dist);
            }
          }
          if (c == 0 || dist < best_dist) {
            if (c > 0) second = best_dist;
            best_dist = dist;
            best = c;
          } else if (dist < second) {
            second = dist;
          }
        }
        if (!(second - best_dist > near_tie * best_dist + tiny)) {
          best = nearest_in_registers<T, MAXD>(xr[u], s, d, k, best_dist);
        }
        moves += old[u] != best ? 1u : 0u;
        my_inertia += to_fixed(static_cast<double>(best_dist), inertia_scale);
        labels[i] = best;
        label = best;
        if (!OWNER && accumulate) {
#pragma unroll
          for (int j = 0; j < MAXD; ++j)
            if (j < d)
              atomicAdd(&block_sums[best * d + j], to_fixed(static_cast<double>(xr[u][j]), scale));
          atomicAdd(&block_counts[best], 1u);
        }
      }
      if (OWNER && accumulate) {  // the loop bounds are warp-uniform: every lane is here
        // Each lane rounds its own object to fixed-point addends (all lanes busy): x * 2^E to
        // the nearest integer, ties to even, computed in T, which is to_fixed's value exactly
        // (the product is exact, and an integer below 2^24 / 2^53 is a T). The warp passes them
        // round in T (one shuffle per float); the owner adds them in double, where sums of
        // integers are exact while below 2^53, which the engine guarantees: it takes this path
        // only when the objects one warp can see, times the largest addend, stay below 2^53. The
        // sums are integers throughout, so they do not depend on which objects this thread saw
        // (the grid, the split over GPUs). In place (the coordinates are not needed again), and
        // over all MAXD registers: those past d hold 0, so no test of j against d (a branch per
        // coordinate in the shuffle loop cost 40%).
#pragma unroll
        for (int j = 0; j < MAXD; ++j) xr[u][j] = nearest_integer(xr[u][j] * tscale);
        for (int o = 0; o < 32; ++o) {
          const int l = __shfl_sync(0xffffffffu, label, o);
          if (l < 0) continue;  // past the end: the same for the whole warp
#pragma unroll
          for (int j = 0; j < MAXD; ++j) {
            const T v = __shfl_sync(0xffffffffu, xr[u][j], o);
            if (lane == l) acc[j] += static_cast<double>(v);
          }
          if (lane == l) ++owned;
        }
      }
    }
  }
  flush_block_count(changed, moves);  // ends with __syncthreads: the loop's atomics are done
  if (!accumulate) return;
  flush_block_fixed(inertia, my_inertia);
  if (OWNER) {
    if (lane < k && owned) {
      atomicAdd(&block_counts[lane], owned);
#pragma unroll
      for (int j = 0; j < MAXD; ++j)
        if (j < d)
          atomicAdd(&block_sums[lane * d + j], static_cast<unsigned long long>(__double2ll_rn(acc[j])));
    }
    __syncthreads();
  }
  for (int c = threadIdx.x; c < k; c += blockDim.x)
    if (block_counts[c]) atomicAdd(&counts[c], static_cast<unsigned long long>(block_counts[c]));
  for (int t = threadIdx.x; t < k * d; t += blockDim.x)
    if (block_counts[t / d])
      atomicAdd(&sums[t], block_sums[t]);
}

}  // namespace km::kernels
