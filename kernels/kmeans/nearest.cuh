// The nearest-centroid search of the ladder kernels (naive … offload-block), in seq's
// arithmetic: direct squared distances summed over coordinates in order, the lowest index
// winning ties, so the labels equal seq's.
#pragma once

#include <cstdint>

namespace km::kernels {

// seq's running sum for one more coordinate: (x - c)^2 rounded, then added and rounded. The
// _rn intrinsics are never contracted into a fused multiply-add (nvcc contracts x*y + z by
// default, and seq, compiled with -ffp-contract=off, does not), so this is seq's bits.
// seq's arithmetic in pieces: one coordinate's squared difference, rounded, and the running
// sum's addition, rounded (seq_add(s, x, c) == seq_plus(s, seq_square(x, c))).
__device__ __forceinline__ float seq_square(float x, float c) {
  const float e = __fsub_rn(x, c);
  return __fmul_rn(e, e);
}
__device__ __forceinline__ double seq_square(double x, double c) {
  const double e = __dsub_rn(x, c);
  return __dmul_rn(e, e);
}
__device__ __forceinline__ float seq_plus(float s, float v) { return __fadd_rn(s, v); }
__device__ __forceinline__ double seq_plus(double s, double v) { return __dadd_rn(s, v); }

__device__ __forceinline__ float seq_add(float s, float x, float c) {
  const float e = __fsub_rn(x, c);
  return __fadd_rn(s, __fmul_rn(e, e));
}
__device__ __forceinline__ double seq_add(double s, double x, double c) {
  const double e = __dsub_rn(x, c);
  return __dadd_rn(s, __dmul_rn(e, e));
}

// x_at(j) and c_at(c, j) read the object's and the centroids' coordinates in whatever
// layout and memory the kernel keeps them; *distance (if given) gets the winner's.
template <class T, class XAt, class CAt>
__device__ __forceinline__ int nearest_centroid(int d, int k, XAt x_at, CAt c_at, T* distance = nullptr) {
  int best = 0;
  T best_dist = 0;
  for (int c = 0; c < k; ++c) {
    T dist = 0;
    for (int j = 0; j < d; ++j) dist = seq_add(dist, x_at(j), c_at(c, j));
    if (c == 0 || dist < best_dist) {
      best_dist = dist;
      best = c;
    }
  }
  if (distance) *distance = best_dist;
  return best;
}

// The same for an object held in registers (MAXD of them, the first d used; the loop over the
// coordinates unrolled so the registers are indexed by constants), centroids [d][k] in shared
// memory: the re-check of fused's one-pass kernels.
template <class T, int MAXD>
__device__ __forceinline__ int nearest_in_registers(const T (&x)[MAXD], const T* s, int d, int k, T& distance) {
  int best = 0;
  T best_dist = 0;
  for (int c = 0; c < k; ++c) {
    T dist = 0;
#pragma unroll
    for (int j = 0; j < MAXD; ++j)
      if (j < d) dist = seq_add(dist, x[j], s[j * k + c]);
    if (c == 0 || dist < best_dist) {
      best_dist = dist;
      best = c;
    }
  }
  distance = best_dist;
  return best;
}

// The same search by a whole warp for one object whose d coordinates sit in shared memory
// (xs, read by every lane): lane l sums centroids l, l + 32, ... in seq's arithmetic and
// order, then the warp keeps the least (distance, index), the lower index on equal distances,
// so every lane returns seq's label and distance. Distances are never NaN (finite data: the
// sums of squares are >= 0, +inf at worst), so (distance, index) is a total order. For K = 64,
// d = 32 this is 2 centroids per lane instead of 64 for one lane while 31 wait (H100, ncu: the
// warps' wait at the closing barrier for lanes re-checking alone was 28% of the kernel's time).
template <class T>
__device__ __forceinline__ int nearest_warp(const T* xs, const T* s, int d, int k, T& distance) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  int best = -1;
  T best_dist = 0;
  for (int c = lane; c < k; c += 32) {
    T dist = 0;
    for (int j = 0; j < d; ++j) dist = seq_add(dist, xs[j], s[j * k + c]);
    if (best < 0 || dist < best_dist) {
      best_dist = dist;
      best = c;
    }
  }
  for (int off = 16; off > 0; off /= 2) {
    const T other_dist = __shfl_xor_sync(0xffffffffu, best_dist, off);
    const int other = __shfl_xor_sync(0xffffffffu, best, off);
    if (other >= 0 && (best < 0 || other_dist < best_dist || (other_dist == best_dist && other < best))) {
      best_dist = other_dist;
      best = other;
    }
  }
  distance = best_dist;
  return best;
}

// Copies `count` centroid values into shared memory, the whole block cooperating; ends
// with a barrier, so every thread of the block must call it.
template <class T>
__device__ __forceinline__ void stage_centroids(const T* __restrict__ centroids, T* s, int count) {
  for (int t = threadIdx.x; t < count; t += blockDim.x) s[t] = centroids[t];
  __syncthreads();
}

// Nearest centroid of object i of coordinate-major x [d][n], centroids [d][k] in shared memory.
template <class T>
__device__ __forceinline__ int nearest_shared(const T* __restrict__ x, std::int64_t n, std::int64_t i, const T* s,
                                              int d, int k, T* distance = nullptr) {
  return nearest_centroid<T>(d, k, [&](int j) { return x[j * n + i]; }, [&](int c, int j) { return s[j * k + c]; },
                             distance);
}

}  // namespace km::kernels
