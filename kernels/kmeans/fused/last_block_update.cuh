// The kernel's end (6_fused_delta.cuh): each block flushes its sums, counts and tallies to the
// held ones; with the whole problem on one engine, the last block to finish does the update: the
// centroids, their summed squared shift (update_centroids' and total_shift's arithmetic and order,
// so one GPU and several give the same bits), the assignment's inertia by algebra
// (SHADOW), and the iteration's counters, written straight to pinned host memory, then the release
// of the kernel launched ahead (fused/protocol.cuh). The kernel's shared variables come by
// reference; both functions are __forceinline__, so the compiler still sees one kernel.
#pragma once

#include <cstdint>

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/fused/protocol.cuh"
#include "kernels/kmeans/fused/primitives.cuh"
#include "kernels/kmeans/fused/traits.cuh"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/margin.hpp"
#include "kernels/kmeans/stop_rule.hpp"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

// The block's sums, counts and tallies into the held ones.
// tallies_s: the kernel's shared [5][warps] (kOneFlush).
template <class C>
__device__ __forceinline__ void flush_block(const DeltaPass& p, const unsigned long long* dsums, const int* dcounts,
                                            int k, int d, int lane, int warp, int warps_in_block, unsigned moves,
                                            unsigned rechecks,
                                            unsigned lookups, unsigned rescores, unsigned long long my_inertia,
                                            unsigned long long fill_q,
                                            unsigned long long (*tallies_s)[C::kOneFlush ? kDeltaMaxThreads / 32 : 1]) {
  constexpr bool CELLS = C::CELLS, MMA = C::MMA, SHADOW = C::SHADOW, FILL = C::FILL;
  constexpr bool kOneFlush = C::kOneFlush;
  (void)fill_q;
  (void)warp;
  (void)lane;
  (void)warps_in_block;
  (void)tallies_s;
  (void)lookups;
  (void)rescores;
  // (At d = 32, K = 64 these k d atomics take most of the flush of the block that flushes last:
  // 6.3 us in float, 9.1 in double, against 0.4-0.6 for the counts and 0.6-0.8 for the tallies;
  // starting each block's at a different entry changed nothing.)
  for (int t = threadIdx.x; t < k * d; t += blockDim.x)
    if (dsums[t]) atomicAdd(&p.held_sums[t], dsums[t]);
  for (int c = threadIdx.x; c < k; c += blockDim.x)
    if (dcounts[c]) atomicAdd(&p.held_counts[c], static_cast<unsigned long long>(static_cast<long long>(dcounts[c])));
  if constexpr (!kOneFlush) {
    flush_block_count(p.changed, moves);
    flush_block_count(p.rechecked, rechecks);
    if constexpr (!SHADOW) flush_block_fixed(p.inertia, my_inertia);  // (SHADOW sums none: count_inertia)
    if constexpr (FILL) {
      __syncthreads();  // (flush_block_fixed's warp sums read before they are written again)
      flush_block_fixed(p.fill_q, fill_q);
    }
    if (CELLS) flush_block_count(p.looked_up, lookups);
    if (MMA && p.rescored) flush_block_count(p.rescored, rescores);
  } else {
    // The block's tallies in one reduction: a barrier, then an atomic each from threads 0-4,
    // where one counter after another took 3 barriers each. With the tensor-core scores only, not
    // staged (H100, 2^20 x 32, K = 64: 0.97x the time in float, 0.98x in double); elsewhere it measured
    // slower (1.01-1.04x at d = 2, 1.09-1.13x with the staged loads at d = 16, where the
    // kernels' main loops slowed too).
    unsigned long long v[5] = {moves, rechecks, my_inertia, CELLS ? lookups : 0u, rescores};
#pragma unroll
    for (int q = 0; q < 5; ++q)
      for (int off = 16; off > 0; off /= 2) v[q] += __shfl_down_sync(0xffffffffu, v[q], off);
    if (lane == 0)
#pragma unroll
      for (int q = 0; q < 5; ++q) tallies_s[q][warp] = v[q];
    __syncthreads();
    if (threadIdx.x < 5) {
      unsigned long long* const target[5] = {p.changed, p.rechecked, p.inertia, CELLS ? p.looked_up : nullptr,
                                             p.rescored};
      unsigned long long total = 0;
      for (int w = 0; w < warps_in_block; ++w) total += tallies_s[threadIdx.x][w];
      if (target[threadIdx.x] && total) atomicAdd(target[threadIdx.x], total);
    }
  }
}

// The cosine and dot metrics' re-normalisation of a warp's new centroid (lane j holds coordinate
// j of the mean), as update_centroids does it. Out of line: inlined into the update below, its
// length loop cost the Euclidean delta kernel registers (double, d = 32, K = 64: 1.038x the
// kernel time before the metrics, H100).
template <class T>
struct UnitMean {
  T value;
  bool moves;  // false: the mean has length 0 and the centroid stays
};
template <class T>
__device__ __noinline__ UnitMean<T> unit_mean(T updated, int d) {
  const double norm = ordered_norm([&](int j) { return __shfl_sync(0xffffffffu, updated, j); }, d);
  if (!(norm > 0)) return {updated, false};
  return {unit_coordinate(updated, norm), true};
}

// The last block's update (p.update): the held sums and counts into the centroids, the shifts,
// the inertia, the iteration's counters to p.*_out, and the release (p.release).
template <class C>
__device__ __forceinline__ void last_block_update(const DeltaPass& p, typename C::T* centroids,
                                                  const typename C::T* s, unsigned long long* dsums, float* table,
                                                  const double* zs, int k, int d, int lane, double* warp_totals,
                                                  bool& unsure_shared) {
  using T = typename C::T;
  constexpr bool CELLS = C::CELLS, MMA = C::MMA, SHADOW = C::SHADOW;
  constexpr bool kDynamic = C::kDynamic, kLeanDynamic = C::kLeanDynamic;
  constexpr int ROW = C::ROW;
  (void)zs;
  (void)unsure_shared;
  // update_centroids' arithmetic, the same bits: a warp per cluster, lane j its coordinate j
  // (d <= 32), the squared shift summed by the same shuffle tree into shift_parts[c]; then
  // the total in total_shift's fixed order. The held sums and counts come into shared memory
  // first (the block's own sums' room, flushed above, and the score table's, no longer read),
  // all in one round trip, and the shifts' total reads a shared copy: a warp's loop over its
  // clusters waited on two L2 round trips a cluster (at K = 64 and 4 warps 16 in a row, the
  // whole grid idle behind this block).
  unsigned long long* held_s = dsums;
  long long* counts_s = reinterpret_cast<long long*>(table);  // (k * ROW floats >= 2 k doubles)
  double* parts_s = reinterpret_cast<double*>(table) + k;
  block_batched<8>(k * d, [&](int t) { return __ldcg(&p.held_sums[t]); },
                   [&](int t, unsigned long long v) { held_s[t] = v; });
  for (int c = threadIdx.x; c < k; c += blockDim.x) counts_s[c] = static_cast<long long>(__ldcg(&p.held_counts[c]));
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x / 32);
  // SHADOW: the assignment's inertia by algebra (below), each cluster's part and bound
  // formed in the same loop from the same shared copies, into shared memory where the table
  // has room for 2 k more doubles (ROW >= 8 floats), else into p.inertia_parts: as one more pass
  // over the clusters reading the held sums, counts and Q from L2 and totalled from there, it
  // took 4.3 us of the iteration (stamps, H200, 2^21 x 16, K = 16, the float copy).
  [[maybe_unused]] double* const iparts =
      SHADOW && ROW >= 8 ? reinterpret_cast<double*>(table) + 2 * k : p.inertia_parts;
  [[maybe_unused]] const double inv_q = 1.0 / p.inertia_scale;
#pragma unroll 4
  for (int c = static_cast<int>(threadIdx.x / 32); c < k; c += warps) {
    const long long count = counts_s[c];
    // (SHADOW: Q the copy's total, one term: the sum over the clusters is what is used.)
    [[maybe_unused]] const double q =
        !SHADOW || lane != 0 || (SHADOW && c != 0)
            ? 0.0
            : static_cast<double>(static_cast<long long>(__ldcg(&p.held_q[c]))) * inv_q;
    double local = 0;
    T updated = 0;
    if (lane < d && count > 0) {
      const double sum = static_cast<double>(static_cast<long long>(held_s[c * d + lane])) * p.inv_scale;
      updated = static_cast<T>(sum / static_cast<double>(count));
    }
    bool moves = count > 0;
    if (p.unit && moves) {  // (count is the warp's: every lane takes this branch or none)
      const UnitMean<T> unit = unit_mean(updated, d);
      updated = unit.value;
      moves = unit.moves;
    }
    if (lane < d && moves) {
      const double delta = static_cast<double>(updated) - static_cast<double>(s[lane * k + c]);
      local += delta * delta;
      centroids[lane * k + c] = updated;
    }
    for (int off = 16; off > 0; off /= 2) local += __shfl_down_sync(0xffffffffu, local, off);
    if (lane == 0) p.shift_parts[c] = parts_s[c] = 0.0 + local;
    if constexpr (SHADOW) {
      // (the sums from the shared copy: the same words as p.held_sums)
      double part, size;
      algebraic_part_of([&](int j) { return held_s[c * d + j]; }, static_cast<double>(count),
                        [&](int j) { return s[j * k + c]; }, zs, d, lane, p.inv_scale, part, size);
      for (int off = 16; off > 0; off /= 2) {
        part += __shfl_down_sync(0xffffffffu, part, off);
        size += __shfl_down_sync(0xffffffffu, size, off);
      }
      if (lane == 0) {
        iparts[c] = q + part;
        iparts[k + c] = (2 * d + 24) * 0x1p-53 * (fabs(q) + size);
      }
    }
  }
  __syncthreads();
  const double total = fixed_order_total(parts_s, k, warp_totals);
  unsigned long long inertia_fixed = 0;
  if constexpr (SHADOW) {
    // (SHADOW: every object's inertia so, none of them summing a distance.)
    // This assignment's inertia: per
    // cluster, sum |x - c|^2 = Q - 2 w.(S - n z) + n |w|^2, w = c - z, exact algebra (its
    // parts formed in the update's loop above). Beside it, a bound on what the algebra adds
    // to the error: the roundings of q, of w and of this evaluation, (2d + 24) 2^-53 of the
    // magnitudes summed, which cancellation (clusters far tighter than their distance from z)
    // makes large against the inertia. Where it exceeds q_guard of the inertia, the host sums
    // it from the objects instead (kInertiaUnsure). The fixed-point roundings (at most n/2
    // units of Q's scale, n/2 of S's per coordinate times 2|w|) are the kind the per-object
    // sum has too, at most n/2 units of the same scale, and are not part of the test.
    __syncthreads();
    const double inertia = fixed_order_total(iparts, k, warp_totals);
    __syncthreads();
    const double bound = fixed_order_total(iparts + k, k, warp_totals);
    if (threadIdx.x == 0) {
      inertia_fixed = algebraic_inertia_fixed(inertia, bound, k, p.q_guard, p.inertia_scale);
      unsure_shared = inertia_fixed == kInertiaUnsure;
    }
    __syncthreads();
    if (unsure_shared)
      for (int t = threadIdx.x; t < k * d; t += blockDim.x)
        p.previous[(t % k) * d + t / k] = static_cast<double>(s[t]);
  }
  if (threadIdx.x == 0) {
    // Every tally read before any is written (the compiler cannot tell the *_out pointers from
    // them, so written in turn each read waited for the write before it: an L2 round trip each).
    const unsigned long long changed = __ldcg(p.changed), inertia = SHADOW ? inertia_fixed : __ldcg(p.inertia),
                             rechecked = __ldcg(p.rechecked),
                             skipped = CELLS && p.skipped ? __ldcg(p.skipped) : 0ull,
                             looked_up = CELLS && p.looked_up ? __ldcg(p.looked_up) : 0ull,
                             rescored = MMA && p.rescored ? __ldcg(p.rescored) : 0ull;
    *p.shift_out = total;
    *p.changed_out = changed;
    if (p.gate_out) {
      const bool stop = meets_stop_rule(static_cast<double>(changed), total, p.stop_changed, p.stop_shift);
      // (SHADOW: where the algebraic inertia's bound failed, the kernel launched ahead returns
      // at once too, so that the host sums this iteration's inertia from its labels and
      // launches the next iteration again: one_pass_iterate.cu, iterate.)
      *p.gate_out = stop || (SHADOW && inertia == kInertiaUnsure) ? 1u : 0u;
      *p.stopped_out = stop ? 1ull : 0ull;
    }
    *p.inertia_out = inertia;
    *p.rechecked_out = rechecked;
    *p.changed = 0;
    *p.inertia = 0;
    *p.rechecked = 0;
    if (CELLS && p.skipped) {
      *p.skipped_out = skipped;
      *p.skipped = 0;
    }
    if (CELLS && p.looked_up) {
      *p.looked_up_out = looked_up;
      *p.looked_up = 0;
    }
    if (MMA && p.rescored) {
      *p.rescored_out = rescored;
      *p.rescored = 0;
    }
    if (p.release) {
      // The next kernel may start here: everything it reads from this one is written.
      *p.done = 0;
      if ((kDynamic || kLeanDynamic) && p.chunks)
        for (int c = 0; c < kDeltaChunkCounters; ++c) p.chunks[c * kDeltaChunkStride] = 0;
      if (CELLS && p.work_count) *p.work_count = 0;
      __threadfence();
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p.release), "r"(p.release_value) : "memory");
    }
    if (p.end_ns_out) *p.end_ns_out = global_ns();
    __threadfence_system();  // the *_out counters may be pinned host memory the host reads next
    if (p.seq_out) *reinterpret_cast<volatile unsigned long long*>(p.seq_out) = p.seq;
  }
}

}  // namespace km::kernels
