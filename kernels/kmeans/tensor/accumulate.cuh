// fused's tensor path, its accumulation by cluster (6_fused_tensor.cuh): the fixed-point sums,
// counts and inertia of an iteration's labels, either over the objects sorted by label or, once
// few objects move, from sums kept across iterations with only the movers' rows added and taken.
//
//   relabel_for_sort     labels <- next, the change count, the indices for CUB's radix sort.
//   accumulate_sorted    The sorted order summed in fixed chunks: one atomic per cluster change
//                        (update.cuh: to_fixed; integer atomics, the same bits in any order).
//   move_members         The movers' scheme: each mover's row added to its new cluster's sums
//                        and taken from its old one's.
//   movers_parts,        The iteration's inertia from the kept sums (update.cuh: algebraic_part),
//   movers_inertia       or kInertiaUnsure for the host's per-object sum.
#pragma once

#include <cstdint>

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

// The accumulation by cluster. relabel_for_sort: labels <- next, the change count (unless
// null: the final E-step), and the objects' indices for CUB's radix sort by label. accumulate_sorted then walks the sorted
// order in fixed chunks of kSortedChunk positions: thread j adds coordinate j of each object
// (one row read coalesced by the block) into a running 64-bit fixed-point sum and flushes it
// with one global atomic whenever the cluster changes: about K*d + d atomics per chunk instead
// of d per object, and no shared-memory contention when few clusters take many objects. The
// sums are integers, so they are the same bits in any order and as the per-object atomics.
constexpr int kSortedChunk = 256, kSortedUnroll = 8;

static __global__ void relabel_for_sort(const std::int32_t* __restrict__ next, std::int32_t* __restrict__ labels,
                                 std::int64_t n, unsigned long long* changed, std::int64_t* __restrict__ index) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool moved = false;
  if (i < n) {
    const int c = next[i];
    moved = labels[i] != c;
    labels[i] = c;
    index[i] = i;
  }
  count_changed(changed, moved);
}

// With Q (the movers' scheme, below), also each cluster's q sum (the members' object_q, summed
// by the thread of coordinate 0 beside the count) into q_sums. With W (sample weights, never
// with Q), each addend is w x (update.cuh: weighted_fixed), each count the members' fixed-point
// weights, and each inertia term w (x_j - c_j)^2.
template <class T, int U = kSortedUnroll, bool Q = false, bool W = false>
__global__ void __launch_bounds__(1024)
    accumulate_sorted(const T* __restrict__ x, const T* __restrict__ centroids,
                      const std::int32_t* __restrict__ sorted_labels, const std::int64_t* __restrict__ sorted_index,
                      std::int64_t n, int d, int chunk, unsigned long long* __restrict__ sums,
                      unsigned long long* __restrict__ counts, double scale, unsigned long long* inertia,
                      double inertia_scale, const unsigned long long* __restrict__ object_q = nullptr,
                      unsigned long long* __restrict__ q_sums = nullptr, const T* __restrict__ weights = nullptr,
                      double weight_scale = 1) {
  static_assert(!(Q && W), "the movers' scheme counts objects");
  __shared__ std::int32_t labels_s[kSortedChunk];
  __shared__ std::int64_t index_s[kSortedChunk];
  __shared__ unsigned long long q_s[Q ? kSortedChunk : 1];
  __shared__ double w_s[W ? kSortedChunk : 1];
  unsigned long long part = 0;  // the inertia, fixed point: one addend per object and coordinate
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  for (std::int64_t ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
    const std::int64_t begin = ch * chunk;
    const int size = static_cast<int>(n - begin < chunk ? n - begin : chunk);
    __syncthreads();  // the previous chunk's entries are used up
    for (int q = threadIdx.x; q < size; q += blockDim.x) {  // the chunk's labels and rows' offsets, coalesced
      labels_s[q] = sorted_labels[begin + q];
      const std::int64_t i = sorted_index[begin + q];
      index_s[q] = i * d;
      if (Q) q_s[q] = object_q[i];
      if (W) w_s[q] = static_cast<double>(weights[i]);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
      unsigned long long acc = 0, qacc = 0, wacc = 0;  // (wacc: the members' weights, W)
      int label = labels_s[0], run = 0;  // the cluster's members in the chunk: from position run on
      // The centroid's coordinate changes only with the cluster, which the sorted chunk
      // changes a few times: one register, reloaded then, not a load per object.
      double cj = static_cast<double>(centroids[static_cast<std::int64_t>(label) * d + j]);
      // U objects' loads issued before any is used (one at a time left the loop waiting on
      // memory: 200 us for 60,000 x 784 under ncu, ~2x the read's time; 4 at a time 162 us, 8
      // at a time 144 us, H200).
      for (int q0 = 0; q0 < size; q0 += U) {
        T v[U];
        int cl[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int q = q0 + u < size ? q0 + u : size - 1;
          cl[u] = labels_s[q];
          v[u] = x[index_s[q] + j];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (q0 + u >= size) break;
          if (cl[u] != label) {
            atomicAdd(&sums[static_cast<std::int64_t>(label) * d + j], acc);
            if (j == 0) {
              atomicAdd(&counts[label], W ? wacc : static_cast<unsigned long long>(q0 + u - run));
              if (Q) atomicAdd(&q_sums[label], qacc);
            }
            acc = qacc = wacc = 0;
            run = q0 + u;
            label = cl[u];
            cj = static_cast<double>(centroids[static_cast<std::int64_t>(label) * d + j]);
          }
          const double diff = static_cast<double>(v[u]) - cj;
          if constexpr (W) {
            const double w = w_s[q0 + u];
            part += weighted_fixed(w, diff * diff, inertia_scale);
            acc += weighted_fixed(w, static_cast<double>(v[u]), scale);
            if (j == 0) wacc += to_fixed(w, weight_scale);
          } else {
            part += to_fixed(diff * diff, inertia_scale);
            acc += to_fixed(static_cast<double>(v[u]), scale);
          }
          if (Q && j == 0) qacc += q_s[q0 + u];
        }
      }
      atomicAdd(&sums[static_cast<std::int64_t>(label) * d + j], acc);
      if (j == 0) {
        atomicAdd(&counts[label], W ? wacc : static_cast<unsigned long long>(size - run));
        if (Q) atomicAdd(&q_sums[label], qacc);
      }
    }
  }
  flush_block_fixed(inertia, part);
}

// The movers' scheme (in memory, on one GPU, once few objects move): the sums, counts and q
// sums are kept across iterations (they are integers: the same bits as summed afresh), and
// only the objects whose label changed go through them. move_members: a warp takes 32
// objects; each mover's row is read by the whole warp, a coordinate per lane, its fixed-point
// addends added to the new cluster's sums and taken from the old one's (coalesced 64-bit
// global atomics), its q (object_q) moved the same way; the labels written, the movers
// counted. Rows of objects that stay are not read.
template <class T>
__global__ void __launch_bounds__(256)
    move_members(const T* __restrict__ x, const std::int32_t* __restrict__ next, std::int32_t* __restrict__ labels,
                 std::int64_t n, int d, unsigned long long* sums, unsigned long long* counts, double scale,
                 const unsigned long long* __restrict__ object_q, unsigned long long* q_sums,
                 unsigned long long* changed) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  unsigned moves = 0;
  for (std::int64_t base = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * 32; base < n;
       base += warps * 32) {
    const std::int64_t i = base + lane;
    int to = 0, from = 0;
    if (i < n) {
      to = next[i];
      from = labels[i];
    }
    const bool moved = i < n && to != from;
    if (moved) labels[i] = to;
    unsigned movers = __ballot_sync(0xffffffffu, moved);
    moves += moved;
    while (movers) {
      const int m = __ffs(movers) - 1;
      movers &= movers - 1;
      const std::int64_t row = (base + m) * d;
      const int into = __shfl_sync(0xffffffffu, to, m), out_of = __shfl_sync(0xffffffffu, from, m);
      for (int j = lane; j < d; j += 32) {
        const unsigned long long a = to_fixed(static_cast<double>(x[row + j]), scale);
        atomicAdd(&sums[static_cast<std::int64_t>(into) * d + j], a);
        atomicAdd(&sums[static_cast<std::int64_t>(out_of) * d + j], 0ull - a);
      }
      if (lane == 0) {
        const unsigned long long q = object_q[base + m];
        atomicAdd(&q_sums[into], q);
        atomicAdd(&q_sums[out_of], 0ull - q);
        atomicAdd(&counts[into], 1ull);
        atomicAdd(&counts[out_of], ~0ull);
      }
    }
  }
  flush_block_count(changed, moves);
}

// The iteration's inertia from the kept sums (update.cuh: algebraic_part): movers_parts, a
// warp per cluster, writes each cluster's part and error bound into parts [2k];
// movers_inertia (one block) totals them in fixed_order_total's order: *inertia = the
// fixed-point total, or kInertiaUnsure with the centroids ([k][d], those of the assignment)
// copied to `previous` for the host's per-object sum.
template <class T>
__global__ void movers_parts(const T* __restrict__ centroids, const unsigned long long* sums,
                             const unsigned long long* counts, const unsigned long long* q_sums,
                             const double* __restrict__ z, int k, int d, double inv_scale, double inertia_scale,
                             double* __restrict__ parts) {
  const int lane = threadIdx.x & 31;
  const int c = static_cast<int>((static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  if (c >= k) return;  // whole warps
  const double count = static_cast<double>(static_cast<long long>(__ldcg(&counts[c])));
  const T* row = centroids + static_cast<std::int64_t>(c) * d;
  double part, size;
  algebraic_part(sums + static_cast<std::int64_t>(c) * d, count, [&](int j) { return row[j]; }, z, d, lane, inv_scale,
                 part, size);
  for (int off = 16; off > 0; off /= 2) {
    part += __shfl_down_sync(0xffffffffu, part, off);
    size += __shfl_down_sync(0xffffffffu, size, off);
  }
  if (lane == 0) {
    const double q = static_cast<double>(static_cast<long long>(__ldcg(&q_sums[c]))) / inertia_scale;
    parts[c] = q + part;
    parts[k + c] = (2 * d + 24) * 0x1p-53 * (fabs(q) + size);
  }
}

template <class T>
__global__ void __launch_bounds__(1024)
    movers_inertia(const T* __restrict__ centroids, int k, int d, double inertia_scale, double guard,
                   const double* __restrict__ parts, unsigned long long* inertia, T* __restrict__ previous) {
  __shared__ double warp_totals[32];
  __shared__ bool unsure;
  const double total = fixed_order_total(parts, k, warp_totals);
  __syncthreads();
  const double bound = fixed_order_total(parts + k, k, warp_totals);
  if (threadIdx.x == 0) {
    const unsigned long long fixed = algebraic_inertia_fixed(total, bound, k, guard, inertia_scale);
    *inertia = fixed;
    unsure = fixed == kInertiaUnsure;
  }
  __syncthreads();
  if (unsure)
    for (std::int64_t t = threadIdx.x; t < static_cast<std::int64_t>(k) * d; t += blockDim.x) previous[t] = centroids[t];
}

}  // namespace km::kernels
