// transpose: as naive, with objects coordinate-major [d][N] and centroids [d][K], so the
// 32 lanes of a warp read 32 consecutive values of one coordinate: coalesced.
#pragma once

#include "common.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_transpose(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n, int d,
                                 int k, std::int32_t* __restrict__ labels, unsigned long long* changed) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    int best = 0;
    T best_dist = 0;
    for (int c = 0; c < k; ++c) {
      T dist = 0;
      for (int j = 0; j < d; ++j) {
        const T diff = x[j * n + i] - centroids[j * k + c];
        dist += diff * diff;
      }
      if (c == 0 || dist < best_dist) {
        best_dist = dist;
        best = c;
      }
    }
    moved = labels[i] != best;
    labels[i] = best;
  }
  count_changed(changed, moved);
}

}  // namespace km::kernels
