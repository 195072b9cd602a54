// BALL (d <= 2, 32 < K <= 64, where it measured faster): Elkan's test first. An object nearer its
// old centroid than half the distance from that centroid to the next is not scored at all; the
// others are listed a warp and scored one a lane (the kernel's pass loop).
#pragma once

#include <cmath>

namespace km::kernels {

// The prologue: an object within half the distance from its centroid c to c's nearest other
// centroid is nearer c than any other (Elkan).
template <class C>
__device__ __forceinline__ void ball_radii(const typename C::T* s, double* ball, int k, int d) {
  using T = typename C::T;
  // Elkan's test: an object within half the distance from its centroid c to c's nearest other
  // centroid is nearer c than any other. ball[c] = (1 - eps) min_c' |c - c'|^2 / 4 in double,
  // eps = 64 (d + 2) u_T far above the roundings of this sum and of the object's distance (so
  // seq's sums order them the same way, with no tie); 0 (no object passes) for coincident or
  // subnormal-close centroids. K <= 64 here.
  const double eps = 64.0 * (d + 2) * (sizeof(T) == 8 ? 0x1p-53 : 0x1p-24);
  for (int c = threadIdx.x; c < k; c += blockDim.x) {
    double m = INFINITY;
    for (int o = 0; o < k; ++o) {
      if (o == c) continue;
      double q = 0;
      for (int j = 0; j < d; ++j) {
        const double e = static_cast<double>(s[j * k + c]) - static_cast<double>(s[j * k + o]);
        q += e * e;
      }
      m = fmin(m, q);
    }
    ball[c] = m > 1e-250 && m < INFINITY ? 0.25 * m * (1 - eps) : 0.0;
  }
}

}  // namespace km::kernels
