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

// The nearest of k centroids (lowest index on ties) by direct squared distances;
// x_at(j) and c_at(c, j) read the object's and the centroids' coordinates in whatever
// layout and memory the kernel keeps them.
template <class T, class XAt, class CAt>
__device__ __forceinline__ int nearest_centroid(int d, int k, XAt x_at, CAt c_at) {
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
  return best;
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
