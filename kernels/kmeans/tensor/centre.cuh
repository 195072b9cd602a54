// fused's tensor path, its operands (6_fused_tensor.cuh): the data's and the centroids' rows
// centred on the data's mean mu, as fused_tensor_assign and the margin (margin.hpp) read them.
//
//   centred_row_norms    |x - mu|^2 of every object; with `operand`, the centred TF32 copy.
//   centre_centroids     c' = c - mu, the key terms and the largest |c'|^2.
//   centred_abs_max, float16_centred_copy   the float16 operand's scale, and the operand.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/kmeans/update.cuh"

namespace km::kernels {

// |x - mu|^2 of every object (row-major [n][d]), in double: one warp per object. With
// `rounded`, of x' = x - mu rounded in T, as the assignment kernel forms it. With `operand`
// (O = float), also x' rounded on to TF32 (cvt.rna of x' in float), the TF32 assignment's A
// operand exactly as it would form it from x and mu, for its ldmatrix loads: float objects
// (O = T), or double ones scored on TF32 candidates (margin.hpp: tf32_candidates_bound).
// With object_q (the movers' scheme), also each object's q = sum of to_fixed((x_j - z_j)^2)
// at the inertia's scale (integers: the same bits in any order).
template <class T, class O = T>
__global__ void centred_row_norms(const T* __restrict__ x, const T* __restrict__ mu, std::int64_t n, int d,
                                  bool rounded, double* __restrict__ out, O* __restrict__ operand,
                                  const double* __restrict__ z = nullptr, double inertia_scale = 0,
                                  unsigned long long* __restrict__ object_q = nullptr) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < n; i += warps) {
    double s = 0;
    unsigned long long q = 0;
    for (int p = lane; p < d; p += 32) {
      if (object_q) {
        const double e = static_cast<double>(x[i * d + p]) - z[p];
        q += to_fixed(e * e, inertia_scale);
      }
      const T xr = x[i * d + p] - mu[p];
      const double v =
          rounded ? static_cast<double>(xr) : static_cast<double>(x[i * d + p]) - static_cast<double>(mu[p]);
      s += v * v;
      if constexpr (sizeof(O) == 4)
        if (operand) {
          unsigned r;
          asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(static_cast<float>(xr)));
          operand[i * d + p] = __uint_as_float(r);
        }
    }
    for (int off = 16; off > 0; off /= 2) {
      s += __shfl_down_sync(0xffffffffu, s, off);
      q += __shfl_down_sync(0xffffffffu, q, off);
    }
    if (lane == 0 && object_q) object_q[i] = q;
    if (lane == 0) out[i] = s;
  }
}

// c' = c - mu (rounded in T; with O = float stored rounded on to TF32, the mma's operand) of
// every centroid, its key term |c'|^2 + 2 mu.c' (or |c'|^2) summed in T and stored in O, and the
// largest |c'|^2 in double into *cmax2 (cleared by the caller): one warp per centroid. O = T,
// or double centroids for TF32 candidates (O = float). The maximum of non-negative doubles is
// the maximum of their bit patterns: one integer atomicMax.
template <class T, class O = T>
__global__ void centre_centroids(const T* __restrict__ centroids, const T* __restrict__ mu, int k, int d,
                                 bool with_mu_term, O* __restrict__ centred, O* __restrict__ keyed, double* cmax2) {
  const int warp = static_cast<int>((static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (warp >= k) return;
  const std::int64_t at = static_cast<std::int64_t>(warp) * d;
  T s = 0, m = 0;
  double sd = 0;
  for (int p = lane; p < d; p += 32) {
    const T v = centroids[at + p] - mu[p];
    if constexpr (sizeof(O) == 4) {  // the TF32 operand, rounded once here (cvt.rna), not per warp and tile
      unsigned r;
      asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(static_cast<float>(v)));
      centred[at + p] = __uint_as_float(r);
    } else {
      centred[at + p] = v;
    }
    s += v * v;
    m += mu[p] * v;
    sd += static_cast<double>(v) * static_cast<double>(v);
  }
  for (int off = 16; off > 0; off /= 2) {
    s += __shfl_down_sync(0xffffffffu, s, off);
    m += __shfl_down_sync(0xffffffffu, m, off);
    sd += __shfl_down_sync(0xffffffffu, sd, off);
  }
  if (lane == 0) {
    keyed[warp] = static_cast<O>(with_mu_term ? s + 2 * m : s);
    // Bound the rounding of sd itself (relative d * 2^-53) so the maximum is an upper bound.
    const double up = sd * (1 + (d + 2) * 1.2e-16);
    atomicMax(reinterpret_cast<unsigned long long*>(cmax2), static_cast<unsigned long long>(__double_as_longlong(up)));
  }
}

// The largest |x'_p| = |fl(x_p - mu_p)| of the objects (row-major [n][d]) as a float's bits into
// *out (cleared by the caller; non-negative floats order as their bits): the float16 copy's scale.
template <class T>
__global__ void centred_abs_max(const T* __restrict__ x, const T* __restrict__ mu, std::int64_t n, int d,
                                unsigned* __restrict__ out) {
  float m = 0.f;
  const std::int64_t count = n * d;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(static_cast<float>(x[i] - mu[i % d])));
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

// The float16 operand's row stride: d rounded up to whole 16-byte chunks (8 values), as the
// wgmma kernel's copies read them; rows of d % 8 = 4 end in 4 zeros.
__host__ __device__ constexpr std::size_t float16_row_stride(std::size_t d) { return (d + 7) / 8 * 8; }

// The float16 operand of the objects: x' = fl(x - mu) times `scale` (2^ex, margin.hpp:
// f16_candidates_bound) rounded to float16 (cvt.rn), as bits, row-major [n][float16_row_stride(d)],
// zeros past d.
template <class T>
__global__ void float16_centred_copy(const T* __restrict__ x, const T* __restrict__ mu, std::int64_t n, int d,
                                     float scale, unsigned short* __restrict__ out) {
  const auto ld = static_cast<std::int64_t>(float16_row_stride(static_cast<std::size_t>(d)));
  const std::int64_t count = n * ld;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / ld;
    const int p = static_cast<int>(i - row * ld);
    out[i] = p < d ? __half_as_ushort(__float2half_rn(static_cast<float>(x[row * d + p] - mu[p]) * scale)) : 0;
  }
}

}  // namespace km::kernels
