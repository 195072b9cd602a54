// SHADOW (double, the staged kernel at d = 16, K 9-16, by default once an iteration moved at most
// 25%: one_pass.hpp, fill_start, shadow_on): a float copy of x - z, z fixed for the fit, replaces x in
// the passes; FILL: the kernel one iteration before writes it. See the kernel's header comment.
#pragma once

#include "kernels/kmeans/counters.cuh"
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

// An object's q = |x - z|^2 in fixed point (FILL: the copy's Q), the same bits wherever it is summed.
template <class C>
__device__ __forceinline__ unsigned long long object_q_fixed(const typename C::T* v, const int& d, const double (&zs)[C::MAXD],
                                                     const DeltaPass& p) {
  constexpr int MAXD = C::MAXD;
  double q = 0;
#pragma unroll
  for (int j = 0; j < MAXD; ++j) {
    if (j < d) {
      const double e = static_cast<double>(v[j]) - zs[j];
      q = fma(e, e, q);
    }
  }
  return to_fixed(q, p.inertia_scale);
}

// SHADOW: the movers deferred a pass (their rows of x by cp.async into the warp's ring) summed, a
// lane a coordinate.
template <class C, class MoveCoordinate>
__device__ __forceinline__ void sum_deferred_movers(const int& lane, int& deferred, uint2* const& ring_entries,
                                             typename C::T* const& ring_rows, MoveCoordinate& move_coordinate) {
  constexpr int MAXD = C::MAXD;
  constexpr int kPer = 32 / MAXD;
  const int slot = lane / MAXD, j = lane % MAXD;
  for (int m = slot; m - slot < deferred; m += kPer) {
    if (m < deferred) {
      const uint2 e = ring_entries[m];
      move_coordinate(e, j, ring_rows[m * MAXD + j]);
    }
  }
  deferred = 0;
}

}  // namespace km::kernels
