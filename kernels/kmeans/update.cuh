// update_centroids: the update step on the device, shared by offload, offload-block and fused.
#pragma once

#include <cstdint>

namespace km::kernels {

// One block per cluster. centroid = sum / count, or unchanged when the cluster is empty;
// adds the squared shift to *shift; clears the sums and the count for the next iteration.
// Sums are [k][d]; centroids are [d][k] when coord_major, else [k][d]. Launch with a
// multiple of 32 threads.
template <class T>
__global__ void update_centroids(T* __restrict__ centroids, double* __restrict__ sums,
                                 unsigned long long* __restrict__ counts, int k, int d, bool coord_major,
                                 double* __restrict__ shift) {
  const int c = blockIdx.x;
  const unsigned long long count = counts[c];
  double local = 0;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    double& s = sums[static_cast<std::int64_t>(c) * d + j];
    if (count > 0) {
      const std::int64_t at = coord_major ? static_cast<std::int64_t>(j) * k + c : static_cast<std::int64_t>(c) * d + j;
      const T updated = static_cast<T>(s / static_cast<double>(count));
      const double delta = static_cast<double>(updated) - static_cast<double>(centroids[at]);
      local += delta * delta;
      centroids[at] = updated;
    }
    s = 0;
  }
  for (int off = 16; off > 0; off /= 2) local += __shfl_down_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31) == 0 && local != 0) atomicAdd(shift, local);
  __syncthreads();
  if (threadIdx.x == 0) counts[c] = 0;
}

}  // namespace km::kernels
