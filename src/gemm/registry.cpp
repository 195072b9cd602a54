#include "gemm/registry.hpp"

#include "common/errors.hpp"

namespace km::gemm {

const std::vector<KernelInfo>& kernels() {
  static const std::vector<KernelInfo> list = {
      {"naive", Where::gpu, true, "one thread per output, grid x over rows (uncoalesced); block W×W"},
      {"coalesced", Where::gpu, true, "one thread per output, grid x over columns (coalesced B reads); block W×W"},
      {"shared", Where::gpu, true, "W×W tiles of A and B in dynamic shared memory, W = --tile"},
      {"shared-static", Where::gpu, true, "the same with W a compile-time constant (4, 8, 16, 32) in static shared memory"},
      {"regblock", Where::gpu, false, "2-D register blocking (8×8 float, 4×4 double per thread), vector loads, double-buffered tiles"},
      {"tensor", Where::gpu, false, "tensor cores: FP64 mma.sync (double), TF32 mma.sync (float, needs --allow-tf32)"},
      {"cublas", Where::gpu, false, "cuBLAS ?gemm (row-major through the operand swap; TF32 off), the GPU reference"},
      {"cpu-omp", Where::cpu, false, "textbook triple loop, omp parallel for collapse(2)"},
      {"cpu-blocked", Where::cpu, false, "cache-blocked: packed panels, register tiles on AVX-512/AVX2, OpenMP rows"},
      {"cpu-blas", Where::cpu, false, "OpenBLAS cblas_?gemm, the CPU reference"},
      {"hybrid", Where::hybrid, false,
       "rows split: GPU (tensor double / regblock float) and cpu-blocked at once; --cpu-fraction or measured rates"},
  };
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
