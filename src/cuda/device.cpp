#include "cuda/device.hpp"

#include <map>
#include <mutex>

#include "cuda/check.hpp"
#include "cuda/memory.hpp"

namespace km {

namespace {

int attribute(cudaDeviceAttr attr) {
  int device = 0, value = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

}  // namespace

const GpuInfo& gpu_info() {
  static const GpuInfo info = [] {
    GpuInfo g;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      g.why_absent = cudaGetErrorString(err);
      cudaGetLastError();  // clear the error so later calls start clean
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
      cudaGetLastError();
      return g;
    }
    g.present = true;
    g.name = prop.name;
    g.shared_optin = prop.sharedMemPerBlockOptin;
    g.multiprocessors = prop.multiProcessorCount;
    g.compute_capability = prop.major * 10 + prop.minor;
    return g;
  }();
  return info;
}

std::size_t max_shared_bytes() {
  return static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin));
}

int multiprocessor_count() { return attribute(cudaDevAttrMultiProcessorCount); }

int compute_capability() {
  return attribute(cudaDevAttrComputeCapabilityMajor) * 10 + attribute(cudaDevAttrComputeCapabilityMinor);
}

int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

int device_count() {
  if (!gpu_info().present) return 0;
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  return count;
}

std::string device_name() {
  // Cached per device: cudaGetDeviceProperties fills every property and takes milliseconds, and
  // every fit's report asks for the name (a Python fit of 60 ms paid it each time).
  static std::mutex mutex;
  static std::map<int, std::string> names;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = names.find(device);
  if (it == names.end()) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    it = names.emplace(device, prop.name).first;
  }
  return it->second;
}

void check_device_memory(std::size_t bytes, const std::string& what, const std::string& hint) {
  std::size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  free_bytes += cuda::pool_idle_bytes();  // what an earlier fit left in the pool is ours to reuse
  const std::size_t reserve = 256ull << 20;  // the runtime, cuBLAS workspaces
  if (bytes + reserve > free_bytes)
    throw DeviceError(strprintf("%s needs %.2f GiB of device memory but %.2f GiB of %.2f GiB are free; %s",
                                what.c_str(), bytes / 1073741824.0, free_bytes / 1073741824.0,
                                total / 1073741824.0, hint.c_str()));
}

}  // namespace km
