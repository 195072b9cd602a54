// Passes over the data already on the device, so the host need not read it again:
// - largest_magnitude: max |x| and whether any value is NaN or infinite (the range check the
//   registry would otherwise make on the host before the upload);
// - coordinate_range: each coordinate's least and greatest value (the delta kernel's cell grid);
// - object_terms: each object's term of the objective for the centroid of its label, in seq's
//   arithmetic (double, coordinate order, no fused multiply-add), so that the chunked sum of
//   them (kmeanspp.cuh: plusplus_chunk_sums, then the chunks in order on the host) is the CPU's
//   bit for bit: the squared distance (inertia()), or offset - x.c (metric.hpp: objective; the
//   cosine and dot metrics);
// - unit_rows: the cosine metric's normalised copy of rows already on the device, in the host's
//   arithmetic (unit_norm.hpp), so that it holds the bits metric.hpp's unit_rows makes.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/kmeans/kmeanspp.cuh"
#include "kernels/kmeans/unit_norm.hpp"

namespace km::kernels {

// out[0] = the bits of max |x| (a non-negative double's bits order as its value), out[1] = 1 if
// some value is NaN or infinite. out zeroed first. Grid-stride; one atomic per warp.
template <class T>
__global__ void largest_magnitude(const T* __restrict__ x, std::int64_t count, unsigned long long* out) {
  double m = 0;
  unsigned bad = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double a = fabs(static_cast<double>(x[i]));
    bad |= a <= 1.7976931348623157e308 ? 0u : 1u;
    m = a > m ? a : m;
  }
  for (int o = 16; o > 0; o /= 2) {
    m = fmax(m, __shfl_down_sync(0xffffffffu, m, o));
    bad |= __shfl_down_sync(0xffffffffu, bad, o);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMax(&out[0], static_cast<unsigned long long>(__double_as_longlong(m)));
    if (bad) atomicOr(&out[1], 1ull);
  }
}

// The range of each coordinate of coordinate-major x (x[j * n + i]), coordinate blockIdx.y:
// out[2j] the least value's ordered key (ordered_key), out[2j + 1] the greatest's; out set to
// (~0, 0) pairs first. Grid-stride; one atomic pair per warp.
__device__ __forceinline__ unsigned long long ordered_key(double v) {
  const unsigned long long b = static_cast<unsigned long long>(__double_as_longlong(v));
  return b >> 63 ? ~b : b | (1ull << 63);
}
inline double from_ordered_key(unsigned long long key) {
  const unsigned long long b = key >> 63 ? key & ~(1ull << 63) : ~key;
  double v;
  static_assert(sizeof v == sizeof b);
  std::memcpy(&v, &b, sizeof v);
  return v;
}
template <class T>
__global__ void coordinate_range(const T* __restrict__ x, std::int64_t n, unsigned long long* out) {
  const T* column = x + static_cast<std::int64_t>(blockIdx.y) * n;
  unsigned long long least = ~0ull, most = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long key = ordered_key(static_cast<double>(column[i]));
    least = key < least ? key : least;
    most = key > most ? key : most;
  }
  for (int o = 16; o > 0; o /= 2) {
    const unsigned long long a = __shfl_down_sync(0xffffffffu, least, o), b = __shfl_down_sync(0xffffffffu, most, o);
    least = a < least ? a : least;
    most = b > most ? b : most;
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMin(&out[2 * blockIdx.y], least);
    atomicMax(&out[2 * blockIdx.y + 1], most);
  }
}

// An object's term, accumulated over its coordinates in order: the squared distance (Euclidean)
// or, for the inner-product metrics, offset - x.c (cosine: offset 1; dot: 0).
struct SquaredDistance {
  __device__ double step(double s, double x, double c) const {
    const double e = __dsub_rn(x, c);
    return __dadd_rn(s, __dmul_rn(e, e));
  }
  __device__ double finish(double s) const { return s; }
};
struct InnerProductTerm {
  double offset;
  __device__ double step(double s, double x, double c) const { return __dadd_rn(s, __dmul_rn(x, c)); }
  __device__ double finish(double s) const { return __dsub_rn(offset, s); }
};

// out[i] = term's finish of its steps over j in order with (double(x_ij), double(c_lj)),
// l = labels[i]; centroids row-major [k][d]. Coordinate-major x (x[j * n + i]): each thread walks
// its object, the warp's loads coalesced. Row-major x: blocks of kPlusPlusRows threads stage their
// objects through shared memory kPlusPlusCols coordinates at a time (k-means++'s tiles,
// coalesced; a thread walking its own row read 32 rows per warp load, 5x slower on 60,000 x 784).
template <class T, class Term>
__global__ void object_terms_coords(const T* __restrict__ x, std::int64_t n, int d, const T* __restrict__ centroids,
                                    const std::int32_t* __restrict__ labels, Term term, double* __restrict__ out) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const T* c = centroids + static_cast<std::int64_t>(labels[i]) * d;
  double s = 0;
  for (int j = 0; j < d; ++j) s = term.step(s, static_cast<double>(x[j * n + i]), static_cast<double>(c[j]));
  out[i] = term.finish(s);
}

template <class T, class Term>
__global__ void __launch_bounds__(kPlusPlusRows)
    object_terms_rows(const T* __restrict__ x, std::int64_t n, int d, const T* __restrict__ centroids,
                      const std::int32_t* __restrict__ labels, Term term, double* __restrict__ out) {
  __shared__ double tile[kPlusPlusRows][kPlusPlusCols + 1];
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kPlusPlusRows, i = row0 + threadIdx.x;
  const T* c = centroids + static_cast<std::int64_t>(i < n ? labels[i] : 0) * d;
  double s = 0;
  plusplus_walk_rows(x, n, d, row0, tile, [&](int p, double v) { s = term.step(s, v, static_cast<double>(c[p])); });
  if (i < n) out[i] = term.finish(s);
}

// out's row i = row i of x (n x d, row-major) over its length (ordered_norm, unit_coordinate); a
// row of length 0 stays 0 and one of NaN length becomes NaN (the range check then refuses it):
// metric.hpp's unit_rows, bit for bit. One thread a row: a set-up pass.
template <class T>
__global__ void unit_rows(const T* __restrict__ x, std::int64_t n, int d, T* __restrict__ out) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const T* row = x + i * d;
  T* to = out + i * d;
  const double norm = ordered_norm([&](int j) { return row[j]; }, d);
  for (int j = 0; j < d; ++j)
    to[j] = norm > 0 ? unit_coordinate(row[j], norm) : norm == 0 ? T(0) : static_cast<T>(__longlong_as_double(0x7ff8000000000000LL));
}

}  // namespace km::kernels
