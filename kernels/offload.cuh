// offload: the whole loop on the GPU. The assignment kernel (shared-memory centroids, as
// `shared`) also adds each object into its cluster's sum and count; update_centroids
// (common.cuh) divides and clears. Two ways to accumulate:
//   global  every object adds its d coordinates and its count with global atomics (the lab);
//   block   a grid of resident blocks walks the objects (grid-stride); each block
//           accumulates in shared memory and merges once, K*d+K global atomics per block
//           instead of (d+1) per object, and counts changes with one atomic per block.
// Sums are double in both precisions: float atomics over millions of objects would lose
// the digits the update needs.
#pragma once

#include "shared.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_accumulate_global(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n,
                                         int d, int k, std::int32_t* __restrict__ labels,
                                         unsigned long long* changed, double* __restrict__ sums,
                                         unsigned long long* __restrict__ counts) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  stage_centroids(centroids, s, k * d);
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    const int best = nearest_shared(x, n, i, s, d, k);
    moved = labels[i] != best;
    labels[i] = best;
    for (int j = 0; j < d; ++j) atomicAdd(&sums[static_cast<std::int64_t>(best) * d + j], static_cast<double>(x[j * n + i]));
    atomicAdd(&counts[best], 1ull);
  }
  count_changed(changed, moved);
}

template <class T>
__global__ void assign_accumulate_block(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n,
                                        int d, int k, std::int32_t* __restrict__ labels,
                                        unsigned long long* changed, double* __restrict__ sums,
                                        unsigned long long* __restrict__ counts) {
  // Shared memory: block sums (double, k*d), block counts (unsigned, k), centroids (T, k*d).
  extern __shared__ unsigned char smem[];
  double* block_sums = reinterpret_cast<double*>(smem);
  unsigned* block_counts = reinterpret_cast<unsigned*>(block_sums + k * d);
  T* s = reinterpret_cast<T*>(block_counts + ((k + 1) & ~1));  // keep T aligned to 8 bytes
  for (int t = threadIdx.x; t < k * d; t += blockDim.x) block_sums[t] = 0;
  for (int t = threadIdx.x; t < k; t += blockDim.x) block_counts[t] = 0;
  stage_centroids(centroids, s, k * d);  // ends with __syncthreads
  unsigned moves = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int best = nearest_shared(x, n, i, s, d, k);
    moves += labels[i] != best ? 1u : 0u;
    labels[i] = best;
    for (int j = 0; j < d; ++j) atomicAdd(&block_sums[best * d + j], static_cast<double>(x[j * n + i]));
    atomicAdd(&block_counts[best], 1u);
  }
  flush_block_count(changed, moves);  // ends with __syncthreads
  for (int c = threadIdx.x; c < k; c += blockDim.x)
    if (block_counts[c]) atomicAdd(&counts[c], static_cast<unsigned long long>(block_counts[c]));
  for (int t = threadIdx.x; t < k * d; t += blockDim.x)
    if (block_counts[t / d]) atomicAdd(&sums[t], block_sums[t]);
}

}  // namespace km::kernels
