// Device helpers shared by the k-means kernels.
#pragma once

#include <cstdint>

namespace km::kernels {

// Adds the number of lanes with `flag` set to *counter: one atomic per warp, not per thread.
// Every lane of the warp must call it (inactive objects pass flag = 0).
__device__ __forceinline__ void count_changed(unsigned long long* counter, bool flag) {
  const unsigned votes = __ballot_sync(0xffffffffu, flag);
  if (counter && (threadIdx.x & 31) == 0 && votes) atomicAdd(counter, static_cast<unsigned long long>(__popc(votes)));
}

// Adds a per-thread count to *counter with one global atomic per block: warp sums by
// shuffles, then the block's warps through one shared slot. Every thread of the block must
// call it, after its last use of the block's other shared memory.
__device__ __forceinline__ void flush_block_count(unsigned long long* counter, unsigned count) {
  __shared__ unsigned long long block_total;
  if (threadIdx.x == 0) block_total = 0;
  __syncthreads();
  for (int off = 16; off > 0; off /= 2) count += __shfl_down_sync(0xffffffffu, count, off);
  if ((threadIdx.x & 31) == 0 && count) atomicAdd(&block_total, static_cast<unsigned long long>(count));
  __syncthreads();
  if (threadIdx.x == 0 && counter && block_total) atomicAdd(counter, block_total);
}

// Objects [N][d] -> [d][N], tiled through shared memory so both sides are coalesced.
template <class T>
__global__ void transpose_to_coord_major(const T* __restrict__ in, T* __restrict__ out, std::int64_t n, int d) {
  __shared__ T tile[32][33];
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * 32;
  const int j0 = blockIdx.y * 32;
  for (int r = threadIdx.y; r < 32; r += blockDim.y) {
    const std::int64_t i = i0 + r;
    const int j = j0 + threadIdx.x;
    if (i < n && j < d) tile[r][threadIdx.x] = in[i * d + j];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < 32; r += blockDim.y) {
    const int j = j0 + r;
    const std::int64_t i = i0 + threadIdx.x;
    if (i < n && j < d) out[static_cast<std::int64_t>(j) * n + i] = tile[threadIdx.x][r];
  }
}

// The update on the device: one block per cluster. centroid = sum / count, or unchanged
// when the cluster is empty; adds the squared shift to *shift; clears the sums and the
// count for the next iteration. Sums are [k][d]; centroids are [d][k] when coord_major,
// else [k][d]. Launch with a multiple of 32 threads.
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
