// The nearest-centroid search of the ladder kernels (naive … offload-block), in seq's
// arithmetic: direct squared distances summed over coordinates in order, the lowest index
// winning ties, so the labels equal seq's.
#pragma once

#include <cstdint>

namespace km::kernels {

// x_at(j) and c_at(c, j) read the object's and the centroids' coordinates in whatever
// layout and memory the kernel keeps them; *distance (if given) gets the winner's.
template <class T, class XAt, class CAt>
__device__ __forceinline__ int nearest_centroid(int d, int k, XAt x_at, CAt c_at, T* distance = nullptr) {
  int best = 0;
  T best_dist = 0;
  for (int c = 0; c < k; ++c) {
    T dist = 0;
    for (int j = 0; j < d; ++j) {
      const T diff = x_at(j) - c_at(c, j);
      dist += diff * diff;
    }
    if (c == 0 || dist < best_dist) {
      best_dist = dist;
      best = c;
    }
  }
  if (distance) *distance = best_dist;
  return best;
}

// Copies `count` centroid values into shared memory, the whole block cooperating; ends
// with a barrier, so every thread of the block must call it.
template <class T>
__device__ __forceinline__ void stage_centroids(const T* __restrict__ centroids, T* s, int count) {
  for (int t = threadIdx.x; t < count; t += blockDim.x) s[t] = centroids[t];
  __syncthreads();
}

// Nearest centroid of object i of coordinate-major x [d][n], centroids [d][k] in shared memory.
template <class T>
__device__ __forceinline__ int nearest_shared(const T* __restrict__ x, std::int64_t n, std::int64_t i, const T* s,
                                              int d, int k, T* distance = nullptr) {
  return nearest_centroid<T>(d, k, [&](int j) { return x[j * n + i]; }, [&](int c, int j) { return s[j * k + c]; },
                             distance);
}

}  // namespace km::kernels
