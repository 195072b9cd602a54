// GEMM 5 — regblock: 2-D register blocking. A block of NT threads computes a BM×BN tile;
// each thread owns TM×TN outputs in registers, so one value read from shared memory feeds
// TM (or TN) multiply-adds instead of one. Global loads are 16-byte vectors (when the
// leading dimensions allow) staged through registers into two shared buffers: the next
// tile's loads are in flight while the current tile is multiplied, and one barrier per tile
// suffices. Both shared tiles are stored k-major (transposing A for nn/nt and B for nt) so
// a thread's TM rows and TN columns are contiguous and read as vectors. Each thread's rows
// and columns are split in two halves BM/2 (BN/2) apart, which keeps a warp's vector reads
// of B in distinct banks.
#pragma once

#include "kernels/gemm/common.cuh"
#include "kernels/gemm/launch.cuh"

namespace km::kernels::gemm {

template <Op op, class T, int BM, int BN, int BK, int TM, int TN, int VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) gemm_regblock(GemmArgs<T> g) {
  constexpr int NT = (BM / TM) * (BN / TN);
  constexpr int PAD = 16 / int(sizeof(T));  // rows stay 16-byte aligned; banks shift by 4 words
  constexpr int HM = TM / 2, HN = TN / 2;   // each half of a thread's rows / columns
  constexpr int A_PER = BM * BK / VEC / NT, B_PER = BN * BK / VEC / NT;
  static_assert(BM * BK % (VEC * NT) == 0 && BN * BK % (VEC * NT) == 0, "tile loads must split evenly");
  static_assert(HM * sizeof(T) == 16 && HN * sizeof(T) == 16, "half a thread's rows is one 16-byte vector");
  using V = Vec<T, VEC>;
  using H = Vec<T, HM>;

  __shared__ alignas(16) T as[2][BK][BM + PAD];
  __shared__ alignas(16) T bs[2][BK][BN + PAD];

  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  V ra[A_PER], rb[B_PER];

  auto fetch = [&](int p0) {
#pragma unroll
    for (int q = 0; q < A_PER; ++q) {
      const int c = tid + q * NT;
      int i, p;
      if constexpr (a_k_contiguous<op>) {
        i = row0 + c / (BK / VEC);
        p = p0 + (c % (BK / VEC)) * VEC;
      } else {
        p = p0 + c / (BM / VEC);
        i = row0 + (c % (BM / VEC)) * VEC;
      }
      const std::size_t at = a_k_contiguous<op> ? std::size_t(i) * g.lda + p : std::size_t(p) * g.lda + i;
      if (i < g.m && p < g.k) {
        ra[q] = *reinterpret_cast<const V*>(g.a + at);
      } else {
#pragma unroll
        for (int v = 0; v < VEC; ++v) ra[q].v[v] = T(0);
      }
    }
#pragma unroll
    for (int q = 0; q < B_PER; ++q) {
      const int c = tid + q * NT;
      int j, p;
      if constexpr (b_k_contiguous<op>) {
        j = col0 + c / (BK / VEC);
        p = p0 + (c % (BK / VEC)) * VEC;
      } else {
        p = p0 + c / (BN / VEC);
        j = col0 + (c % (BN / VEC)) * VEC;
      }
      const std::size_t at = b_k_contiguous<op> ? std::size_t(j) * g.ldb + p : std::size_t(p) * g.ldb + j;
      if (j < g.n && p < g.k) {
        rb[q] = *reinterpret_cast<const V*>(g.b + at);
      } else {
#pragma unroll
        for (int v = 0; v < VEC; ++v) rb[q].v[v] = T(0);
      }
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int q = 0; q < A_PER; ++q) {
      const int c = tid + q * NT;
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        if constexpr (a_k_contiguous<op>)
          as[buf][(c % (BK / VEC)) * VEC + v][c / (BK / VEC)] = ra[q].v[v];
        else
          as[buf][c / (BM / VEC)][(c % (BM / VEC)) * VEC + v] = ra[q].v[v];
      }
    }
#pragma unroll
    for (int q = 0; q < B_PER; ++q) {
      const int c = tid + q * NT;
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        if constexpr (b_k_contiguous<op>)
          bs[buf][(c % (BK / VEC)) * VEC + v][c / (BK / VEC)] = rb[q].v[v];
        else
          bs[buf][c / (BN / VEC)][(c % (BN / VEC)) * VEC + v] = rb[q].v[v];
      }
    }
  };

  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  T acc[TM][TN];
#pragma unroll
  for (int r = 0; r < TM; ++r)
#pragma unroll
    for (int c = 0; c < TN; ++c) acc[r][c] = T(0);

  const int tiles = (g.k + BK - 1) / BK;
  fetch(0);
  stash(0);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < tiles) fetch((t + 1) * BK);  // in flight during the multiply below
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      T a[TM], b[TN];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const H va = *reinterpret_cast<const H*>(&as[buf][kk][h * (BM / 2) + ty * HM]);
        const H vb = *reinterpret_cast<const H*>(&bs[buf][kk][h * (BN / 2) + tx * HN]);
#pragma unroll
        for (int e = 0; e < HM; ++e) a[h * HM + e] = va.v[e];
#pragma unroll
        for (int e = 0; e < HN; ++e) b[h * HN + e] = vb.v[e];
      }
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[r][c] += a[r] * b[c];
    }
    if (t + 1 < tiles) stash(buf ^ 1);  // the other buffer: last read before the previous barrier
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int i = row0 + (r / HM) * (BM / 2) + ty * HM + r % HM;
    if (i >= g.m) continue;
#pragma unroll
    for (int c = 0; c < TN; ++c) {
      const int j = col0 + (c / HN) * (BN / 2) + tx * HN + c % HN;
      if (j < g.n) store_d<op>(g, i, j, acc[r][c]);
    }
  }
}


// Tiles: 128×128×8 with 8×8 per thread in float, 64×64×8 with 4×4 in double.
template <class T>
void launch_regblock(const GemmArgs<T>& g, const GpuOptions&, cudaStream_t s, cublasHandle_t) {
  constexpr bool f = sizeof(T) == 4;
  constexpr int BM = f ? 128 : 64, BN = f ? 128 : 64, BK = 8, TM = f ? 8 : 4, TN = f ? 8 : 4, V = 16 / sizeof(T);
  constexpr int threads = (BM / TM) * (BN / TN);
  const dim3 grid = grid_2d(std::size_t(g.n), BN, std::size_t(g.m), BM, "regblock");
  const bool vec = vectorizable(g, V);
  with_op(g.op, [&](auto op) {
    constexpr Op O = decltype(op)::value;
    if (vec)
      gemm_regblock<O, T, BM, BN, BK, TM, TN, V><<<grid, threads, 0, s>>>(g);
    else
      gemm_regblock<O, T, BM, BN, BK, TM, TN, 1><<<grid, threads, 0, s>>>(g);
  });
}

}  // namespace km::kernels::gemm
