// fused's tensor path, its re-checks (6_fused_tensor.cuh): the objects that fused_tensor_assign
// (or fused_wgmma_assign, or k-means||'s tensor rounds) queued, labelled by seq's formula.
//
//   recheck_nearest      A warp per queued object: seq's direct formula, in seq's order and
//                        rounding, over the queued candidates; the lowest index wins ties.
//   recheck_all          The same against every centroid: a warp per (object, 32 centroids),
//                        the least sum by atomicMin, then the lowest centroid that has it.
//   recheck_all_labels   Float's labels out of recheck_all's (sum, index) words.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/kmeans/candidate_lists.cuh"
#include "kernels/kmeans/nearest.cuh"

namespace km::kernels {

// The re-checks compute seq's sums in seq's order: for each (object, centroid) pair the squared
// differences are rounded one at a time and added in coordinate order. That order is serial,
// but the loads are not: a warp reads 32 coordinates at a time, coalesced, and only the adds
// run in sequence. (One lane walking a row alone waited on memory at every coordinate: 100 us
// for 4,000 queued objects of d = 784 under ncu, H200.)

// One warp per queued object (grid-stride over the queue's length, read on the device), its
// candidates' sums kept by lanes 0..count-1: lane p rounds (x_p - c_p)^2 of each candidate
// into shared memory, then lane m adds candidate m's squares in coordinate order. (Shuffling
// the squares to every lane took 3 x 2 instructions a coordinate; a shared read and an add
// serve all the candidates' lanes at once.) The queued-against-everyone objects' slots are
// prepared here as well (recheck_all's minimum cleared, their label set to INT_MAX for the
// label pass's atomicMin).
// A: the arithmetic (T: seq's; double on float data: k-means||'s distance, kmeanspp.cu).
constexpr int kNearestGroup = 4, kNearestThreads = 256;
template <class T, class A = T>
__global__ void __launch_bounds__(kNearestThreads)
    recheck_nearest(const T* __restrict__ x, const T* __restrict__ centroids, int d,
                    const Recheck* __restrict__ queue, const unsigned long long* __restrict__ queued,
                    const std::int64_t* __restrict__ everyone, unsigned long long* __restrict__ all_min,
                    std::int32_t* __restrict__ labels) {
  constexpr int SPAN = 32 * kNearestGroup;
  __shared__ A squares[kNearestThreads / 32][kMaxCandidates][SPAN + 1];  // +1: the lanes' rows in other banks
  const int lane = threadIdx.x & 31, wb = threadIdx.x / 32;
  const std::int64_t thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t q = thread; q < static_cast<std::int64_t>(queued[1]); q += threads) {
    all_min[q] = ~0ull;
    labels[everyone[q]] = INT_MAX;
  }
  const std::int64_t warps = threads / 32;
  const std::int64_t total = static_cast<std::int64_t>(*queued);
  for (std::int64_t w = thread / 32; w < total; w += warps) {
    const Recheck r = queue[w];
    const T* xi = x + r.i * d;
    const T* cand[kMaxCandidates];
#pragma unroll
    for (int m = 0; m < kMaxCandidates; ++m)
      cand[m] = centroids + static_cast<std::int64_t>(r.c[m < r.count ? m : 0]) * d;
    A mine = 0;  // lane m < count: candidate m's running sum
    // kNearestGroup chunks of 32 coordinates loaded together: one wait on memory per group.
    for (int p0 = 0; p0 < d; p0 += SPAN) {
      A sq[kNearestGroup][kMaxCandidates];
#pragma unroll
      for (int g = 0; g < kNearestGroup; ++g) {
        const int p = p0 + 32 * g + lane;
        const A xv = p < d ? static_cast<A>(xi[p]) : A(0);
#pragma unroll
        for (int m = 0; m < kMaxCandidates; ++m)
          sq[g][m] = m < r.count && p < d ? seq_square(xv, static_cast<A>(cand[m][p])) : A(0);
      }
      __syncwarp();  // the previous group's squares are used up
#pragma unroll
      for (int g = 0; g < kNearestGroup; ++g)
#pragma unroll
        for (int m = 0; m < kMaxCandidates; ++m) squares[wb][m][32 * g + lane] = sq[g][m];
      __syncwarp();
      // Unrolled, so the shared reads run ahead of the adds. Past d the squares are +0, and
      // s + 0 is s exactly: no bound on the coordinates.
      if (lane < r.count)
#pragma unroll
        for (int c = 0; c < SPAN; ++c) mine = seq_plus(mine, squares[wb][lane][c]);
    }
    A best = A(INFINITY);
    int best_c = INT_MAX;
#pragma unroll
    for (int m = 0; m < kMaxCandidates; ++m) {
      const A v = __shfl_sync(0xffffffffu, mine, m);
      if (m < r.count && (v < best || (v == best && r.c[m] < best_c))) {
        best = v;
        best_c = r.c[m];
      }
    }
    if (lane == 0) labels[r.i] = best_c;
  }
}

// The objects queued against every centroid, over (object, slice of 32 centroids) pairs, a
// warp each. Double, in two passes: the least sum over all centroids (atomicMin of the sum's
// bits: for non-negative IEEE values the bit patterns order as the values), then (LABEL) the same
// sums again, the lowest centroid whose sum equals it (atomicMin of the index). Float, in one:
// the sum's 32 bits and the index share a word, so one atomicMin finds both (the second pass was
// half of recheck_all's time), and recheck_all_labels copies the index out. (A, the arithmetic:
// float data summed in double, as k-means||'s rounds do, takes double's two passes.) The slices
// spread one object's K centroids over many warps,
// so a few queued objects do not wait on one block walking all of K. A warp stages its 32
// centroids' next 32 coordinates in shared memory (32 coalesced loads in flight), then lane
// l adds centroid l's squared differences in coordinate order.
constexpr int kAllWarps = 4;
template <class T, bool LABEL, class A = T>
__global__ void __launch_bounds__(kAllWarps * 32)
    recheck_all(const T* __restrict__ x, const T* __restrict__ centroids, int d, int k,
                const std::int64_t* __restrict__ everyone, const unsigned long long* __restrict__ count,
                unsigned long long* __restrict__ all_min, std::int32_t* __restrict__ labels) {
  // G chunks of 32 coordinates staged at a time, their 32 x G loads a lane issued together.
  constexpr int G = sizeof(T) == 4 ? 2 : 1;
  __shared__ T cs[kAllWarps][G][32][33];
  __shared__ T xs[kAllWarps][G][32];
  const int lane = threadIdx.x & 31, wb = threadIdx.x / 32;
  const std::int64_t slices = (k + 31) / 32;
  const std::int64_t items = static_cast<std::int64_t>(*count) * slices;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kAllWarps;
  for (std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * kAllWarps + wb; item < items; item += warps) {
    const std::int64_t q = item / slices;
    const int c0 = static_cast<int>(item % slices) * 32;
    const std::int64_t i = everyone[q];
    const int rows = k - c0 < 32 ? k - c0 : 32;
    A sum = 0;
    for (int p0 = 0; p0 < d; p0 += 32 * G) {
      T cv[G][32], xv[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int p = p0 + 32 * g + lane;
        xv[g] = p < d ? x[i * d + p] : T(0);
#pragma unroll
        for (int r = 0; r < 32; ++r)
          cv[g][r] = r < rows && p < d ? centroids[static_cast<std::int64_t>(c0 + r) * d + p] : T(0);
      }
      __syncwarp();  // the previous chunks are used up
#pragma unroll
      for (int g = 0; g < G; ++g) {
        xs[wb][g][lane] = xv[g];
#pragma unroll
        for (int r = 0; r < 32; ++r) cs[wb][g][r][lane] = cv[g][r];
      }
      __syncwarp();
      // Unrolled (the shared loads run ahead of the adds); past d both values are 0 and
      // adding (0 - 0)^2 leaves the sum as it is.
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int p = 0; p < 32; ++p)
          sum = seq_add(sum, static_cast<A>(xs[wb][g][p]), static_cast<A>(cs[wb][g][lane][p]));
    }
    // The slice's least sum (lowest centroid on equal sums), across the lanes.
    A best = lane < rows ? sum : A(INFINITY);
    int best_c = lane < rows ? c0 + lane : INT_MAX;
    for (int off = 16; off > 0; off /= 2) {
      const A ov = __shfl_xor_sync(0xffffffffu, best, off);
      const int oc = __shfl_xor_sync(0xffffffffu, best_c, off);
      if (ov < best || (ov == best && oc < best_c)) {
        best = ov;
        best_c = oc;
      }
    }
    if (lane == 0) {
      if constexpr (sizeof(A) == 4) {  // one pass: the sum's bits above the centroid's index
        static_assert(!LABEL, "float needs no label pass: recheck_all_labels reads the low word");
        atomicMin(all_min + q, (static_cast<unsigned long long>(__float_as_uint(best)) << 32) |
                                   static_cast<unsigned>(best_c));
      } else {
        const auto bits = static_cast<unsigned long long>(__double_as_longlong(best));
        if constexpr (!LABEL)
          atomicMin(all_min + q, bits);
        else if (bits == all_min[q])
          atomicMin(labels + i, best_c);
      }
    }
  }
}

// Float's recheck_all leaves each queued object's least (sum, centroid) in one word, the sum's
// bits above the index (a non-negative float's bits order as its value; equal sums then order by
// index): the label is the low half. (Double's sum takes the whole word, hence its second pass.)
static __global__ void __launch_bounds__(256)
    recheck_all_labels(const std::int64_t* __restrict__ everyone, const unsigned long long* __restrict__ count,
                       const unsigned long long* __restrict__ all_min, std::int32_t* __restrict__ labels) {
  const std::int64_t total = static_cast<std::int64_t>(*count);
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < total;
       q += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    labels[everyone[q]] = static_cast<std::int32_t>(all_min[q] & 0xffffffffull);
}

}  // namespace km::kernels
