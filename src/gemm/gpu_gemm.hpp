// The GPU side of the gemm program: launchers for every GPU kernel, cuBLAS as reference,
// the timed upload → kernel → download run, and the hybrid GPU + CPU split. The interface
// is free of CUDA types so host code and tests include it anywhere.
#pragma once

#include <string>
#include <vector>

#include "gemm/gemm.hpp"

namespace km::gemm {

struct GpuOptions {
  int tile = 16;            // W of naive, coalesced, shared, shared-static
  bool allow_tf32 = false;  // tensor in float runs TF32 only when asked
  int mma = 0;              // tensor in double: 884, 1684 or 1688 (0: the default, 1684 on sm_90)
  int reps = 5;             // timed repetitions after one warm-up
};

// Phase times in seconds; `kernel` is the median of the repetitions.
struct Timing {
  double h2d = 0, kernel = 0, d2h = 0, cpu = 0, total = 0;
  std::vector<double> kernel_reps;
};

// Refuses bad combinations (tile, TF32 without opt-in, an mma shape the device lacks)
// before anything is allocated. Throws UsageError.
void check_gpu_options(const std::string& kernel, bool is_double, const GpuOptions& o);
// What arithmetic a GPU kernel uses: "fp64", "fp32", "fp64 mma m16n8k4", "tf32 mma m16n8k8".
std::string gpu_math(const std::string& kernel, bool is_double, const GpuOptions& o);

// Uploads the problem (timed), runs `kernel` once to warm up and `reps` times timed,
// downloads the result into out (m×n). When ref is not null, also runs cuBLAS the same way
// into ref (its median time in *ref_seconds) and the validation scale |A|·|B| + |C| into
// scale.
template <class T>
Timing gpu_run(const std::string& kernel, const Problem<T>& p, const GpuOptions& o, T* out, T* ref = nullptr,
               T* scale = nullptr, double* ref_seconds = nullptr);

// Rows [0, gpu_rows) on the GPU (tensor for double, regblock for float, with their
// transfers) and the rest with cpu_blocked on `threads` threads, at the same time.
// `total` is the wall time of the whole product (median of reps), `cpu` the CPU part's.
template <class T>
Timing hybrid_run(const Problem<T>& p, int gpu_rows, const GpuOptions& o, int threads, T* out);

// The kernel the hybrid runs on the GPU for this precision.
const char* hybrid_gpu_kernel(bool is_double);

}  // namespace km::gemm
