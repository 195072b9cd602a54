// fused's wgmma assignment, the one translation unit built for sm_90a (CMakeLists.txt:
// kmeans_wgmma). Everything else stays portable sm_90 code.
#include "kmeans/gpu/fused_wgmma.hpp"

#include <cuda_runtime.h>

#include "kernels/kmeans/6_fused_wgmma.cuh"

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
  if (cudaFuncGetAttributes(&attributes, kernels::fused_wgmma_assign<S>) != cudaSuccess) {  // no sm_90a image
    cudaGetLastError();
    return r;
  }
  r.kernel = kernels::fused_wgmma_assign<S>;
  r.smem = S::smem;
  r.threads = S::threads;
  r.rows = S::BM;
  return r;
}

}  // namespace km::gpu
