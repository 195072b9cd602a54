// fused's tensor path on Hopper's wgmma (kernels/kmeans/6_fused_wgmma.cuh), compiled on its own
// for sm_90a (the arch-specific target wgmma needs) and offered to fused/tensor.cu through this header.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/kmeans/margin.hpp"

namespace km::kernels {
struct Recheck;
}

namespace km::gpu {

struct WgmmaAssign {
  using Kernel = void (*)(const void*, const void*, const float*, const float*, const double*, const double*, double,
                          std::int64_t, int, int, kernels::CandidateBound, std::int32_t*, kernels::Recheck*,
                          std::int64_t*, unsigned long long*, const std::int32_t*, const double*);
  // Its first argument is the objects' operand (the centred TF32 copy, or the float16 objects),
  // its second the centroids' tile image (wgmma_image), its third the same centroids row-major;
  // the last, each object's ceiling (ceiling_kernel's; null for kernel's).
  Kernel kernel = nullptr;  // null: not for this d, or this build or GPU has no sm_90a code
  Kernel ceiling_kernel = nullptr;  // k-means||'s rounds: rows that cannot beat the ceiling left out
  std::size_t smem = 0;
  int threads = 0, rows = 0;  // per block
};

// The wgmma assignment for float objects of d coordinates read from the centred TF32 copy, or
// with f16 from the centred float16 copy (margin.hpp: f16_candidates_bound; no ceiling kernel):
// 32 < d <= 128, d a multiple of 4 (f16: of 8), on a compute capability 9.0 GPU whose code this
// build holds.
WgmmaAssign wgmma_assign(std::size_t d, bool f16 = false);

// The bytes of the tile image of k centroids of d coordinates, and the image itself made from
// the centred centroids (row-major [k][d]: TF32, or with f16 floats that it scales by
// 2^f16_scale_exponent(*cmax2), rounds to float16 and writes back rounded) on `stream`.
std::size_t wgmma_image_bytes(std::size_t k, std::size_t d, bool f16 = false);
void wgmma_image(float* centred, int k, int d, const double* cmax2, void* image, bool f16, cudaStream_t stream);
// Loads wgmma_image's kernel (CUDA's lazy loading would at its first launch).
void wgmma_preload();

}  // namespace km::gpu
