// update_centroids: the update step on the device, shared by offload, offload-block and
// fused (the clusters' shifts are then totalled in a fixed order by total_shift).
#pragma once

#include <cstdint>

#include "kernels/kmeans/margin.hpp"
#include "kernels/kmeans/unit_norm.hpp"

namespace km::kernels {

// Threads for a block that walks d coordinates a thread each: whole warps, as few passes over d
// as 1024 threads allow, and the warps' passes balanced (d = 784: 800 threads in one pass, not
// 256 threads in 3 full passes and a fourth of 16 lanes that the whole block waits for).
inline int coordinate_threads(int d) {
  const int warps = (d + 31) / 32;
  const int passes = (warps + 31) / 32;
  return (warps + passes - 1) / passes * 32;
}

// One object's coordinate as a 64-bit fixed-point addend (value * 2^E, rounded to the
// nearest integer, two's complement). Integer addition is associative, so sums of these are
// the same bits in any order: the GPU's sums are reproducible run to run. The engine picks
// the scale 2^E so that no sum can reach 2^62 (layouts.hpp: fixed_point_exponent).
__device__ __forceinline__ unsigned long long to_fixed(double v, double scale) {
  return static_cast<unsigned long long>(__double2ll_rn(v * scale));
}

// Sample weights (nullptr: every object weighs 1, and the addends below are the unweighted ones
// bit for bit): object i's weight in double, and a weighted addend, w v rounded once to double
// (exact for float data; _rn so that nothing fuses it) then to fixed point.
template <class T>
__device__ __forceinline__ double weight_of(const T* weights, std::int64_t i) {
  return weights ? static_cast<double>(weights[i]) : 1.0;
}
__device__ __forceinline__ unsigned long long weighted_fixed(double w, double v, double scale) {
  return to_fixed(__dmul_rn(w, v), scale);
}

// One block per cluster. centroid = sum / count, or unchanged when the cluster is empty;
// with `unit` (the cosine and dot metrics) re-normalised as unit_norm.hpp says, its length
// summed by one thread in the host's order; the squared shift of cluster c goes to
// shift_parts[c]; clears the sums and the count for the next iteration (unless `keep`: fused's
// tensor path keeps them, updating only the movers'). Sums are fixed point [k][d] (value = sum
// * inv_scale), counts too (value = count * inv_weight: 1 unweighted, the weight totals' scale
// with sample weights); centroids are [d][k] when coord_major, else [k][d]. Launch with a
// multiple of 32 threads.
template <class T>
__global__ void update_centroids(T* __restrict__ centroids, unsigned long long* __restrict__ sums,
                                 unsigned long long* __restrict__ counts, int k, int d, bool coord_major,
                                 double inv_scale, double* __restrict__ shift_parts, bool keep = false,
                                 bool unit = false, double inv_weight = 1) {
  __shared__ double warp_shift[32];
  __shared__ double unit_norm;
  const int c = blockIdx.x;
  const unsigned long long count = counts[c];
  const auto mean = [&](int j) {
    const double sum = static_cast<double>(static_cast<long long>(sums[static_cast<std::int64_t>(c) * d + j])) * inv_scale;
    return static_cast<T>(sum / (static_cast<double>(count) * inv_weight));
  };
  double norm = 1;
  if (unit) {  // (every thread reads the sums before any clears them)
    if (threadIdx.x == 0) unit_norm = count > 0 ? ordered_norm(mean, d) : 0.0;
    __syncthreads();
    norm = unit_norm;
  }
  const bool moves = count > 0 && norm > 0;
  double local = 0;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    unsigned long long& s = sums[static_cast<std::int64_t>(c) * d + j];
    if (moves) {
      const std::int64_t at = coord_major ? static_cast<std::int64_t>(j) * k + c : static_cast<std::int64_t>(c) * d + j;
      const T updated = unit ? unit_coordinate(mean(j), norm) : mean(j);
      const double delta = static_cast<double>(updated) - static_cast<double>(centroids[at]);
      local += delta * delta;
      centroids[at] = updated;
    }
    if (!keep) s = 0;
  }
  for (int off = 16; off > 0; off /= 2) local += __shfl_down_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31) == 0) warp_shift[threadIdx.x / 32] = local;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += warp_shift[w];
    shift_parts[c] = total;
    if (!keep) counts[c] = 0;
  }
}

// The clusters' shifts totalled in one fixed order, whatever block computes it: 1,024
// "virtual threads", v summing parts v, v + 1024, ... in index order; each virtual warp's 32
// sums by a shuffle-down tree; the 32 warps' totals in order. A block of any multiple of 32
// threads gives the same bits (its warp q plays virtual warps q, q + warps, ...): total_shift
// below with 1,024 threads, and fused's one-pass delta kernel with its own block, so that a
// run's shift does not depend on which of them updated (one GPU or several). Every thread of
// the block must call it; thread 0 returns the total. `warp_totals` is 32 doubles of shared memory.
// The virtual warps past k, whose sums are +0.0 and leave the total's bits as they are, are
// skipped (at K = 16 the other 31 cost the delta kernel's last block their loads and shuffles).
__device__ inline double fixed_order_total(const double* parts, int k, double* warp_totals) {
  constexpr int kVirtual = 1024;
  const int lane = threadIdx.x & 31, warps = static_cast<int>(blockDim.x / 32);
  const int used = min(kVirtual / 32, (k + 31) / 32);
  for (int w = static_cast<int>(threadIdx.x / 32); w < used; w += warps) {
    double v = 0;
    for (int c = w * 32 + lane; c < k; c += kVirtual) v += parts[c];
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) warp_totals[w] = v;
  }
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < used; ++w) total += warp_totals[w];
  return total;
}

// The iteration's inertia without reading every object (fused's delta kernel with bounds,
// the tensor path's movers): per cluster, sum |x - c|^2 = Q - 2 w.(S - n z) + n |w|^2 with
// w = c - z, Q = sum |x - z|^2, S = sum x (fixed point), n the count, exact algebra. This is
// one lane's share of cluster c's last two terms over coordinates j = lane, lane + 32, ...
// (centroid(j) gives c_j, z is in double), and beside it the magnitudes whose roundings the
// evaluation carries (algebraic_inertia_fixed's bound). sum(j) gives S_j's fixed-point word.
template <class S, class C>
__device__ __forceinline__ void algebraic_part_of(S sum, double count, C centroid, const double* z, int d, int lane,
                                                  double inv_scale, double& part, double& size) {
  part = 0;
  size = 0;
  for (int j = lane; j < d; j += 32)
    algebraic_term(static_cast<double>(static_cast<long long>(sum(j))) * inv_scale, count,
                   static_cast<double>(centroid(j)), z[j], part, size);
}
// The same with the sums in global memory (read past L1: other blocks added them).
template <class C>
__device__ __forceinline__ void algebraic_part(const unsigned long long* sums, double count, C centroid,
                                               const double* z, int d, int lane, double inv_scale, double& part,
                                               double& size) {
  algebraic_part_of([&](int j) { return __ldcg(&sums[j]); }, count, centroid, z, d, lane, inv_scale, part, size);
}

// The inertia as algebraic_part's sums give it (inertia: the clusters' parts totalled; bound:
// their error magnitudes totalled), in fixed point -- or kInertiaUnsure where the bound
// (cancellation: clusters far tighter than their distance from z) exceeds `guard` of it. The
// fixed-point roundings of Q and S (at most n/2 units of their scales) are the kind a
// per-object sum has too, and are not part of the test.
constexpr unsigned long long kInertiaUnsure = ~0ull;
__device__ __forceinline__ unsigned long long algebraic_inertia_fixed(double inertia, double bound, int k,
                                                                      double guard, double inertia_scale) {
  return algebraic_unsure(inertia, bound, k, guard) ? kInertiaUnsure : to_fixed(inertia, inertia_scale);
}

// One block of any multiple of 32 threads: *total = fixed_order_total(parts).
template <int = 0>  // a template: defined in every translation unit that includes this header
__global__ void total_shift(const double* __restrict__ parts, int k, double* __restrict__ total) {
  __shared__ double warp_totals[32];
  const double t = fixed_order_total(parts, k, warp_totals);
  if (threadIdx.x == 0) *total = t;
}

}  // namespace km::kernels
