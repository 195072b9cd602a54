// k-means++ on the GPU (src/kmeans/gpu/kmeanspp.cu): the data-sized steps, in the CPU's
// arithmetic so the centres come out the same bit for bit: every distance in double, summed
// over the coordinates in order with no fused multiply-add (the _rn intrinsics), and every
// sum over a chunk of objects taken by one thread in object order.
#pragma once

#include <cstdint>

namespace km::kernels {

// The distance from row x (d values of T) to a centre of d doubles, as the CPU's
// squared_distance_double: each difference in double, summed in order.
template <class T>
__device__ __forceinline__ double plusplus_distance(const T* __restrict__ x, const double* __restrict__ c, int d) {
  double s = 0;
  for (int p = 0; p < d; ++p) {
    const double e = __dsub_rn(static_cast<double>(x[p]), c[p]);
    s = __dadd_rn(s, __dmul_rn(e, e));
  }
  return s;
}

// closest[i] = distance to `centre` (first) or min(closest[i], it) (update): one thread per
// object.
template <class T>
__global__ void plusplus_closest(const T* __restrict__ x, std::int64_t n, int d, const double* __restrict__ centre,
                                 bool first, double* __restrict__ closest) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double v = plusplus_distance(x + i * d, centre, d);
  closest[i] = first ? v : (v < closest[i] ? v : closest[i]);
}

// mins[t][i] = min(closest[i], distance to candidate t) for the `trials` candidates, whose
// coordinates (double) are cands[t][d]: one thread per object, reading its row once for up
// to kPlusPlusGroup candidates at a time (each distance still summed in coordinate order).
constexpr int kPlusPlusGroup = 16;
template <class T>
__global__ void plusplus_candidates(const T* __restrict__ x, std::int64_t n, int d, const double* __restrict__ cands,
                                    int trials, const double* __restrict__ closest, double* __restrict__ mins) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double cl = closest[i];
  const T* row = x + i * d;
  for (int t0 = 0; t0 < trials; t0 += kPlusPlusGroup) {
    double acc[kPlusPlusGroup];
#pragma unroll
    for (int t = 0; t < kPlusPlusGroup; ++t) acc[t] = 0;
    for (int p = 0; p < d; ++p) {
      const double v = static_cast<double>(row[p]);
#pragma unroll
      for (int t = 0; t < kPlusPlusGroup; ++t)
        if (t0 + t < trials) {
          const double e = __dsub_rn(v, cands[static_cast<std::int64_t>(t0 + t) * d + p]);
          acc[t] = __dadd_rn(acc[t], __dmul_rn(e, e));
        }
    }
#pragma unroll
    for (int t = 0; t < kPlusPlusGroup; ++t)
      if (t0 + t < trials) mins[(t0 + t) * n + i] = acc[t] < cl ? acc[t] : cl;
  }
}

// out[ch * rows + r] = the sum, in object order, of values[r][chunk ch] (rows of n values):
// one thread per (chunk, row).
__global__ void plusplus_chunk_sums(const double* __restrict__ values, std::int64_t n, int rows, std::int64_t chunk,
                                    std::int64_t chunks, double* __restrict__ out) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= chunks * rows) return;
  const std::int64_t ch = t / rows;
  const int r = static_cast<int>(t % rows);
  const std::int64_t begin = ch * chunk, end = begin + chunk < n ? begin + chunk : n;
  const double* v = values + static_cast<std::int64_t>(r) * n;
  double s = 0;
  for (std::int64_t i = begin; i < end; ++i) s = __dadd_rn(s, v[i]);
  out[t] = s;
}

}  // namespace km::kernels
