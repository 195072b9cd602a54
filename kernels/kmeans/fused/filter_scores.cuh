// The assignment scored in float, one FMA a coordinate: f_c = |c''|^2 - 2 x''.c'' on points
// centred at the centroids' mean, the centroid's index written into the score's low mantissa bits
// for K <= 64 (PACK: then one min tracks value and index, three a centroid with the runner-up).
// margin.hpp (filter_bound) proves how far f may sit from seq's distance; where the runner-up is
// not clear of the winner by that much (a close call), the object is redone in seq's arithmetic
// in T over every centroid, lowest index first. So the labels are seq's, in double too, at
// float's instruction rate.
#pragma once

#include <cstdint>
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/update.cuh"


namespace km::kernels {

// BALL, CELLS (d <= 2): one object's packed score against centroid c folded into the least (b) and
// the runner-up (sc).
template <class C>
__device__ __forceinline__ void score_pair_step(float x0, float x1, int c, float& b, float& sc, float* const& table, const int& mask) {
  constexpr int ROW = C::ROW, MAXD = C::MAXD;
  const float4 v = reinterpret_cast<const float4*>(table + c * ROW)[0];
  float f = fmaf(v.y, x0, v.x);
  if (MAXD > 1) f = fmaf(v.z, x1, f);
  f = __int_as_float((__float_as_int(f) & ~mask) | c);
  sc = fminf(sc, fmaxf(b, f));
  b = fminf(b, f);
}


// ... over every centroid,
template <class C, class ScoreStep>
__device__ __forceinline__ void score_all(float x0, float x1, float& b, float& sc, const int& k, ScoreStep& score_step) {
  b = sc = INFINITY;
  for (int c = 0; c < k; ++c) score_step(x0, x1, c, b, sc);
}

// ... over those of mask m only, lowest index first.
template <class C, class M, class ScoreStep>
__device__ __forceinline__ void score_set(float x0, float x1, M m, float& b, float& sc, ScoreStep& score_step) {
  b = sc = INFINITY;
  for (; m; m &= m - 1) {
    if constexpr (sizeof(m) == 8) score_step(x0, x1, __ffsll(static_cast<long long>(m)) - 1, b, sc);
    else score_step(x0, x1, __ffs(static_cast<int>(m)) - 1, b, sc);
  }
}

// The FMA scores: the first NU slots against every centroid (each table row read once for all of
// them), the least score and the runner-up a slot (!PACK: the least one's centroid in bi).
template <class C, int NU>
__device__ __forceinline__ void score_slots(float* const& table, const int& k, const int& mask,
                                            float (&xf)[C::U][C::MAXD], float (&best)[C::U], float (&second)[C::U],
                                            int (&bi)[C::U]) {
  constexpr int ROW = C::ROW, AOFF = C::AOFF, MAXD = C::MAXD, kChains = C::kChains;
  constexpr bool PACK = C::PACK, kScoreUnroll4 = C::kScoreUnroll4;
          // Centroid c (its table row at rowp) against the slots.
      auto score_centroid = [&](int c, const float* rowp) {
        float a[ROW];
#pragma unroll
        for (int q = 0; q < ROW / 4; ++q) {
          const float4 v = reinterpret_cast<const float4*>(rowp)[q];
          a[4 * q] = v.x;
          a[4 * q + 1] = v.y;
          a[4 * q + 2] = v.z;
          a[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int u = 0; u < NU; ++u) {
          // kChains independent FMA chains (coordinates j = r mod kChains in chain r), then
          // their sum: more in flight for the FMA pipe's latency. filter_bound's error term
          // holds for any order of the d + 1 terms' additions.
          float part[kChains];
#pragma unroll
          for (int r = 0; r < kChains; ++r) part[r] = r == 0 ? a[0] : 0.0f;
#pragma unroll
          for (int j = 0; j < MAXD; ++j) part[j % kChains] = fmaf(a[AOFF + j], xf[u][j], part[j % kChains]);
#pragma unroll
          for (int w = 1; w < kChains; w *= 2)
#pragma unroll
            for (int r = 0; r + w < kChains; r += 2 * w) part[r] += part[r + w];
          float f = part[0];
          if (PACK) {
            f = __int_as_float((__float_as_int(f) & ~mask) | c);
          } else if (f < best[u]) {
            bi[u] = c;
          }
          second[u] = fminf(second[u], fmaxf(best[u], f));
          best[u] = fminf(best[u], f);
        }
      };
      if constexpr (kScoreUnroll4) {
        const float* rowp = table;
#pragma unroll 4
        for (int c = 0; c < k; ++c, rowp += ROW) score_centroid(c, rowp);
      } else {
        for (int c = 0; c < k; ++c) score_centroid(c, table + c * ROW);
      }
}
// The pass's objects as the filter scores them: x'' = x - centre in float (SHADOW: the float
// copy's, rounded once as x - centre would be), |x''|^2, the top two reset. FILL: the copy's
// values written, a coalesced row of 32 floats a coordinate, and each object's q = |x - z|^2 in
// q_fixed's arithmetic and order (z = the centre) added to fill_q. CELLS: none (scored, if at all,
// in the hard objects' rounds, from x again).
template <class C, class Centre>
__device__ __forceinline__ void centre_pass_objects(const typename C::T (&xr)[C::U][C::MAXD],
                                                    const float (&xsh)[C::SHADOW ? C::U : 1][C::MAXD],
                                                    const bool (&has)[C::U], const std::int64_t (&idx)[C::U],
                                                    Centre& centre, const DeltaPass& p, const std::int64_t& n,
                                                    float (&xf)[C::U][C::MAXD], float (&nx)[C::U],
                                                    float (&best)[C::U], float (&second)[C::U], int (&bi)[C::U],
                                                    unsigned long long& fill_q) {
  constexpr int U = C::U, MAXD = C::MAXD;
  constexpr bool CELLS = C::CELLS, SHADOW = C::SHADOW, FILL = C::FILL;
  [[maybe_unused]] double fq[FILL ? U : 1];  // (FILL: each object's q)
#pragma unroll
  for (int u = 0; u < U; ++u) {
    nx[u] = 0;
    if constexpr (FILL) fq[u] = 0;
#pragma unroll
    for (int j = 0; j < MAXD; ++j) {
      xf[u][j] = 0;
      if (CELLS) continue;  // scored, if at all, in the hard objects' rounds, from x again
      if constexpr (SHADOW) xf[u][j] = xsh[u][j];  // (x - z rounded once, as x - centre(j) would be)
      else xf[u][j] = static_cast<float>(xr[u][j] - centre(j));
      if constexpr (FILL) {
        // The copy's value, a coalesced row of 32 floats a coordinate, and q in q_fixed's
        // arithmetic and order (z = the centre).
        const double e = static_cast<double>(xr[u][j]) - static_cast<double>(centre(j));
        fq[u] = fma(e, e, fq[u]);
        if (has[u]) p.fill_out[static_cast<std::int64_t>(j) * n + idx[u]] = xf[u][j];
      }
      // Pinned in a register: otherwise nvcc recomputes x'' (a subtraction and a conversion,
      // both on the slow FP64 pipe in double) inside the loop over the centroids.
      asm volatile("" : "+f"(xf[u][j]));
      nx[u] = fmaf(xf[u][j], xf[u][j], nx[u]);
    }
    if constexpr (FILL)
      if (has[u]) fill_q += to_fixed(fq[u], p.inertia_scale);
    best[u] = second[u] = INFINITY;
    bi[u] = 0;
  }
}
}  // namespace km::kernels
