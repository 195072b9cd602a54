// The delta kernel's prologue (6_fused_delta.cuh), the steps that are not a feature's: the first
// passes into L2, the block's state from the centroids (and CELLS: the cell table), the centroids'
// rows, the centre, the score table. Moved as they were from the kernel: the same statements in
// the same order.
#pragma once

#include <cstdint>

#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/fused/primitives.cuh"

namespace km::kernels {

// Above d = 2 (SROW > 0), the centroids as rows [k][SROW] from the shared copy, read in its order
// (t = j k + c: no bank conflicts; read in the rows' order, a stride of k, 32 lanes hit one bank at
// K = 64), and zero past d.
template <class C>
__device__ __forceinline__ void centroid_rows(bool has_rows, int k, int d, typename C::T* srow,
                                              const typename C::T* s) {
  using T = typename C::T;
  constexpr int SROW = C::SROW;
  if (has_rows) {
    for (int t = threadIdx.x; t < k * d; t += blockDim.x) srow[(t % k) * SROW + t / k] = s[t];
    for (int t = threadIdx.x; t < k * (SROW - d); t += blockDim.x) srow[(t / (SROW - d)) * SROW + d + t % (SROW - d)] = T(0);
    __syncthreads();
  }
}

// The first passes into L2.
template <class C>
__device__ __forceinline__ void prefetch_first_passes(const DeltaPass& p, const typename C::T* x, std::int64_t n,
                                                      int d) {
  using T = typename C::T;
  constexpr int U = C::U;
  constexpr bool SHADOW = C::SHADOW;
  // The block's first passes (blockDim U objects each, d rows of x [d][n]) into L2 while the
  // kernel before ends: one pass by default (H100, 10 iterations: 0.96-0.98x the time at d = 16
  // and 32 in double and at d = 16 in float, level elsewhere; two to four passes level or up to
  // 1.03x slower). (SHADOW: of the float copy, which the passes
  // read, not of x; the kernel before may be writing it: L2 holds the lines either way.)
  constexpr int kElem = SHADOW ? static_cast<int>(sizeof(float)) : static_cast<int>(sizeof(T));
  const char* const from = SHADOW ? reinterpret_cast<const char*>(p.shadow) : reinterpret_cast<const char*>(x);
  const int per_line = 128 / kElem;
  const int lines = (static_cast<int>(blockDim.x) * U + per_line - 1) / per_line;
  for (int pass = 0; pass < p.prefetch_first; ++pass) {
    const std::int64_t first = (static_cast<std::int64_t>(pass) * gridDim.x + blockIdx.x) * blockDim.x * U;
    for (int t = threadIdx.x; t < lines * d; t += blockDim.x) {
      const std::int64_t i = first + static_cast<std::int64_t>(t % lines) * per_line;
      if (i < n)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(from + (static_cast<std::int64_t>(t / lines) * n + i) * kElem));
    }
  }
}

// The block's state: the centroids into s, its sums and counts zeroed (CELLS: and the cell table
// with its masks into cells_s; SHADOW: z).
template <class C>
__device__ __forceinline__ void load_block_state(const DeltaPass& p, const typename C::T* centroids, int k, int d,
                                                 int cell_side, unsigned long long* dsums, int* dcounts,
                                                 typename C::T* s, unsigned char* cells_s, double* zs) {
  using T = typename C::T;
  constexpr int MAXD = C::MAXD;
  constexpr bool CELLS = C::CELLS, SHADOW = C::SHADOW;
  (void)cell_side;
  (void)cells_s;
  if constexpr (CELLS) {
    // The centroids, the table and the masks in one batch (cells_s and masks_s are adjacent:
    // the masks start side^2 bytes after the table, a multiple of 16): one L2 round trip where
    // each took its own (H100, 2^24 x 2, K = 16: 0.99x the time in both precisions).
    const int words = cell_side * cell_side / 16;  // side a multiple of 4 (host)
    const int all = p.cell_masks ? 3 * words : words, kd = k * d;
    for (int t0 = static_cast<int>(threadIdx.x); t0 < max(all, kd); t0 += 8 * static_cast<int>(blockDim.x)) {
      uint4 w[8];
      T c[8];
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        const int t = t0 + b * static_cast<int>(blockDim.x);
        if (t < all)
          w[b] = t < words ? reinterpret_cast<const uint4*>(p.cells)[t]
                           : reinterpret_cast<const uint4*>(p.cell_masks)[t - words];
        if (t < kd) c[b] = centroids[t];
      }
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        const int t = t0 + b * static_cast<int>(blockDim.x);
        if (t < all) reinterpret_cast<uint4*>(cells_s)[t] = w[b];
        if (t < kd) {
          dsums[t] = 0;
          s[t] = c[b];
        }
      }
    }
  } else {
    block_batched<8>(k * d, [&](int t) { return centroids[t]; }, [&](int t, T v) {
      dsums[t] = 0;
      s[t] = v;
    });
  }
  for (int t = threadIdx.x; t < k; t += blockDim.x) dcounts[t] = 0;
  if (SHADOW)
    for (int j = threadIdx.x; j < MAXD; j += blockDim.x) zs[j] = j < d ? p.z[j] : 0.0;
}

// The centre: the centroids' mean, summed in index order (any point would be exact; the mean
// keeps |x''| and |c''|, and with them the filter's margin, small); CELLS: the centroids again as
// pairs.
template <class C>
__device__ __forceinline__ void block_centre(const DeltaPass& p, int k, int d, const typename C::T* s,
                                             const typename C::T* srow, bool has_rows, typename C::T* mu,
                                             typename C::T* cpair) {
  using T = typename C::T;
  constexpr int MAXD = C::MAXD, SROW = C::SROW;
  constexpr bool CELLS = C::CELLS, SHADOW = C::SHADOW, FILL = C::FILL;
  (void)srow;
  (void)has_rows;
  for (int j = threadIdx.x; j < MAXD; j += blockDim.x) {
    T m = 0;
    if (j < d) {
      if (SROW > 0 && has_rows)
        for (int c = 0; c < k; ++c) m += srow[c * SROW + j];
      else
        for (int c = 0; c < k; ++c) m += s[j * k + c];
      m /= static_cast<T>(k);
    }
    // (SHADOW: z, the point the float copy was centred on, fixed for the fit; any point keeps
    // the filter exact, and z is the writer's centroids' mean: FILL.)
    mu[j] = SHADOW ? static_cast<T>(j < d ? p.z[j] : 0.0) : m;
    if (FILL && blockIdx.x == 0 && j < d) p.fill_z[j] = static_cast<double>(m);  // (FILL: the copy's z)
  }
  // CELLS: the centroids again as pairs (c_0, c_1), one load a labelled object (the lean passes).
  if (CELLS)
    for (int c = threadIdx.x; c < k; c += blockDim.x) {
      cpair[2 * c] = s[c];
      cpair[2 * c + 1] = s[k + c];
    }
}

// The score table's rows (|c''|^2, then -2 c'' from AOFF, zero elsewhere) and their largest
// |c''|^2 into r2_shared.
template <class C>
__device__ __forceinline__ void score_table_rows(int k, int d, const typename C::T* s, const typename C::T* mu,
                                                 float* table, float& r2_shared) {
  constexpr int MAXD = C::MAXD, ROW = C::ROW, AOFF = C::AOFF;
  for (int c = threadIdx.x; c < k; c += blockDim.x) {
    float* row = table + c * ROW;
    double cc = 0;
#pragma unroll
    for (int j = 0; j < MAXD; ++j) {
      const float v = j < d ? static_cast<float>(s[j * k + c] - mu[j]) : 0.0f;
      row[AOFF + j] = -2.0f * v;
      cc += static_cast<double>(v) * v;
    }
    for (int j = 1; j < AOFF; ++j) row[j] = 0;
    for (int j = AOFF + MAXD; j < ROW; ++j) row[j] = 0;
    row[0] = static_cast<float>(cc);
    atomicMax(reinterpret_cast<int*>(&r2_shared), __float_as_int(row[0]));  // cc >= 0: int order
  }
}

}  // namespace km::kernels
