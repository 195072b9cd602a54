// Step 6, fused, its GEMM path (any K and d): distances by the expansion
// |x|^2 - 2 x.c + |c|^2, the x.c products by cuBLAS over chunks of objects that stay in L2
// (src/kmeans/gpu/fused.cu), then one warp per object finds the nearest centroid (|x|^2 is
// the same for every centroid and is left out) and adds the object into its cluster with
// global 64-bit fixed-point atomics (update.cuh: to_fixed), the same bits in any order.
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

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
// dot products dots[count][k], lowest index on ties; accumulate unless sums is null, and
// then add the exact squared distance to the chosen centroid (rows [k][d]) to *inertia.
template <class T>
__global__ void argmin_accumulate(const T* __restrict__ x, const T* __restrict__ centroids,
                                  const T* __restrict__ dots, const T* __restrict__ norms,
                                  std::int64_t first, std::int64_t count, int d, int k,
                                  std::int32_t* __restrict__ labels, unsigned long long* changed,
                                  unsigned long long* __restrict__ sums, unsigned long long* __restrict__ counts,
                                  double scale, unsigned long long* inertia, double inertia_scale) {
  double part = 0;  // this lane's share of its object's squared distance
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
      for (int j = lane; j < d; j += 32) {
        const T v = x[i * d + j], diff = v - centroids[static_cast<std::int64_t>(best_c) * d + j];
        part += static_cast<double>(diff * diff);
        atomicAdd(&sums[static_cast<std::int64_t>(best_c) * d + j], to_fixed(static_cast<double>(v), scale));
      }
      if (lane == 0) atomicAdd(&counts[best_c], 1ull);
    }
  }
  // One lane per object voted; the others hold false.
  count_changed(changed, moved);
  if (sums) flush_block_sum(inertia, part, inertia_scale);  // sums is the same for the whole grid
}

}  // namespace km::kernels
