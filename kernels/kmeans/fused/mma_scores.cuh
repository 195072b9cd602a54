// MMA (d 9-32, K <= 64, by default where measured faster: fused_plan.cpp): the scores on the tensor
// cores. The warp's objects as TF32 rows through the stage, mma.m16n8k8 against the centroids'
// fragments kept in shared memory in fragment order, FP32 accumulators started at |c''|^2, each
// lane's top two merged over its quad. The objects' TF32 operands take one integer add each
// (gemm::MmaTf32m16n8k8::convert_half_up). TF32's rounding widens the margin (margin.hpp:
// filter_bound with mma; its TF32 term charged as 2 |x''| (2^-10 R'' + D), D the block's
// centroids' own largest TF32 rounding: mma_root2), so a few percent of the objects (uniform
// data, d = 32, K = 64) are scored again with FMAs by the whole warp (the FMA filter's arithmetic
// and margin; JSON rescored) and only the FMA filter's close calls reach seq's arithmetic.
// Measured (H100, 256 MB): d = 32, K = 64 0.64x the FMA scores' time in float, 0.71x in double;
// level at K = 16, where it is off. Compiled out in turn, the re-scores cost about a tenth of the
// time, the tensor-core products nothing measurable.
#pragma once

#include <cfloat>
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/fused/primitives.cuh"
#include "kernels/kmeans/margin.hpp"

namespace km::kernels {

// The warp's 32 U objects against every centroid on the tensor cores (mma.m16n8k8, TF32 operands,
// FP32 accumulators started at |c''|^2): each object's x'' goes to the stage as a row of MAXD + 4
// floats (fragment reads without bank conflicts; rounded to TF32 as they are read, so that the
// rows stay x'' for the FMA re-score), the table's fragments give -2 c'' (rounded likewise) and
// |c''|^2; each lane keeps the top two of its 2 x (K / 8) scores a row of an m-tile, its quad
// merges them, and the results reach the objects' lanes through the movers' queue (not yet in
// use). The filter's margin is widened for the TF32 operands and the tensor cores' accumulation
// (margin.hpp: filter_bound).
template <class C>
__device__ __forceinline__ void mma_warp_scores(const float (&xv)[C::U][C::MAXD], float (&out_best)[C::U],
                                                float (&out_second)[C::U], typename C::T* const& stage,
                                                float2* const& btab, float4* const& ctab, uint2* const& queue, int k,
                                                const int& mask, const int& lane) {
  constexpr int U = C::U, MAXD = C::MAXD, KS = C::KS, RS = C::RS, MT = C::MT;
  float* xs = reinterpret_cast<float*>(stage);
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int q = 0; q < MAXD / 4; ++q)
      reinterpret_cast<float4*>(xs + (u * 32 + lane) * RS)[q] =
          make_float4(xv[u][4 * q], xv[u][4 * q + 1], xv[u][4 * q + 2], xv[u][4 * q + 3]);
  __syncwarp();
  const int g = lane >> 2, t = lane & 3;
  // The A fragments of every m-tile and k-step, held through the loop over the centroids.
  unsigned a[MT][KS][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const float* r0 = xs + (16 * mt + g) * RS + 8 * ks + t;
      a[mt][ks][0] = Tf32Mma::convert_half_up(r0[0]);
      a[mt][ks][1] = Tf32Mma::convert_half_up(r0[8 * RS]);
      a[mt][ks][2] = Tf32Mma::convert_half_up(r0[4]);
      a[mt][ks][3] = Tf32Mma::convert_half_up(r0[8 * RS + 4]);
    }
  // Each lane's running top two per row it holds (row g and g + 8 of each m-tile).
  float top[MT][2], run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) top[mt][0] = top[mt][1] = run[mt][0] = run[mt][1] = INFINITY;
  // Two n-tiles (16 centroids) at a time: 2 MT independent accumulators in flight, the first
  // k-step's started from |c''|^2. (Software-pipelined, the next pair's products issued before
  // this pair's scores were folded in, it took 1.048x the time at d = 32, K = 64 in float under a
  // 128-register cap (165 registers without it: one block an SM) and 1.56x at d = 16, K = 64;
  // H100.)
#pragma unroll 1
  for (int n0 = 0; n0 < k; n0 += 16) {
    const float2* bt = btab + (n0 / 8) * KS * 32 + lane;
    // The pair of n-tiles' products into out.
    auto products = [&](float (&out)[2][MT][4]) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          const float2 bv = bt[(p * KS + ks) * 32];
          const unsigned b[2] = {__float_as_uint(bv.x), __float_as_uint(bv.y)};
          const float4 cc = ks == 0 ? ctab[(n0 / 8 + p) * 32 + lane] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            if (ks == 0) Tf32Mma::mma_from(out[p][mt], a[mt][ks], b, cc);
            else Tf32Mma::mma(out[p][mt], a[mt][ks], b);
          }
        }
      }
    };
    float acc[2][MT][4];
    products(acc);
    // Columns past K hold FLT_MAX (B = 0 there): never a winner; the runner-up only at K = 1.
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float f =
                __int_as_float((__float_as_int(acc[p][mt][2 * h + e]) & ~mask) | (n0 + 8 * p + 2 * t + e));
            run[mt][h] = fminf(run[mt][h], fmaxf(top[mt][h], f));
            top[mt][h] = fminf(top[mt][h], f);
          }
  }
  float2* res = reinterpret_cast<float2*>(queue);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float b = top[mt][h], sc = run[mt][h];
#pragma unroll
      for (int off = 1; off < 4; off *= 2) {
        const float ob = __shfl_xor_sync(0xffffffffu, b, off), os = __shfl_xor_sync(0xffffffffu, sc, off);
        sc = fminf(fmaxf(b, ob), fminf(sc, os));
        b = fminf(b, ob);
      }
      if (t == 0) res[16 * mt + 8 * h + g] = make_float2(b, sc);
    }
  }
  __syncwarp();
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const float2 mine = res[u * 32 + lane];
    out_best[u] = mine.x;
    out_second[u] = mine.y;
  }
  __syncwarp();  // the results read before the queue takes the movers, the stage read before it is reused
}

// The prologue's fragments (layouts.hpp: delta_mma_table_bytes): the B operands and |c''|^2 in
// fragment order, as float4s {c0, c1, c0, c1} (the accumulators' start, both rows, in one load and
// the mma's C registers as loaded, where a float2 took four register copies a pair of tiles).
template <class C>
__device__ __forceinline__ void mma_tables(const float* table, float2* btab, float4* ctab, int k, float& rounding_shared) {
  constexpr int KS = C::KS, ROW = C::ROW, AOFF = C::AOFF, MAXD = C::MAXD;
  // Lane g, t of n-tile nt, k-step ks: B = -2 c'' of centroid 8 nt + g at coordinates 8 ks + t
  // and + 4, rounded to TF32 (0 past K); |c''|^2 of centroids 8 nt + 2 t and + 1 (FLT_MAX past K).
  const int tiles = (k + 15) / 16 * 2;
  for (int e = threadIdx.x; e < tiles * KS * 32; e += blockDim.x) {
    const int l = e & 31, ks = (e >> 5) % KS, c = 8 * (e / (32 * KS)) + (l >> 2);
    const float* row = table + c * ROW + AOFF + 8 * ks + (l & 3);
    btab[e] = c < k ? make_float2(__uint_as_float(Tf32Mma::convert(row[0])), __uint_as_float(Tf32Mma::convert(row[4])))
                    : make_float2(0.0f, 0.0f);
  }
  for (int e = threadIdx.x; e < tiles * 32; e += blockDim.x) {
    const int c = 8 * (e >> 5) + 2 * (e & 3);
    const float c0 = c < k ? table[c * ROW] : FLT_MAX, c1 = c + 1 < k ? table[(c + 1) * ROW] : FLT_MAX;
    ctab[e] = make_float4(c0, c1, c0, c1);
  }
  // Each centroid's B operands' roundings, sum_p (ã_p - a_p)^2 (each difference exact), their
  // largest for the margin's TF32 term (margin.hpp: mma_root2).
  for (int c = threadIdx.x; c < k; c += blockDim.x) {
    const float* row = table + c * ROW + AOFF;
    float sum = 0;
#pragma unroll 8
    for (int j = 0; j < MAXD; ++j) {
      const float rounded = __uint_as_float(Tf32Mma::convert(row[j])) - row[j];
      sum = fmaf(rounded, rounded, sum);
    }
    atomicMax(reinterpret_cast<int*>(&rounding_shared), __float_as_int(sum));  // >= 0: int order
  }
  __syncthreads();
}

// The objects the tensor-core scores could not call, scored again with FMAs by the whole warp (a
// centroid or two per lane, the FMA filter's arithmetic and margin) on their x'' still in the
// stage: most are called there (at d = 32, K = 64 about 40 times fewer objects are too close for
// the FMA scores than for the TF32 ones). Called ones leave `close` with their label in `cand`.
template <class C>
__device__ __forceinline__ void mma_fma_rescores(typename C::T* const& stage, const bool (&has)[C::U],
                                                 bool (&close)[C::U], int (&cand)[C::U], const float (&nx)[C::U],
                                                 const float& r2, const int& lane, unsigned& rescores,
                                                 float* const& table, const int& k, const int& mask,
                                                 const DeltaPass& p) {
  constexpr int U = C::U, MAXD = C::MAXD, RS = C::RS, ROW = C::ROW, AOFF = C::AOFF, kChains = C::kChains;
  const float* xs = reinterpret_cast<const float*>(stage);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    for (unsigned todo = __ballot_sync(0xffffffffu, has[u] && close[u]); todo; todo &= todo - 1) {
      const int from = __ffs(static_cast<int>(todo)) - 1;
      if (lane == from) ++rescores;
      float xo[MAXD];
#pragma unroll
      for (int q = 0; q < MAXD / 4; ++q) {
        const float4 v = reinterpret_cast<const float4*>(xs + (u * 32 + from) * RS)[q];
        xo[4 * q] = v.x;
        xo[4 * q + 1] = v.y;
        xo[4 * q + 2] = v.z;
        xo[4 * q + 3] = v.w;
      }
      // (K <= 64: centroids lane and lane + 32, their chains side by side, not one loop
      // iteration after the other; the top two of the pair as that loop's.)
      auto fma_key = [&](int c) {
        if (c >= k) return INFINITY;
        const float* row = table + c * ROW;
        float part[kChains];
#pragma unroll
        for (int r = 0; r < kChains; ++r) part[r] = r == 0 ? row[0] : 0.0f;
#pragma unroll
        for (int j = 0; j < MAXD; ++j) part[j % kChains] = fmaf(row[AOFF + j], xo[j], part[j % kChains]);
#pragma unroll
        for (int w = 1; w < kChains; w *= 2)
#pragma unroll
          for (int r = 0; r + w < kChains; r += 2 * w) part[r] += part[r + w];
        return __int_as_float((__float_as_int(part[0]) & ~mask) | c);
      };
      const float f0 = fma_key(lane), f1 = fma_key(lane + 32);
      float b = fminf(f0, f1), sc = fmaxf(f0, f1);
      if constexpr (MAXD == 32) {
        // The warp's top two by two warp reductions (REDUX) of the keys as ordered integers
        // (margin.hpp: ordered_key; CPU-tested, Keys.TopTwoByTwoMinima),
        // not five rounds of shuffles: the least key, then the least of each lane's other one
        // (its runner-up in the lane holding the least, its best elsewhere). The keys are
        // distinct (the index in their bits), so these are the winner and runner-up the rounds
        // find. (At width 16 the staged kernel spilled more with it, and it measured slower.)
        const unsigned least = __reduce_min_sync(0xffffffffu, ordered_key(b));
        const unsigned next = __reduce_min_sync(0xffffffffu, second_key_operand(b, sc, least));
        b = key_from_ordered(least);
        sc = key_from_ordered(next);
      } else {
#pragma unroll
        for (int off = 16; off > 0; off /= 2) {
          const float ob = __shfl_xor_sync(0xffffffffu, b, off), os = __shfl_xor_sync(0xffffffffu, sc, off);
          sc = fminf(fmaxf(b, ob), fminf(sc, os));
          b = fminf(b, ob);
        }
      }
      if (lane == from && sc - b > p.fma_factor * (nx[u] + r2) + p.tiny) {
        close[u] = false;
        cand[u] = __float_as_int(b) & mask;
      }
    }
  }
  __syncwarp();  // the stage's rows read before the re-check below writes there
}
}  // namespace km::kernels
