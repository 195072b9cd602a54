// fused's wgmma assignment, the one translation unit built for sm_90a (CMakeLists.txt:
// kmeans_wgmma). Everything else stays portable sm_90 code.
#include "kmeans/gpu/fused_wgmma.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/kmeans/6_fused_wgmma.cuh"
#include "cuda/check.hpp"

namespace km::gpu {

namespace {

template <class S>
WgmmaAssign assign_for() {
  WgmmaAssign r;
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernels::fused_wgmma_assign<S, false>) != cudaSuccess) {  // no sm_90a image
    cudaGetLastError();
    return r;
  }
  r.kernel = kernels::fused_wgmma_assign<S, false>;
  if constexpr (!S::Op::scaled) r.ceiling_kernel = kernels::fused_wgmma_assign<S, true>;
  r.smem = S::smem;
  r.threads = S::threads;
  r.rows = S::BM;
  return r;
}

template <class S>
std::size_t image_bytes(std::size_t k, std::size_t d) {
  return (k + S::BN - 1) / S::BN * S::BN * ((d + S::BK - 1) / S::BK * S::BK) * sizeof(typename S::E);
}

template <class S>
void image(float* centred, int k, int d, const double* cmax2, void* out, cudaStream_t stream) {
  const std::size_t chunks = image_bytes<S>(k, d) / 16;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((chunks + 255) / 256, 4096));
  kernels::wgmma_image_kernel<S><<<blocks, 256, 0, stream>>>(centred, k, d, cmax2, static_cast<uint4*>(out));
  CUDA_CHECK_LAUNCH();
}

using Tf32Shape = kernels::WgmmaAssignShape<kernels::WgmmaTf32>;
using F16Shape = kernels::WgmmaAssignShape<kernels::WgmmaF16>;

}  // namespace

WgmmaAssign wgmma_assign(std::size_t d, bool f16) {
  if (d <= 32 || d > static_cast<std::size_t>(Tf32Shape::MAX_D) || d % 4 != 0) return {};
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess || major != 9 ||
      minor != 0) {
    cudaGetLastError();
    return {};
  }
  return f16 ? assign_for<F16Shape>() : assign_for<Tf32Shape>();
}

std::size_t wgmma_image_bytes(std::size_t k, std::size_t d, bool f16) {
  return f16 ? image_bytes<F16Shape>(k, d) : image_bytes<Tf32Shape>(k, d);
}

void wgmma_image(float* centred, int k, int d, const double* cmax2, void* out, bool f16, cudaStream_t stream) {
  (f16 ? image<F16Shape> : image<Tf32Shape>)(centred, k, d, cmax2, out, stream);
}

void wgmma_preload() {
  cudaFuncAttributes a{};
  CUDA_CHECK(cudaFuncGetAttributes(&a, kernels::wgmma_image_kernel<Tf32Shape>));
}

}  // namespace km::gpu
