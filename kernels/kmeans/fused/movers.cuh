// Only the objects that move are accumulated. The sums are 64-bit fixed-point integers
// (update.cuh: to_fixed), so a cluster's sum is the same bits however it was reached: the engine
// keeps this rank's sums and counts across iterations ("held"), and an object that moves from a
// to b subtracts its addends from a and adds them to b. After the first iterations few objects
// move, so the per-object work is the assignment alone, and an unmoved object's label is not even
// written back. A warp queues its movers and sums them with every lane busy: at d <= 4 a mover a
// lane (its coordinates read again), above a coordinate a lane (the mover stages them in shared
// memory). The 64-bit shared adds are two 32-bit atomics with a carry (counters.cuh:
// shared_add_u64), not a CAS loop.
// The steps here take the kernel's variables by reference, as the kernel's lambdas that call them
// capture them: so the compiler sees the same code (the generated PTX is the same bits).
#pragma once

#include <cstdint>
#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

// An object's move from `was` (-1: none yet) to `label`: its fixed-point addends out of one
// cluster's sums and into the other's.
template <class C>
__device__ __forceinline__ void add_move_sums(const typename C::T* v, int label, int was, const int& d, const DeltaPass& p,
                                              unsigned long long* const& dsums, int* const& dcounts) {
  constexpr int MAXD = C::MAXD;
#pragma unroll
  for (int j = 0; j < MAXD; ++j) {
    if (j < d) {
      const unsigned long long addend = to_fixed(static_cast<double>(v[j]), p.scale);
      shared_add_u64(&dsums[label * d + j], addend);
      if (was >= 0) shared_add_u64(&dsums[was * d + j], 0ull - addend);
    }
  }
  atomicAdd(&dcounts[label], 1);
  if (was >= 0) atomicAdd(&dcounts[was], -1);
}

// A warp's moves (to >= 0: the lane's object from `was` to `to`; the whole warp calls it). Where
// they are all one move (the cells' sorted order: a round's objects mostly one cell's, one label)
// the warp sums their addends by shuffles and one lane adds the sums: 32 lanes' shared atomics on
// the same words serialised, so that the first iteration (every object a mover) took 1.47x the
// time in double, 1.67x in float in that order (H200, 2^24 x 2, K = 16); summed by the warp,
// 0.236 ms / 0.184 ms against 0.256 / 0.202 in the objects' order.
// Else each lane its own. (Integers: the same bits either way.) SORTED alone (a kernel of its
// own, not a test at run time): in the objects' order a round's movers hardly ever share a move,
// and the test in the one kernel cost 1.035x the time in float at 2^20 and 2^24 x 2, K = 16 (H200;
// skipped at run time 1.020-1.034x); each order with its own kernel, the objects' order 0.98x
// the one kernel's time, the sorted order level (0.99-1.01x).
template <class C, class AddMove>
__device__ __forceinline__ void add_warp_moves(const typename C::T* v, int to, int was, const int& d, const int& lane,
                                               const DeltaPass& p, unsigned long long* const& dsums,
                                               int* const& dcounts, AddMove& add_move) {
  constexpr int MAXD = C::MAXD;
  constexpr bool SORTED = C::SORTED;
  if constexpr (!SORTED) {
    if (to >= 0) add_move(v, to, was);
    return;
  }
  const unsigned movers = __ballot_sync(0xffffffffu, to >= 0);
  if (movers == 0) return;
  const int leader = __ffs(movers) - 1;
  const int key = to >= 0 ? to * 256 + was + 1 : -1;
  const int first_key = __shfl_sync(0xffffffffu, key, leader);
  if (__popc(movers) > 1 && __all_sync(0xffffffffu, to < 0 || key == first_key)) {
#pragma unroll
    for (int j = 0; j < MAXD; ++j) {
      if (j < d) {
        unsigned long long a = to >= 0 ? to_fixed(static_cast<double>(v[j]), p.scale) : 0ull;
        for (int off = 16; off > 0; off /= 2) a += __shfl_xor_sync(0xffffffffu, a, off);
        if (lane == leader) {
          shared_add_u64(&dsums[to * d + j], a);
          if (was >= 0) shared_add_u64(&dsums[was * d + j], 0ull - a);
        }
      }
    }
    if (lane == leader) {
      const int c = __popc(movers);
      atomicAdd(&dcounts[to], c);
      if (was >= 0) atomicAdd(&dcounts[was], -c);
    }
  } else if (to >= 0) {
    add_move(v, to, was);
  }
}


// A queued mover's coordinate j (value v) out of its old cluster's sums and into its new one's,
// and with j = 0 its count: the warp's rounds of movers, a lane a coordinate.
template <class C>
__device__ __forceinline__ void move_mover_coordinate(uint2 entry, int j, typename C::T v, const DeltaPass& p,
                                                unsigned long long* const& dsums, const int& d, int* const& dcounts) {
  const int label = static_cast<int>(entry.y & 0xffffu), was = static_cast<int>(entry.y >> 16) - 1;
  const unsigned long long addend = to_fixed(static_cast<double>(v), p.scale);
  shared_add_u64(&dsums[label * d + j], addend);
  if (was >= 0) shared_add_u64(&dsums[was * d + j], 0ull - addend);
  if (j == 0) {
    atomicAdd(&dcounts[label], 1);
    if (was >= 0) atomicAdd(&dcounts[was], -1);
  }
}

}  // namespace km::kernels
