// The GEMM kernel registry: name → where it runs, a one-line description, and the function
// that runs it (a GPU launcher or a CPU kernel). The CLI (--help, --list), the runner, the
// tests and the sweep script all iterate this list; nothing else names a kernel.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "common/support.hpp"
#include "cuda/device.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gpu_gemm.hpp"

namespace km::gemm {

enum class Where { gpu, cpu, hybrid };

// Every GPU kernel's launcher (kernels/gemm/<step>_<name>.cuh): enqueue one product on the
// stream (cuBLAS also gets its handle, bound to that stream).
template <class T>
using GpuLaunch = void (*)(const GemmArgs<T>&, const GpuOptions&, cudaStream_t, cublasHandle_t);
// Every CPU kernel (src/gemm/cpu_gemm.hpp): the whole product on `threads` threads (0: all).
template <class T>
using CpuRun = void (*)(const GemmArgs<T>&, int threads);

struct KernelInfo {
  const char* name;
  Where where;
  bool uses_tile;  // --tile changes it
  const char* description;
  GpuLaunch<float> gpu_float = nullptr;
  GpuLaunch<double> gpu_double = nullptr;
  CpuRun<float> cpu_float = nullptr;
  CpuRun<double> cpu_double = nullptr;
  // Options this kernel refuses on this device (nullptr: none), and its arithmetic when it
  // is not plain "fp64"/"fp32" (nullptr: plain).
  Support (*supports)(bool is_double, const GpuOptions&, const GpuInfo&) = nullptr;
  std::string (*math)(bool is_double, const GpuOptions&) = nullptr;

  template <class T>
  GpuLaunch<T> gpu() const {
    if constexpr (sizeof(T) == 4) return gpu_float;
    else return gpu_double;
  }
  template <class T>
  CpuRun<T> cpu() const {
    if constexpr (sizeof(T) == 4) return cpu_float;
    else return cpu_double;
  }
};

// In ladder order: cuBLAS (the GPU reference), the GPU steps, the CPU kernels, hybrid.
const std::vector<KernelInfo>& kernels();
// Throws UsageError naming the valid kernels.
const KernelInfo& find_kernel(const std::string& name);
std::string kernels_help();
// The registry as one JSON array: name, description, where it runs, ladder order.
std::string kernels_json();

}  // namespace km::gemm
