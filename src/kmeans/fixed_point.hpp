// Exact sums: every per-cluster sum, count and per-iteration inertia that an engine hands to
// another thread, GPU or process is a 64-bit fixed-point integer (value * 2^E, rounded to the
// nearest). Integer addition is associative, so the totals are the same bits however the
// objects are split (threads, GPUs, MPI ranks) and in whatever order the parts are added:
// omp on any thread count, fused on one GPU or four, and `mpirun -np R` all agree bit for
// bit. The GPU's to_fixed (kernels/kmeans/update.cuh) is the same rounding.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/errors.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/cpu_steps.hpp"
#include <vector>

namespace km {

// The scales of one problem: from the whole data's largest |x| and object count (not one
// part's), the initial centroids' largest |c| (the same in every part) and, with sample
// weights, the largest weight, so that every part rounds its addends identically. Weighted, a
// sum's addend is w x (in double: exact for float data, one rounding for double) and a count's
// is w, both bounded through n max w; unweighted the counts are plain object counts (scale 1),
// and the scales are those of max w = 1, so weights of all 1 give the unweighted bits.
struct FixedScales {
  double sum = 1, inv_sum = 1;          // centroid sums: |sum| <= n max w max|x| stays below 2^61
  double inertia = 1, inv_inertia = 1;  // the inertia: at most n max w d (max|x| + max|c|)^2
  double weight = 1, inv_weight = 1;    // the counts (weight totals): 1 unweighted
};

// An object's distance to its nearest centroid is at most max|x| + max(max|x|, r0) a coordinate,
// r0 the initial centroids' reach (centroid_reach): the inertia's bound counts initial centroids
// far from the data (an --init file, Python's init=), which with max|x| alone overflowed the first
// iteration's fixed-point sum. Where an initial centroid lies within the data's range (every
// initialisation that picks objects or means), the bound and so the bits are those of (2 max|x|)^2.
// max_weight: 0 unweighted, else the largest sample weight (Whole::max_weight), min_weight the
// smallest positive one.
//
// The weights' range. A quantum of these sums is about n max w 2^-61 (of weight, and times max|x|
// of a coordinate), so a cluster of the lightest objects has its mean to about n (max w / min w)
// 2^-62 of max|x|. Up to n max w / min w = 2^32 that is 2^-30 (1e-9, the bar scikit-learn
// agreement is tested at); beyond it the fixed-point rungs refuse the weights with one line, and
// seq and the GPU rungs that update on the host, which sum in double, take them.
constexpr double kWeightSpread = 0x1p32;
inline FixedScales fixed_scales(double max_abs, std::size_t n, std::size_t d, double initial_max_abs = 0,
                                double max_weight = 0, double min_weight = 0) {
  FixedScales s;
  if (max_weight > 0 && static_cast<double>(n) * (max_weight / min_weight) > kWeightSpread)
    throw InputError(strprintf(
        "sample weights from %g to %g over %zu objects: the fixed-point sums of omp, offload, offload-block and "
        "fused resolve n * largest / smallest positive weight up to 2^32 (here %.3g); use --impl=seq, naive, "
        "transpose or shared (sums in double), or fewer or less spread weights",
        min_weight, max_weight, n, static_cast<double>(n) * (max_weight / min_weight)));
  const double mass = static_cast<double>(n) * (max_weight > 0 ? max_weight : 1.0);
  const int e = kernels::fixed_point_exponent(max_abs * mass);
  const double reach = max_abs + std::fmax(max_abs, initial_max_abs);
  const int ei = kernels::fixed_point_exponent(mass * static_cast<double>(d) * reach * reach);
  s.sum = std::ldexp(1.0, e);
  s.inv_sum = std::ldexp(1.0, -e);
  s.inertia = std::ldexp(1.0, ei);
  s.inv_inertia = std::ldexp(1.0, -ei);
  if (max_weight > 0) {
    const int ew = kernels::fixed_point_exponent(mass);
    s.weight = std::ldexp(1.0, ew);
    s.inv_weight = std::ldexp(1.0, -ew);
  }
  return s;
}

// The largest |v| of `count` values (the initial centroids' for fixed_scales).
template <class T>
double max_abs_of(const T* v, std::size_t count) {
  double m = 0;
  for (std::size_t i = 0; i < count; ++i) m = std::fmax(m, std::fabs(static_cast<double>(v[i])));
  return m;
}

// The initial centroids' share of fixed_scales' inertia bound. Each object's distance to its
// nearest centroid is what the inertia sums: in the first iteration that is at most its distance
// to the initial centroid whose largest |c_j| is smallest, and after it at most its distance to
// a centroid that is a mean of objects (one cluster at least has members), within max|x|. So the
// smallest over the k centroids of their largest |c_j|, not the largest of all: one centroid far
// from the data (an --init file's) made the scale so coarse that the inertia rounded to 0, or
// overflowed it. With unit-length centroids (the cosine and dot metrics), at least 1.
template <class T>
double centroid_reach(const T* initial, std::size_t k, std::size_t d, bool unit) {
  double m = 0;
  for (std::size_t c = 0; c < k; ++c) {
    const double reach = max_abs_of(initial + c * d, d);
    m = c == 0 ? reach : std::fmin(m, reach);
  }
  return unit ? std::fmax(m, 1.0) : m;
}

// v * scale rounded to the nearest integer, ties to even (the default rounding mode), as the
// GPU's __double2ll_rn. scale is a power of two, so the product is exact.
inline std::int64_t to_fixed(double v, double scale) { return std::llrint(v * scale); }

// to_fixed for |v * scale| < 2^51, without a conversion instruction, so that a loop of them
// vectorises: adding 1.5 * 2^52 rounds v * scale to an integer (to nearest, ties to even, as
// llrint) and leaves it in the low bits of the sum's representation.
inline std::int64_t to_fixed_small(double v, double scale) {
  constexpr double kMagic = 0x1.8p52;
  const double shifted = v * scale + kMagic;
  std::int64_t bits, magic_bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  std::memcpy(&magic_bits, &kMagic, sizeof magic_bits);
  return bits - magic_bits;
}

// The update from fixed-point sums, exactly as kernels/kmeans/update.cuh's update_centroids
// computes each value: centroid = (sum * 2^-E) / (count * 2^-W) in double, rounded to T (W = 0
// unweighted: count is the object count); an empty cluster (count 0) keeps its centroid; `unit`:
// re-normalised (cpu_steps.hpp: finish_update). Returns the summed squared shift (in double, in
// cluster order).
template <class T>
double finalize_fixed(const std::int64_t* sums, const std::int64_t* counts, std::size_t k, std::size_t d,
                      double inv_scale, T* centroids, bool unit = false, double inv_weight = 1) {
  std::vector<T> mean(d);
  return finish_update(k, d, centroids, unit, mean.data(), [&](std::size_t c, T* m) {
    if (counts[c] == 0) return false;
    const double count = static_cast<double>(counts[c]) * inv_weight;
    for (std::size_t j = 0; j < d; ++j) m[j] = static_cast<T>(static_cast<double>(sums[c * d + j]) * inv_scale / count);
    return true;
  });
}

}  // namespace km
