// Step 4, offload: the whole loop on the GPU. The assignment (shared-memory centroids, as
// step 3) also adds each object into its cluster's sum and count with global atomics, d+1
// per object (the lab's version); update_centroids (update.cuh) divides and clears. Sums
// are double in both precisions: float atomics over millions of objects would lose the
// digits the update needs.
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/nearest.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_accumulate_global(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n,
                                         int d, int k, std::int32_t* __restrict__ labels,
                                         unsigned long long* changed, double* __restrict__ sums,
                                         unsigned long long* __restrict__ counts) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  stage_centroids(centroids, s, k * d);
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    const int best = nearest_shared(x, n, i, s, d, k);
    moved = relabel(labels, i, best);
    for (int j = 0; j < d; ++j)
      atomicAdd(&sums[static_cast<std::int64_t>(best) * d + j], static_cast<double>(x[j * n + i]));
    atomicAdd(&counts[best], 1ull);
  }
  count_changed(changed, moved);
}

}  // namespace km::kernels
