// naive: one thread per object, objects [N][d] and centroids [K][d] read from global
// memory. A warp's loads of one coordinate are d elements apart: uncoalesced, the lab's
// baseline.
#pragma once

#include "common.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_naive(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n, int d, int k,
                             std::int32_t* __restrict__ labels, unsigned long long* changed) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    const T* xi = x + i * d;
    const int best = nearest_centroid<T>(d, k, [&](int j) { return xi[j]; },
                                         [&](int c, int j) { return centroids[c * d + j]; });
    moved = labels[i] != best;
    labels[i] = best;
  }
  count_changed(changed, moved);
}

}  // namespace km::kernels
