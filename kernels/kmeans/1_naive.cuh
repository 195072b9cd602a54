// Step 1, naive: one thread per object, objects [N][d] and centroids [K][d] read from
// global memory. A warp's loads of one coordinate are d elements apart: uncoalesced, the
// lab's baseline. The labels go back to the CPU, which updates the centroids.
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/nearest.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_naive(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n, int d, int k,
                             std::int32_t* __restrict__ labels, unsigned long long* changed) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    const T* xi = x + i * d;
    moved = relabel(labels, i,
                    nearest_centroid<T>(d, k, [&](int j) { return xi[j]; },
                                        [&](int c, int j) { return centroids[c * d + j]; }));
  }
  count_changed(changed, moved);
}

}  // namespace km::kernels
