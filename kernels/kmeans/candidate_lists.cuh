// The tensor paths' per-object candidate lists (6_fused_tensor.cuh, 6_fused_wgmma.cuh): the L
// smallest keys an object meets and their centroids, how they are filled and merged, and how a
// complete list settles the object -- its label, or a re-check queued when the margin says the
// keys cannot decide (margin.hpp). Also the tile walk both share (next_tile).
#pragma once

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/kmeans/margin.hpp"

namespace km::kernels {

// The tensor kernels' walk over their tiles (each centroid tile's slices of d in turn, through a
// ring of `stages` shared-memory stages): the stage, slice and centroid tile after the given
// ones, stepped without divisions.
__device__ __forceinline__ void next_tile(int& stage, int& slice, int& ctile, int stages, int slices) {
  stage = stage + 1 == stages ? 0 : stage + 1;
  if (++slice == slices) {
    slice = 0;
    ++ctile;
  }
}

// The tensor kernels' key terms (keyed) are padded with +inf to a multiple of kKeyPad entries, so
// that a tile's keys are read without a bounds test per key (a centroid past k multiplies as
// zeros: its key is +inf, which no list takes).
constexpr int kKeyPad = 512;

// One queued re-check: object i and its `count` candidates (count 0: every centroid, queued
// apart for recheck_all).
constexpr int kMaxCandidates = 3;
struct Recheck {
  std::int64_t i;
  int count;
  int c[kMaxCandidates];
};

// The L smallest keys seen and their centroids, in order (lowest index first on equal keys).
template <class T, int L>
struct TopL {
  T v[L];
  int i[L];
};

template <class T, int L>
__device__ __forceinline__ void top_clear(TopL<T, L>& t) {
#pragma unroll
  for (int q = 0; q < L; ++q) {
    t.v[q] = T(INFINITY);
    t.i[q] = INT_MAX;
  }
}

template <class T>
__device__ __forceinline__ bool key_before(T v, int j, T w, int k) {
  return v < w || (v == w && j < k);
}

template <class T, int L>
__device__ __forceinline__ void top_insert(TopL<T, L>& t, T v, int j) {
  if (!key_before(v, j, t.v[L - 1], t.i[L - 1])) return;
  t.v[L - 1] = v;
  t.i[L - 1] = j;
#pragma unroll
  for (int q = L - 1; q > 0; --q)
    if (key_before(t.v[q], t.i[q], t.v[q - 1], t.i[q - 1])) {
      const T tv = t.v[q];
      const int ti = t.i[q];
      t.v[q] = t.v[q - 1];
      t.i[q] = t.i[q - 1];
      t.v[q - 1] = tv;
      t.i[q - 1] = ti;
    }
}

// top_insert for a centroid j above every index in t (the assignment's own walk, where each
// thread meets its centroids in increasing order): an equal key then goes after, so the test is
// v < the last key alone, and the insertion shifts by value. The per-pair cost of the fold: one
// compare on the common path (the general test with its index tie-break cost ~17 instructions
// a pair; at d = 16 the fold, not the mma, set the pace).
template <class T, int L>
__device__ __forceinline__ void top_push_ascending(TopL<T, L>& t, T v, int j) {
  if (!(v < t.v[L - 1])) return;
  // v's place p is the first q with v < t.v[q]; from the back: entries past p move down one.
#pragma unroll
  for (int q = L - 1; q > 0; --q) {
    if (v < t.v[q - 1]) {
      t.v[q] = t.v[q - 1];
      t.i[q] = t.i[q - 1];
    } else if (v < t.v[q]) {
      t.v[q] = v;
      t.i[q] = j;
    }
  }
  if (v < t.v[0]) {
    t.v[0] = v;
    t.i[0] = j;
  }
}

// Merges a list of other centroids into t.
template <class T, int L>
__device__ __forceinline__ void top_merge(TopL<T, L>& t, const TopL<T, L>& o) {
#pragma unroll
  for (int q = 0; q < L; ++q) top_insert(t, o.v[q], o.i[q]);
}

template <class T, int L>
__device__ __forceinline__ TopL<T, L> top_shfl_xor(const TopL<T, L>& t, int mask) {
  TopL<T, L> o;
#pragma unroll
  for (int q = 0; q < L; ++q) {
    o.v[q] = __shfl_xor_sync(0xffffffffu, t.v[q], mask);
    o.i[q] = __shfl_xor_sync(0xffffffffu, t.i[q], mask);
  }
  return o;
}

// Float's fold of 8 keys of one row (centroids j[0] < ... < j[7], above every index in the
// list): their least first, and only if it beats the list's last are they inserted, in order.
template <int L>
__device__ __forceinline__ void push_keys8(TopL<float, L>& own, const float (&v)[8], const int (&j)[8]) {
  float least = v[0];
#pragma unroll
  for (int e = 1; e < 8; ++e) least = fminf(least, v[e]);
  if (!(least < own.v[L - 1])) return;
#pragma unroll
  for (int e = 0; e < 8; ++e) top_push_ascending(own, v[e], j[e]);
}

// push_keys8 of centroids j0 .. j0 + 7.
template <int L>
__device__ __forceinline__ void push_row8(TopL<float, L>& own, float4 lo, float4 hi, int j0) {
  const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const int j[8] = {j0, j0 + 1, j0 + 2, j0 + 3, j0 + 4, j0 + 5, j0 + 6, j0 + 7};
  push_keys8(own, v, j);
}

// Object i's complete list m: its label is the least key's centroid; if the runner-up lies
// within the margin, it is queued -- with the candidates within the margin when the list's
// last is beyond it (others cannot be), else against every centroid.
// CEILING (margin.hpp: "A ceiling"): the lists were started at each object's T_h, so an entry
// with no centroid (index INT_MAX) stands for keys of rows that cannot beat the ceiling, which
// need no re-check wherever it sits against the margin; a list with no centroid at all gets
// label -1 (no row beats the ceiling), not a re-check against every centroid.
template <class T, int L, bool CEILING = false>
__device__ __forceinline__ void settle_object(const TopL<T, L>& m, std::int64_t i, const CandidateBound& bound,
                                              const double* __restrict__ xc2, double mu_norm, double cmax2,
                                              std::int32_t* __restrict__ labels, Recheck* __restrict__ queue,
                                              std::int64_t* __restrict__ everyone,
                                              unsigned long long* __restrict__ queued) {
  if (m.i[0] == INT_MAX) {
    if (CEILING)
      labels[i] = -1;
    else  // no key listed (a threshold that never failed): seq's formula decides
      everyone[atomicAdd(queued + 1, 1ull)] = i;
    return;
  }
  const double best = static_cast<double>(m.v[0]);
  const double margin = candidate_margin(bound, xc2[i], mu_norm, cmax2, best);
  auto beyond = [&](int c) { return (CEILING && m.i[c] == INT_MAX) || static_cast<double>(m.v[c]) - best > margin; };
  labels[i] = m.i[0];
  if (beyond(1)) return;
  Recheck q{i, 0, {0, 0, 0}};
  if (beyond(L - 1)) {
#pragma unroll
    for (int c = 0; c < L - 1 && c < kMaxCandidates; ++c)
      if (!beyond(c)) q.c[q.count++] = m.i[c];
  }
  if (q.count == 0)
    everyone[atomicAdd(queued + 1, 1ull)] = i;
  else
    queue[atomicAdd(queued, 1ull)] = q;
}

}  // namespace km::kernels
