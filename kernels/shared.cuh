// shared: as transpose, with all K*d centroid values staged in shared memory once per
// block; every thread then reads them as broadcasts instead of from global memory.
#pragma once

#include "common.cuh"

namespace km::kernels {

// Copies centroids [d][k] into shared memory, the whole block cooperating.
template <class T>
__device__ __forceinline__ void stage_centroids(const T* __restrict__ centroids, T* s, int count) {
  for (int t = threadIdx.x; t < count; t += blockDim.x) s[t] = centroids[t];
  __syncthreads();
}

// Nearest centroid of object i (coordinate-major x), centroids [d][k] in shared memory.
template <class T>
__device__ __forceinline__ int nearest_shared(const T* __restrict__ x, std::int64_t n, std::int64_t i, const T* s,
                                              int d, int k) {
  return nearest_centroid<T>(d, k, [&](int j) { return x[j * n + i]; }, [&](int c, int j) { return s[j * k + c]; });
}

template <class T>
__global__ void assign_shared(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n, int d, int k,
                              std::int32_t* __restrict__ labels, unsigned long long* changed) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  stage_centroids(centroids, s, k * d);  // every thread takes part, even past the end
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    const int best = nearest_shared(x, n, i, s, d, k);
    moved = labels[i] != best;
    labels[i] = best;
  }
  count_changed(changed, moved);
}

}  // namespace km::kernels
