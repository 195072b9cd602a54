// fused: the fastest design we have, in two paths.
//
// small (d <= 32 and the block's centroids + accumulators fit in shared memory): one pass
//   over the objects per iteration. Objects are coordinate-major, so each load of a warp
//   is 32 consecutive values; U objects per thread per pass are loaded before any is
//   used (memory-level parallelism: at d = 2 one object's loads left 80% of the cycles
//   waiting on memory); coordinates stay in registers; centroids sit in shared memory and
//   are read as broadcasts. Each block accumulates its objects over a grid-stride loop
//   (one wave of resident blocks) in shared memory and merges once. The block sums are
//   64-bit fixed point (value * 2^scale_exp, the exponent chosen on the host from the
//   largest |x| and the most objects a block can see, so they cannot overflow): shared
//   64-bit integer atomics are native, while shared double atomics are compare-and-swap
//   loops that serialise on a hot cluster and cost 20x the memory floor. With d >= 8 and
//   K <= 32 (OWNER) even the integer atomics collide too often (d of them per object), so
//   lane c of each warp owns cluster c: each object's coordinates are passed round the
//   warp by shuffles and only the owner adds them, in double registers, merging into the
//   block's sums once at the end. The change count is kept per thread and flushed with
//   one atomic per block.
//
// gemm (any K and d): distances by the expansion |x|^2 - 2 x.c + |c|^2, the x.c products by
//   cuBLAS over chunks of objects that stay in L2, then one warp per object finds the
//   nearest centroid (|x|^2 is the same for every centroid and is left out) and adds the
//   object into its cluster with global atomics.
#pragma once

#include "common.cuh"

namespace km::kernels {

template <class T, int MAXD, bool OWNER>
__global__ void fused_small(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n, int d, int k,
                            std::int32_t* __restrict__ labels, unsigned long long* changed, double* __restrict__ sums,
                            unsigned long long* __restrict__ counts, double scale, double inv_scale) {
  extern __shared__ unsigned char smem[];
  unsigned long long* block_sums = reinterpret_cast<unsigned long long*>(smem);  // fixed point, two's complement
  unsigned* block_counts = reinterpret_cast<unsigned*>(block_sums + k * d);
  T* s = reinterpret_cast<T*>(block_counts + ((k + 1) & ~1));
  const bool accumulate = sums != nullptr;
  if (accumulate) {
    for (int t = threadIdx.x; t < k * d; t += blockDim.x) block_sums[t] = 0;
    for (int t = threadIdx.x; t < k; t += blockDim.x) block_counts[t] = 0;
  }
  for (int t = threadIdx.x; t < k * d; t += blockDim.x) s[t] = centroids[t];
  __syncthreads();

  unsigned moves = 0;  // objects of this thread whose label changed
  const int lane = threadIdx.x & 31;
  double acc[OWNER ? MAXD : 1] = {};  // OWNER: the sums of cluster `lane`
  unsigned owned = 0;                 // OWNER: the count of cluster `lane`
  constexpr int U = MAXD <= 2 ? 8 : MAXD <= 8 ? 4 : MAXD <= 16 ? 2 : 1;
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
        int best = 0;
        T best_dist = 0;
        for (int c = 0; c < k; ++c) {
          T dist = 0;
#pragma unroll
          for (int j = 0; j < MAXD; ++j) {
            if (j < d) {
              const T diff = xr[u][j] - s[j * k + c];
              dist += diff * diff;
            }
          }
          if (c == 0 || dist < best_dist) {
            best_dist = dist;
            best = c;
          }
        }
        moves += old[u] != best ? 1u : 0u;
        labels[i] = best;
        label = best;
        if (!OWNER && accumulate) {
#pragma unroll
          for (int j = 0; j < MAXD; ++j)
            if (j < d)
              atomicAdd(&block_sums[best * d + j],
                        static_cast<unsigned long long>(__double2ll_rn(static_cast<double>(xr[u][j]) * scale)));
          atomicAdd(&block_counts[best], 1u);
        }
      }
      if (OWNER && accumulate) {  // the loop bounds are warp-uniform: every lane is here
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
  if (OWNER) {
    if (lane < k && owned) {
      atomicAdd(&block_counts[lane], owned);
#pragma unroll
      for (int j = 0; j < MAXD; ++j)
        if (j < d)
          atomicAdd(&block_sums[lane * d + j], static_cast<unsigned long long>(__double2ll_rn(acc[j] * scale)));
    }
    __syncthreads();
  }
  for (int c = threadIdx.x; c < k; c += blockDim.x)
    if (block_counts[c]) atomicAdd(&counts[c], static_cast<unsigned long long>(block_counts[c]));
  for (int t = threadIdx.x; t < k * d; t += blockDim.x)
    if (block_counts[t / d])
      atomicAdd(&sums[t], static_cast<double>(static_cast<long long>(block_sums[t])) * inv_scale);
}

// |c|^2 for row-major centroids [k][d]: one warp per centroid.
template <class T>
__global__ void centroid_norms(const T* __restrict__ centroids, int k, int d, T* __restrict__ norms) {
  const int warp = static_cast<int>((static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (warp >= k) return;
  T s = 0;
  for (int j = lane; j < d; j += 32) s += centroids[static_cast<std::int64_t>(warp) * d + j] * centroids[static_cast<std::int64_t>(warp) * d + j];
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if (lane == 0) norms[warp] = s;
}

// One warp per object of the chunk [first, first + count): nearest centroid from the
// dot products dots[count][k], lowest index on ties; accumulate unless sums is null.
template <class T>
__global__ void argmin_accumulate(const T* __restrict__ x, const T* __restrict__ dots, const T* __restrict__ norms,
                                  std::int64_t first, std::int64_t count, int d, int k,
                                  std::int32_t* __restrict__ labels, unsigned long long* changed,
                                  double* __restrict__ sums, unsigned long long* __restrict__ counts) {
  const std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  bool moved = false;
  if (w < count) {
    const T* row = dots + w * k;
    T best = 0;
    int best_c = -1;
    for (int c = lane; c < k; c += 32) {
      const T v = norms[c] - 2 * row[c];
      if (best_c < 0 || v < best) {
        best = v;
        best_c = c;
      }
    }
    for (int off = 16; off > 0; off /= 2) {
      const T ov = __shfl_down_sync(0xffffffffu, best, off);
      const int oc = __shfl_down_sync(0xffffffffu, best_c, off);
      if (oc >= 0 && (best_c < 0 || ov < best || (ov == best && oc < best_c))) {
        best = ov;
        best_c = oc;
      }
    }
    best_c = __shfl_sync(0xffffffffu, best_c, 0);
    const std::int64_t i = first + w;
    if (lane == 0) {
      moved = labels[i] != best_c;
      labels[i] = best_c;
    }
    if (sums) {
      for (int j = lane; j < d; j += 32)
        atomicAdd(&sums[static_cast<std::int64_t>(best_c) * d + j], static_cast<double>(x[i * d + j]));
      if (lane == 0) atomicAdd(&counts[best_c], 1ull);
    }
  }
  // One lane per object voted; the others hold false.
  count_changed(changed, moved);
}

}  // namespace km::kernels
