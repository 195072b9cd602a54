// One gemm run as the CLI, the tests and the sweep see it: build the problem, run the
// kernel (timed), run the reference (timed, same run), validate, and report.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "gemm/gemm.hpp"
#include "gemm/gpu_gemm.hpp"

namespace km::gemm {

struct RunOptions {
  std::string kernel = "cublas";
  Op op = Op::nn;
  int m = 1024, n = 1024, k = 1024;
  bool is_double = true;
  GpuOptions gpu;                      // tile, reps, TF32 opt-in, mma shape
  int threads = 0;                     // CPU kernels, the CPU reference, hybrid's CPU side (0: all)
  std::optional<double> cpu_fraction;  // hybrid: share of rows on the CPU (unset: from measured rates)
  bool check = true;                   // validate against the reference
  std::uint64_t seed = 0;
};

struct GemmReport {
  std::string kernel, op, precision, device, math, reference;
  int m = 0, n = 0, k = 0, tile = 0, threads = 0, reps = 0;
  Timing seconds;
  double gflops = 0;                 // flops / kernel time (hybrid and CPU: / total)
  double gflops_with_transfers = 0;  // flops / total
  double reference_seconds = 0, reference_gflops = 0, vs_reference = 0;  // vs_reference: gflops ÷ reference's
  bool checked = false;
  Check check;
  bool constant_checked = false;
  Check constant;
  std::optional<double> cpu_fraction;  // hybrid: the share of rows the CPU computed
  std::string note;                    // hybrid auto-split decision, etc.
  bool passed() const { return (!checked || check.passed()) && (!constant_checked || constant.passed()); }
};

// Throws UsageError / InputError / DeviceError before any work when the request is bad.
GemmReport run(const RunOptions& o);

void write_table(std::ostream& out, const GemmReport& r);
void write_json(std::ostream& out, const GemmReport& r);
void write_csv(std::ostream& out, const GemmReport& r, bool header);

}  // namespace km::gemm
