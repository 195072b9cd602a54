// Unit-length centroids for the cosine and dot metrics, one arithmetic for the host and the
// device so that every implementation stores the same bits.
//
// Both metrics compare an object with centroids of length 1: then
//   |x - c|^2 = |x|^2 - 2 x.c + 1,
// so the smallest squared distance is the largest x.c (dot) and, for |x| = 1, the largest
// cos(x, c) (cosine: the objects are normalised once, before the fit). The assignment is
// therefore the Euclidean one every implementation already makes exactly, against centroids
// that each update re-normalises: c = m / |m| for the cluster's mean m, as spherical k-means.
//
// The arithmetic, fixed: |m|^2 = sum over j in order of m_j * m_j in double, each product and
// sum rounded on its own (no fused multiply-add: the host builds with -ffp-contract=off, the
// device uses the _rn intrinsics), |m| = sqrt in double (correctly rounded on both), and
// c_j = T(m_j / |m|) (a correctly rounded division, then to T); squares outside double's range
// are summed scaled by a power of two (ordered_norm). A mean of length 0 (the
// cluster's objects cancel) leaves the centroid as it was, as an empty cluster does.
#pragma once

#include <cmath>

#include "kernels/kmeans/layouts.hpp"

namespace km::kernels {

KM_HOST_DEVICE inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

KM_HOST_DEVICE inline double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// |v| in double for d values v(0), ..., v(d - 1) (any T), summed in order. Where the squares
// leave [2^-900, 2^900] (double values beyond about 1e±135: the sum overflows to infinity, or
// underflows towards 0 and would make a row of tiny values one of length 0), the same sum over v
// scaled by 2^-e, e the exponent of max |v_j| (exact: a power of two), then scaled back.
template <class Get>
KM_HOST_DEVICE inline double ordered_norm(Get v, int d) {
  constexpr double kLow = 0x1p-900, kHigh = 0x1p+900;
  double s = 0;
  for (int j = 0; j < d; ++j) {
    const double x = static_cast<double>(v(j));
    s = add_rn(s, mul_rn(x, x));
  }
  if (s >= kLow && s <= kHigh) return sqrt(s);
  double largest = 0;
  for (int j = 0; j < d; ++j) largest = fmax(largest, fabs(static_cast<double>(v(j))));
  if (largest == 0 || !(largest <= 1.7976931348623157e308)) return sqrt(s);  // zero; NaN or infinite values
  const int e = ilogb(largest);
  double scaled = 0;
  for (int j = 0; j < d; ++j) {
    const double x = ldexp(static_cast<double>(v(j)), -e);
    scaled = add_rn(scaled, mul_rn(x, x));
  }
  return ldexp(sqrt(scaled), e);
}

// Coordinate j of the unit vector along m (norm = ordered_norm of m, > 0).
template <class T>
KM_HOST_DEVICE inline T unit_coordinate(T m, double norm) {
  return static_cast<T>(static_cast<double>(m) / norm);
}

}  // namespace km::kernels
