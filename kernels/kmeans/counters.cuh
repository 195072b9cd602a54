// Counting objects whose cluster changed, with few atomics.
#pragma once

#include "kernels/kmeans/update.cuh"

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
  __syncthreads();  // a previous call's read of block_total is done before it is cleared
  if (threadIdx.x == 0) block_total = 0;
  __syncthreads();
  for (int off = 16; off > 0; off /= 2) count += __shfl_down_sync(0xffffffffu, count, off);
  if ((threadIdx.x & 31) == 0 && count) atomicAdd(&block_total, static_cast<unsigned long long>(count));
  __syncthreads();
  if (threadIdx.x == 0 && counter && block_total) atomicAdd(counter, block_total);
}

// Adds the block's sum of `value` (one per thread, 64-bit fixed point: each thread's sum of
// its objects' to_fixed addends) to *target with one atomic per block. Integers: the total is
// the same bits whichever objects a block, a GPU or a process took (a double sum per block,
// rounded once, would depend on the grid and on how the rows are split). Every thread of the
// block must call it; target may be null.
__device__ __forceinline__ void flush_block_fixed(unsigned long long* target, unsigned long long value) {
  __shared__ unsigned long long warp_sums[32];
  for (int off = 16; off > 0; off /= 2) value += __shfl_down_sync(0xffffffffu, value, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = value;
  __syncthreads();
  if (threadIdx.x == 0 && target) {
    unsigned long long total = 0;
    for (int w = 0; w < static_cast<int>((blockDim.x + 31) / 32); ++w) total += warp_sums[w];
    if (total) atomicAdd(target, total);
  }
}

// Adds v to a 64-bit integer in shared memory with two native 32-bit atomics, the low word's
// carry going to the high word. On sm_90 a 64-bit shared atomicAdd compiles to a
// compare-and-swap loop (ATOMS.CAST.SPIN.64), retried while other lanes hit the same word (1.9
// tries per add at d = 2, K = 16, ncu). The total is exact and the same bits in any order: the
// low word wraps as many times as the low words' sum passes multiples of 2^32, and each wrap
// carries one. A read between the two atomics would see a torn value, so read *target only
// after a barrier that follows every add.
__device__ __forceinline__ void shared_add_u64(unsigned long long* target, unsigned long long v) {
  unsigned* word = reinterpret_cast<unsigned*>(target);  // little-endian: the low word first
  const unsigned low = static_cast<unsigned>(v);
  const unsigned before = atomicAdd(word, low);
  const unsigned carry = before + low < before ? 1u : 0u;
  atomicAdd(word + 1, static_cast<unsigned>(v >> 32) + carry);
}

// Stores object i's new label; true when it differs from the old one.
__device__ __forceinline__ bool relabel(std::int32_t* __restrict__ labels, std::int64_t i, int best) {
  const bool moved = labels[i] != best;
  labels[i] = best;
  return moved;
}

}  // namespace km::kernels
