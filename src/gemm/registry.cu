#include "gemm/registry.hpp"

#include "common/errors.hpp"
#include "gemm/cpu_gemm.hpp"
#include "kernels/gemm/0_cublas.cuh"
#include "kernels/gemm/1_naive.cuh"
#include "kernels/gemm/2_coalesced.cuh"
#include "kernels/gemm/3_shared.cuh"
#include "kernels/gemm/4_shared_static.cuh"
#include "kernels/gemm/5_regblock.cuh"
#include "kernels/gemm/6_tensor.cuh"

namespace km::gemm {

namespace kg = km::kernels::gemm;

// Adding a kernel: its file in kernels/gemm/ (kernel + launcher), its #include above and its line here.
const std::vector<KernelInfo>& kernels() {
#define KM_GPU(f) kg::f<float>, kg::f<double>, nullptr, nullptr
#define KM_CPU(f) nullptr, nullptr, f<float>, f<double>
  static const std::vector<KernelInfo> list = {
      {"cublas", Where::gpu, false, "cuBLAS ?gemm (row-major through the operand swap; TF32 off), the GPU reference",
       KM_GPU(launch_cublas)},
      {"naive", Where::gpu, true, "one thread per output, grid x over rows (uncoalesced); block W×W",
       KM_GPU(launch_naive)},
      {"coalesced", Where::gpu, true, "one thread per output, grid x over columns (coalesced B reads); block W×W",
       KM_GPU(launch_coalesced)},
      {"shared", Where::gpu, true, "W×W tiles of A and B in dynamic shared memory, W = --tile",
       KM_GPU(launch_shared)},
      {"shared-static", Where::gpu, true,
       "the same with W a compile-time constant (4, 8, 16, 32) in static shared memory",
       KM_GPU(launch_shared_static)},
      {"regblock", Where::gpu, false,
       "2-D register blocking (8×8 float, 4×4 double per thread), vector loads, double-buffered tiles",
       KM_GPU(launch_regblock)},
      {"tensor", Where::gpu, false,
       "tensor cores: FP64 mma.sync (double), TF32 mma.sync (float, needs --allow-tf32)", KM_GPU(launch_tensor),
       kg::tensor_supports, kg::tensor_math},
      {"cpu-omp", Where::cpu, false, "textbook triple loop, omp parallel for collapse(2)", KM_CPU(cpu_omp)},
      {"cpu-blocked", Where::cpu, false, "cache-blocked: packed panels, register tiles on AVX-512/AVX2, OpenMP rows",
       KM_CPU(cpu_blocked)},
      {"cpu-blas", Where::cpu, false, "OpenBLAS cblas_?gemm, the CPU reference", KM_CPU(cpu_blas)},
      {"hybrid", Where::hybrid, false,
       "rows split: GPU (tensor double / regblock float) and cpu-blocked at once; --cpu-fraction or measured rates"},
  };
#undef KM_GPU
#undef KM_CPU
  return list;
}

const KernelInfo& find_kernel(const std::string& name) {
  for (const auto& k : kernels())
    if (name == k.name) return k;
  std::string names;
  for (const auto& k : kernels()) names += std::string(names.empty() ? "" : ", ") + k.name;
  throw UsageError("--kernel=" + name + " is not one of: " + names);
}

std::string kernels_help() {
  std::string s = "Kernels:\n";
  for (const auto& k : kernels()) s += strprintf("  %-14s %s\n", k.name, k.description);
  return s;
}

}  // namespace km::gemm
