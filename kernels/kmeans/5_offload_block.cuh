// Step 5, offload-block: as offload, but a grid of resident blocks walks the objects
// (grid-stride) and each block accumulates in shared memory (layouts.hpp:
// block_sums_layout), merging once: K*d+K global atomics per block instead of d+1 per
// object, and one atomic per block for the change count. Block and global sums are 64-bit
// fixed point (update.cuh: to_fixed): the result is the same bits in any order. With sample
// weights the addends are w x (update.cuh: weighted_fixed), and each object's weight goes to
// the global count directly (the block's counts are 32-bit object counts). (On sm_90
// a shared 64-bit integer atomicAdd is itself a short compare-and-swap loop in the SASS,
// ATOMS.CAST.SPIN.64, as a shared double one is; the integers are for the determinism.)
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/nearest.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

template <class T>
__global__ void assign_accumulate_block(const T* __restrict__ x, const T* __restrict__ centroids, std::int64_t n,
                                        int d, int k, std::int32_t* __restrict__ labels,
                                        unsigned long long* changed, unsigned long long* __restrict__ sums,
                                        unsigned long long* __restrict__ counts, double scale,
                                        unsigned long long* inertia, double inertia_scale,
                                        const T* __restrict__ weights = nullptr, double weight_scale = 1) {
  extern __shared__ unsigned char smem[];
  const BlockSumsLayout<int> layout = block_sums_layout<int>(k, d, sizeof(T));
  unsigned long long* block_sums = reinterpret_cast<unsigned long long*>(smem);
  unsigned* block_counts = reinterpret_cast<unsigned*>(smem + layout.counts_offset);
  T* s = reinterpret_cast<T*>(smem + layout.centroids_offset);
  for (int t = threadIdx.x; t < k * d; t += blockDim.x) block_sums[t] = 0;
  for (int t = threadIdx.x; t < k; t += blockDim.x) block_counts[t] = 0;
  stage_centroids(centroids, s, k * d);  // ends with __syncthreads
  unsigned moves = 0;
  unsigned long long my_inertia = 0;  // fixed point
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    T distance;
    const int best = nearest_shared(x, n, i, s, d, k, &distance);
    const double w = weight_of(weights, i);
    my_inertia += weighted_fixed(w, static_cast<double>(distance), inertia_scale);
    moves += relabel(labels, i, best) ? 1u : 0u;
    for (int j = 0; j < d; ++j)
      atomicAdd(&block_sums[best * d + j], weighted_fixed(w, static_cast<double>(x[j * n + i]), scale));
    atomicAdd(&block_counts[best], 1u);
    if (weights) atomicAdd(&counts[best], to_fixed(w, weight_scale));  // (block_counts: 32 bits)
  }
  flush_block_count(changed, moves);  // ends with __syncthreads
  flush_block_fixed(inertia, my_inertia);
  for (int c = threadIdx.x; c < k; c += blockDim.x)
    if (block_counts[c] && !weights) atomicAdd(&counts[c], static_cast<unsigned long long>(block_counts[c]));
  for (int t = threadIdx.x; t < k * d; t += blockDim.x)
    if (block_counts[t / d]) atomicAdd(&sums[t], block_sums[t]);
}

}  // namespace km::kernels
