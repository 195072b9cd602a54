// Step 2, transpose: as naive, with objects coordinate-major [d][N] and centroids [d][K], so
// the 32 lanes of a warp read 32 consecutive values of one coordinate: coalesced.
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/nearest.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_transpose(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n, int d,
                                 int k, std::int32_t* __restrict__ labels, unsigned long long* changed) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n)
    moved = relabel(labels, i,
                    nearest_centroid<T>(d, k, [&](int j) { return x[j * n + i]; },
                                        [&](int c, int j) { return centroids[j * k + c]; }));
  count_changed(changed, moved);
}

}  // namespace km::kernels
