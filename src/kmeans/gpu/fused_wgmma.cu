// fused's wgmma assignment, the one translation unit built for sm_90a (CMakeLists.txt:
// kmeans_wgmma). Everything else stays portable sm_90 code.
#include "kmeans/gpu/fused_wgmma.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/kmeans/6_fused_wgmma.cuh"
#include "cuda/check.hpp"

namespace km::gpu {

WgmmaAssign wgmma_assign(std::size_t d) {
  using S = kernels::WgmmaAssignShape;
  WgmmaAssign r;
  if (d <= 32 || d > static_cast<std::size_t>(S::MAX_D) || d % 4 != 0) return r;
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess || major != 9 ||
      minor != 0) {
    cudaGetLastError();
    return r;
  }
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernels::fused_wgmma_assign<S, false>) != cudaSuccess) {  // no sm_90a image
    cudaGetLastError();
    return r;
  }
  r.kernel = kernels::fused_wgmma_assign<S, false>;
  r.ceiling_kernel = kernels::fused_wgmma_assign<S, true>;
  r.smem = S::smem;
  r.threads = S::threads;
  r.rows = S::BM;
  return r;
}

std::size_t wgmma_image_floats(std::size_t k, std::size_t d) {
  using S = kernels::WgmmaAssignShape;
  return (k + S::BN - 1) / S::BN * S::BN * ((d + S::BK - 1) / S::BK * S::BK);
}

void wgmma_image(const float* centred, int k, int d, float* image, cudaStream_t stream) {
  using S = kernels::WgmmaAssignShape;
  const std::size_t chunks = wgmma_image_floats(k, d) / 4;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((chunks + 255) / 256, 4096));
  kernels::wgmma_image_kernel<S><<<blocks, 256, 0, stream>>>(centred, k, d, reinterpret_cast<float4*>(image));
  CUDA_CHECK_LAUNCH();
}

void wgmma_preload() {
  cudaFuncAttributes a{};
  CUDA_CHECK(cudaFuncGetAttributes(&a, kernels::wgmma_image_kernel<kernels::WgmmaAssignShape>));
}

}  // namespace km::gpu
