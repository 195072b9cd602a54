// Every GPU GEMM kernel × tile (× FP64 mma shape) against the CPU reference within the rounding
// bound over the shape table, cuBLAS against OpenBLAS, and hybrid's row splits. Skipped, with
// the reason, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "gemm/cpu_gemm.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gpu_gemm.hpp"
#include "gemm/registry.hpp"
#include "gemm/runner.hpp"
#include "gemm_checks.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

// KMEANS_TEST_QUICK=1 (for the sanitizers): an odd shape, a vector-path shape with partial
// tiles, one shape spanning several pipeline stages; tiles 8 and 32.
const std::vector<Dims> kQuickDims = {{17, 33, 9}, {132, 136, 260}, {129, 257, 35}};

// ---- GPU kernels (skip without a GPU) --------------------------------------------------

struct GpuCase {
  std::string kernel;
  std::vector<int> tiles;
  std::vector<int> mma;  // tensor double: every shape
};

void PrintTo(const GpuCase& c, std::ostream* os) { *os << c.kernel; }

std::vector<GpuCase> gpu_cases() {
  std::vector<GpuCase> out;
  for (const auto& k : km::gemm::kernels()) {
    if (k.where != km::gemm::Where::gpu || std::string(k.name) == "cublas") continue;
    GpuCase c{k.name, k.uses_tile ? std::vector<int>{4, 8, 16, 32} : std::vector<int>{16}, {0}};
    if (c.kernel == "tensor") c.mma = {884, 1684, 1688};
    out.push_back(c);
  }
  return out;
}

template <class T>
void check_gpu_kernel(const GpuCase& c) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const bool is_double = sizeof(T) == 8;
  for (Op op : kOps)
    for (const Dims& d : quick() ? kQuickDims : kDims) {
      const auto p = km::gemm::make_problem<T>(op, d.m, d.n, d.k, 21);
      Expected<T> e(p);
      for (int tile : quick() && c.tiles.size() > 1 ? std::vector<int>{8, 32} : c.tiles)
        for (int mma : is_double ? c.mma : std::vector<int>{0}) {
          km::gemm::GpuOptions o;
          o.tile = tile;
          o.mma = mma;
          o.reps = 1;
          o.allow_tf32 = true;
          const std::string math = km::gemm::gpu_math(c.kernel, is_double, o);
          const double u_result = math.rfind("tf32", 0) == 0 ? km::gemm::kUnitRoundoffTf32 : u<T>();
          km::HostBuffer<T> got(std::size_t(d.m) * d.n);
          km::gemm::gpu_run<T>(c.kernel, p, o, got.data());
          const std::string what = c.kernel + " " + label(op, d) + " tile " + std::to_string(tile) + " " + math;
          expect_close(p, got.data(), e.ref.data(), e.scale.data(), u_result, what);
          if (is_double && (d.k == 260 || d.k == 1)) {
            const auto cp = km::gemm::make_constant_problem<double>(op, d.m, d.n, d.k, km::gemm::kConstantValue);
            km::HostBuffer<double> cg(std::size_t(d.m) * d.n);
            km::gemm::gpu_run<double>(c.kernel, cp, o, cg.data());
            const auto cc = km::gemm::check_constant(cg.data(), op, d.m, d.n, d.k, std::size_t(d.n));
            EXPECT_TRUE(cc.passed()) << what << " A=B=1+2^-25: " << cc.first_mismatches;
          }
        }
    }
}

class GpuGemm : public ::testing::TestWithParam<GpuCase> {};
TEST_P(GpuGemm, MatchesReferenceDouble) { check_gpu_kernel<double>(GetParam()); }
TEST_P(GpuGemm, MatchesReferenceFloat) { check_gpu_kernel<float>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Kernels, GpuGemm, ::testing::ValuesIn(gpu_cases()), [](const auto& tp) {
  std::string s = tp.param.kernel;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
});

TEST(GpuGemm, CublasMatchesOpenBlas) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (Op op : kOps) {
    const auto p = km::gemm::make_problem<double>(op, 130, 70, 260, 4);
    Expected<double> e(p);
    km::HostBuffer<double> got(130 * 70), ref(130 * 70), scale(130 * 70);
    km::gemm::gpu_run<double>("cublas", p, km::gemm::GpuOptions{}, got.data(), ref.data(), scale.data());
    expect_close(p, got.data(), e.ref.data(), e.scale.data(), u<double>(), std::string("cublas ") + km::gemm::op_name(op));
    for (std::size_t i = 0; i < scale.size(); ++i) ASSERT_NEAR(scale[i], e.scale[i], 1e-12 * e.scale[i]);
  }
}

TEST(GpuGemm, HybridSplitsRows) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (Op op : kOps)
    for (int gpu_rows : {0, 1, 77, 130}) {
      const auto p = km::gemm::make_problem<double>(op, 130, 70, 260, 8);
      Expected<double> e(p);
      km::HostBuffer<double> got(130 * 70);
      km::gemm::GpuOptions o;
      o.reps = 1;
      km::gemm::hybrid_run<double>(p, gpu_rows, o, 2, got.data());
      expect_close(p, got.data(), e.ref.data(), e.scale.data(), u<double>(),
                   "hybrid " + std::string(km::gemm::op_name(op)) + " gpu rows " + std::to_string(gpu_rows));
    }
}

}  // namespace
