// Step 3, shared: as transpose, with all K*d centroid values staged in shared memory once
// per block (layouts.hpp: centroids_bytes); every thread then reads them as broadcasts
// instead of from global memory. Also the final E-step of offload and offload-block.
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/nearest.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_shared(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n, int d, int k,
                              std::int32_t* __restrict__ labels, unsigned long long* changed) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  stage_centroids(centroids, s, k * d);  // every thread takes part, even past the end
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) moved = relabel(labels, i, nearest_shared(x, n, i, s, d, k));
  count_changed(changed, moved);
}

}  // namespace km::kernels
