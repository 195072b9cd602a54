// Step 4, offload: the whole loop on the GPU. The assignment (shared-memory centroids, as
// step 3) also adds each object into its cluster's sum and count with global atomics, d+1
// per object (the lab's version); update_centroids (update.cuh) divides and clears. The
// sums are 64-bit fixed point (update.cuh: to_fixed) in both precisions: integer atomics
// give the same bits in any order, where double atomics would vary run to run. With sample
// weights each addend is w x and each count's w (update.cuh: weighted_fixed).
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/nearest.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_accumulate_global(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n,
                                         int d, int k, std::int32_t* __restrict__ labels,
                                         unsigned long long* changed, unsigned long long* __restrict__ sums,
                                         unsigned long long* __restrict__ counts, double scale,
                                         unsigned long long* inertia, double inertia_scale,
                                         const T* __restrict__ weights = nullptr, double weight_scale = 1) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  stage_centroids(centroids, s, k * d);
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  T distance = 0;
  double w = 0;
  if (i < n) {
    const int best = nearest_shared(x, n, i, s, d, k, &distance);
    moved = relabel(labels, i, best);
    w = weight_of(weights, i);
    for (int j = 0; j < d; ++j)
      atomicAdd(&sums[static_cast<std::int64_t>(best) * d + j],
                weighted_fixed(w, static_cast<double>(x[j * n + i]), scale));
    atomicAdd(&counts[best], to_fixed(w, weight_scale));
  }
  count_changed(changed, moved);
  flush_block_fixed(inertia, i < n ? weighted_fixed(w, static_cast<double>(distance), inertia_scale) : 0ull);
}

}  // namespace km::kernels
