// The MLP on every GPU GEMM kernel: the same loss curve and weights as cpu-blas to rounding.
// Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda/device.hpp"
#include "gemm/registry.hpp"
#include "mlp/mlp.hpp"
#include "mlp_checks.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

TEST(Mlp, GpuKernelsGiveTheSameCurve) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const auto& k : km::gemm::kernels()) {
    if (k.where != km::gemm::Where::gpu) continue;
    SCOPED_TRACE(k.name);
    check_same_curve<double>(k.name);
    if (std::string(k.name) != "tensor") check_same_curve<float>(k.name);
  }
}

}  // namespace
