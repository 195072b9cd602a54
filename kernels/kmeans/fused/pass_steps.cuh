// The per-pass steps around the scores: the pass's loads straight from x (not TILE), and what
// follows the filter: the warp's re-checks in seq's arithmetic of the objects too close to call,
// and each object's distance to its label (for the inertia).
// The steps take the kernel's variables by reference, as its lambdas do, and are __forceinline__:
// the compiler sees one function.
#pragma once

#include <cstdint>
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/nearest.cuh"

namespace km::kernels {

// Not TILE: the pass's objects straight from x (a whole pass, every pass but the last, without a
// bounds test per object), and (p.prefetch) the warp's next pass into L1.
template <class C>
__device__ __forceinline__ void load_direct_pass(const std::int64_t& base, const std::int64_t& step,
                                                 const bool& dynamic, int* next_chunk_s,
                                                 std::int64_t* warp_first_s, const int& warp, const int& warp_u,
                                                 const int& lane, const int& d, const std::int64_t& n,
                                                 const DeltaPass& p, const typename C::T* __restrict__ const& x,
                                                 std::int32_t* __restrict__ const& labels,
                                                 std::int64_t (&idx)[C::U], bool (&has)[C::U],
                                                 typename C::T (&xr)[C::U][C::MAXD], int (&old)[C::U]) {
  using T = typename C::T;
  constexpr int U = C::U, MAXD = C::MAXD;
  constexpr bool kMmaDynamic = C::kMmaDynamic;
  // A whole pass (every pass but the last) loads without a bounds test per object.
  const T* xb = x + base + threadIdx.x;
  const std::int32_t* lb = labels + base + threadIdx.x;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    idx[u] = base + u * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    has[u] = idx[u] < n;
  }
  // (kMmaDynamic: this warp's 32 objects from base + 32 warp, the others' passes elsewhere.)
  const std::int64_t pass_end =
      kMmaDynamic && dynamic ? base + 32 * (warp_u + 1) : base + static_cast<std::int64_t>(U) * blockDim.x;
  if (pass_end <= n) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      // Coordinate j + 1 a step of n past j: one 64-bit add per load, not a product.
      const T* xo = xb + u * blockDim.x;
#pragma unroll
      for (int j = 0; j < MAXD; ++j, xo += n) xr[u][j] = j < d ? *xo : T(0);
      old[u] = lb[u * blockDim.x];
    }
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const T* xo = xb + u * blockDim.x;
#pragma unroll
      for (int j = 0; j < MAXD; ++j, xo += n) xr[u][j] = has[u] && j < d ? *xo : T(0);
      old[u] = has[u] ? lb[u * blockDim.x] : 0;
    }
  }
  if constexpr (kMmaDynamic)
    if (lane == 0) warp_first_s[warp] = base + warp_u * 32;
  // kMmaDynamic: the next pass is the chunk taken a pass ago (next_chunk_s).
  std::int64_t next = base + step + warp * 32;
  if constexpr (kMmaDynamic)
    if (dynamic) next = static_cast<std::int64_t>(next_chunk_s[warp]) * 32;
  if (p.prefetch) {
    // The warp's next pass: U MAXD coordinates of 32 objects, sizeof(T) / 4 lines each, one
    // prefetch a lane, so that the next pass's loads find them while this one scores (with
    // the tensor-core scores, H100, d = 32, K = 32-64: 2-3% faster in double, 0.6-2.6% in
    // float; level at d = 16).
    constexpr int LPC = static_cast<int>(sizeof(T)) / 4;
    for (int l = lane; l < U * MAXD * LPC; l += 32) {
      const int u = l / (MAXD * LPC), j = (l / LPC) % MAXD, h = l % LPC;
      const std::int64_t i = next + u * static_cast<std::int64_t>(blockDim.x) + h * (32 / LPC);
      if (j < d && i < n) {
        const T* a = x + j * n + i;
        asm volatile("prefetch.global.L1 [%0];" ::"l"(a));
      }
    }
  }
}

// Above d = 4 (not kQueue), the objects too close to call in float are redone by the whole warp,
// one at a time, their coordinates passed through the (not yet used) stage: seq's arithmetic over
// every centroid, a few centroids per lane (nearest.cuh: nearest_warp). One lane's serial re-check,
// 31 lanes waiting, cost the d = 32, K = 64 kernel a quarter of its time in waiting at the closing
// barrier for the warps that drew them (ncu, H100). SHADOW: the object's own coordinates from x
// (p.rows where given), the pass's having come from the float copy.
template <class C>
__device__ __forceinline__ void warp_rechecks(int (&redone)[C::U], typename C::T (&redone_dist)[C::U],
                                              const bool (&has)[C::U], const bool (&close)[C::U],
                                              const std::int64_t (&idx)[C::U],
                                              const typename C::T (&xr)[C::U][C::MAXD],
                                              typename C::T* const& stage, typename C::T* const& s, const int& d,
                                              const int& k, const int& lane, const DeltaPass& p,
                                              const typename C::T* __restrict__ const& x, const std::int64_t& n) {
  using T = typename C::T;
  constexpr int U = C::U, MAXD = C::MAXD;
  constexpr bool SHADOW = C::SHADOW;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    redone[u] = 0;
    redone_dist[u] = 0;
    for (unsigned todo = __ballot_sync(0xffffffffu, has[u] && close[u]); todo; todo &= todo - 1) {
      const int from = __ffs(static_cast<int>(todo)) - 1;
      if constexpr (SHADOW) {
        const std::int64_t at = __shfl_sync(0xffffffffu, idx[u], from);
        if (lane < MAXD)
          stage[lane] = __ldcg(p.rows ? reinterpret_cast<const T*>(p.rows) + at * MAXD + lane
                                      : x + static_cast<std::int64_t>(lane) * n + at);
      } else if (lane == from) {
#pragma unroll
        for (int j = 0; j < MAXD; ++j)
          if (j < d) stage[j] = xr[u][j];
      }
      __syncwarp();
      T dist;
      const int label = nearest_warp<T>(stage, s, d, k, dist);
      if (lane == from) {
        redone[u] = label;
        redone_dist[u] = dist;
      }
      __syncwarp();  // the stage is read before the next object (or a mover) is written there
    }
  }
}

// Object u's distance to its label (and, where it was too close to call in float, the label):
// seq's arithmetic (kQueue: here; else the warp's re-check's), or known already (BALL: the
// distance to the old centroid; kApproxDist: the filter's score where proved exact enough), or
// summed from the centroid's row (SROW) or column. SHADOW: none (the inertia comes from Q).
template <class C>
__device__ __forceinline__ void label_distance(int u, int& label, typename C::T& dist, const bool (&close)[C::U],
                                               unsigned& rechecks, const typename C::T (&xr)[C::U][C::MAXD],
                                               typename C::T* const& s, const int& d, const int& k,
                                               const int (&redone)[C::U], const typename C::T (&redone_dist)[C::U],
                                               const bool (&known)[C::U], const typename C::T (&dold)[C::U],
                                               const float (&adist)[C::kApproxDist ? C::U : 1],
                                               const bool& has_rows, typename C::T* const& srow) {
  using T = typename C::T;
  constexpr int MAXD = C::MAXD, SROW = C::SROW;
  constexpr bool SHADOW = C::SHADOW, kQueue = C::kQueue, kApproxDist = C::kApproxDist;
  if (close[u]) {
    // Too close to call in float: seq's arithmetic over every centroid.
    ++rechecks;
    if constexpr (kQueue) {
      label = nearest_in_registers<T, MAXD>(xr[u], s, d, k, dist);
    } else {
      label = redone[u];
      dist = redone_dist[u];
    }
  } else if constexpr (SHADOW) {
    // (no distance: the iteration's inertia comes from the q sums, SHADOW's Q)
  } else if (known[u]) {
    dist = dold[u];
  } else if (kApproxDist && adist[kApproxDist ? u : 0] >= 0.0f) {
    dist = static_cast<T>(adist[kApproxDist ? u : 0]);  // (float: the same type)
  } else if (SROW > 0 && has_rows) {
    // Its centroid's row, 16 bytes a load; past d both the coordinate and the row hold 0,
    // and fma(0, 0, dist) is dist: the same bits as the sum to d.
    alignas(16) T c[MAXD];
    constexpr int V = 16 / static_cast<int>(sizeof(T));
    const uint4* row = reinterpret_cast<const uint4*>(srow + label * SROW);
#pragma unroll
    for (int q = 0; q < MAXD / V; ++q) {
      const uint4 v = row[q];
      reinterpret_cast<uint4*>(c)[q] = v;
    }
#pragma unroll
    for (int j = 0; j < MAXD; ++j) dist = fused_square_add(xr[u][j] - c[j], dist);
  } else {
    const T* sc = s + label;
#pragma unroll
    for (int j = 0; j < MAXD; ++j, sc += k)
      if (j < d) dist = fused_square_add(xr[u][j] - *sc, dist);
  }
}
}  // namespace km::kernels
