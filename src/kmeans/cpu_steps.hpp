// CPU building blocks shared by the implementations and the driver.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/dataset.hpp"
#include "kernels/kmeans/unit_norm.hpp"

namespace km {

// The reference distance: sum over j in order of (x_j - c_j)^2, in T. Implementations
// that must give seq's labels bit for bit keep exactly this order of operations.
template <class T>
inline T squared_distance(const T* x, const T* c, std::size_t d) {
  T s = 0;
  for (std::size_t j = 0; j < d; ++j) {
    const T diff = x[j] - c[j];
    s += diff * diff;
  }
  return s;
}

// Index of the nearest centroid; the lowest index wins ties. *distance (if given) receives
// its squared distance.
template <class T>
inline std::int32_t nearest_centroid(const T* x, const T* centroids, std::size_t k, std::size_t d,
                                     T* distance = nullptr) {
  std::int32_t best = 0;
  T best_dist = squared_distance(x, centroids, d);
  for (std::size_t c = 1; c < k; ++c) {
    const T dist = squared_distance(x, centroids + c * d, d);
    if (dist < best_dist) {
      best_dist = dist;
      best = static_cast<std::int32_t>(c);
    }
  }
  if (distance) *distance = best_dist;
  return best;
}

// The squared distance in double (inertia, k-means++ potentials): each difference is
// formed in double, so float data loses nothing.
template <class T>
inline double squared_distance_double(const T* x, const T* c, std::size_t d) {
  double s = 0;
  for (std::size_t j = 0; j < d; ++j) {
    const double diff = static_cast<double>(x[j]) - static_cast<double>(c[j]);
    s += diff * diff;
  }
  return s;
}

// Adds object x (d coordinates) of weight w (1 unweighted) to its cluster's sums and count (its
// weight total), in double: the accumulation of seq and of the GPU rungs that update on the host.
// Each addend w x_j is rounded once (exact for float data, and for w = 1) and added by Neumaier's
// compensated summation: `carry` collects each addition's rounding error (exact), so that sum +
// carry is the sum of the addends to about one rounding, whatever the data's distance from 0, the
// addends' signs and their number: plain sums left the means of data at 1e8 with noise of 1e-4
// (200,000 objects) 1,000 to 4,000 ulps from the exact ones; these are within one. An addend of 0
// (an object of weight 0, a zero coordinate) changes neither, so such objects change no bit. The
// update loop with seq's inertia beside it took 1.70 times a plain sum's time (2,000,000 x 16,
// 2 cores); Kahan's variant 1.42 times, but it is accurate only to a rounding of the addends'
// magnitudes and moves on an addend of 0 (1.63 times once made to skip those). A mean stays a
// function of its cluster's members (in object order) alone, so a fit whose labels stop changing
// stops moving. Nothing is fused (-ffp-contract=off).
template <class T>
inline void add_to_cluster(const T* x, double w, std::size_t d, double* sums, double* carry, double& count) {
  for (std::size_t j = 0; j < d; ++j) {
    const double v = w * static_cast<double>(x[j]), s = sums[j], t = s + v;
    carry[j] += std::fabs(s) >= std::fabs(v) ? (s - t) + v : (v - t) + s;
    sums[j] = t;
  }
  count += w;
}

// Centroids [k][d] -> coordinate-major [d][stride] (stride >= k; the columns past k are
// left as they are), and back.
template <class T>
inline void to_coord_major(const T* rows, std::size_t k, std::size_t d, T* out, std::size_t stride) {
  for (std::size_t c = 0; c < k; ++c)
    for (std::size_t j = 0; j < d; ++j) out[j * stride + c] = rows[c * d + j];
}
template <class T>
inline void from_coord_major(const T* cols, std::size_t k, std::size_t d, std::size_t stride, T* out) {
  for (std::size_t c = 0; c < k; ++c)
    for (std::size_t j = 0; j < d; ++j) out[c * d + j] = cols[j * stride + c];
}

// The sum of value(i) over i < n, in chunks of kSumChunk summed in parallel and combined in
// order: the same bits for any thread count. chunk_sums receives each chunk's sum.
constexpr std::size_t kSumChunk = 1 << 14;
template <class F>
double chunked_sum(std::size_t n, std::vector<double>& chunk_sums, F&& value, std::size_t chunk = kSumChunk) {
  const std::size_t chunks = (n + chunk - 1) / chunk;
  chunk_sums.assign(chunks, 0.0);
#if defined(_OPENMP)  // (CUDA files include this header without OpenMP)
#pragma omp parallel for schedule(dynamic, 1)
#endif
  for (std::size_t c = 0; c < chunks; ++c) {
    double s = 0;
    const std::size_t end = std::min(n, (c + 1) * chunk);
    for (std::size_t i = c * chunk; i < end; ++i) s += value(i);
    chunk_sums[c] = s;
  }
  double total = 0;
  for (double s : chunk_sums) total += s;
  return total;
}

// Run-time choice among builds of one function for AVX-512, AVX2 and baseline x86-64 (GCC
// target attributes; elsewhere all three are the baseline build): the widest this CPU runs.
template <class F>
F pick_by_isa(F avx512, F avx2, F baseline) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return avx512;
  if (__builtin_cpu_supports("avx2")) return avx2;
#else
  (void)avx512;
  (void)avx2;
#endif
  return baseline;
}

// The update's last step, shared by every host update: mean(c, m) writes cluster c's mean
// into m (d values) and returns false for an empty cluster, which keeps its centroid; with
// `unit` (the cosine and dot metrics) the mean is re-normalised (kernels/kmeans/unit_norm.hpp),
// and a mean of length 0 keeps the centroid too. Returns the summed squared shift (in double,
// in cluster order). `scratch` holds d values.
template <class T, class Mean>
double finish_update(std::size_t k, std::size_t d, T* centroids, bool unit, T* scratch, Mean&& mean) {
  double shift = 0;
  for (std::size_t c = 0; c < k; ++c) {
    if (!mean(c, scratch)) continue;
    double norm = 1;
    if (unit) {
      norm = kernels::ordered_norm([&](int j) { return scratch[j]; }, static_cast<int>(d));
      if (!(norm > 0)) continue;
    }
    for (std::size_t j = 0; j < d; ++j) {
      const T updated = unit ? kernels::unit_coordinate(scratch[j], norm) : scratch[j];
      const double delta = static_cast<double>(updated) - static_cast<double>(centroids[c * d + j]);
      shift += delta * delta;
      centroids[c * d + j] = updated;
    }
  }
  return shift;
}

// The update from add_to_cluster's sums and carries and the empty-cluster rule: centroid =
// (sum + carry) / count in double, rounded to T (count: the weight total), or unchanged when
// count == 0; `unit`: re-normalised (finish_update). Returns the summed squared shift of the
// centroids (in double).
template <class T>
double finalize_centroids(const double* sums, const double* carries, const double* counts, std::size_t k,
                          std::size_t d, T* centroids, bool unit = false);

// scikit-learn's inertia_: sum of squared distances (computed in double) from each object
// to the centroid of its label, each times the object's sample weight where the data has
// them. A chunked_sum: deterministic.
template <class T>
double inertia(const Dataset<T>& data, const T* centroids, const std::int32_t* labels);
// The same, with each chunk's sum (chunks of inertia_chunk(d) objects, a power of two that
// divides kSumChunk).
template <class T>
double inertia_chunks(const Dataset<T>& data, const T* centroids, const std::int32_t* labels,
                      std::vector<double>& chunk_sums);
inline std::size_t inertia_chunk(std::size_t d) {
  std::size_t chunk = 64;
  while (chunk < kSumChunk && chunk * 2 * std::max<std::size_t>(d, 1) <= (std::size_t{1} << 18)) chunk *= 2;
  return chunk;
}

// The largest |value| of the data (0 for all zeros; NaN when a value is NaN or infinite), in parallel.
template <class T>
double max_abs_value(const Dataset<T>& data);

}  // namespace km
