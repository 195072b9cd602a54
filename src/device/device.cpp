#include "device/device.hpp"

#include <cuda_runtime_api.h>

namespace km {

const GpuInfo& gpu_info() {
  static const GpuInfo info = [] {
    GpuInfo g;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      g.why_absent = cudaGetErrorString(err);
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
      return g;
    }
    if (count == 0) {
      g.why_absent = "no CUDA device found";
      return g;
    }
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, 0);
    if (err != cudaSuccess) {
      g.why_absent = cudaGetErrorString(err);
      return g;
    }
    g.present = true;
    g.name = prop.name;
    return g;
  }();
  return info;
}

}  // namespace km
