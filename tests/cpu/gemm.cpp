// The GEMM checks themselves (a test of a tolerance must show that it rejects a wrong answer),
// the problems' seeds and flop counts, every CPU kernel against OpenBLAS over a table of odd
// shapes, all three ops, both precisions, on 1 and 2 threads, and the runner's checks.
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

// ---- the checks themselves ------------------------------------------------------------

TEST(GemmCheck, ToleranceRejectsAWrongElement) {
  const auto p = km::gemm::make_problem<double>(Op::nn, 40, 30, 50, 3);
  Expected<double> e(p);
  km::HostBuffer<double> got(40 * 30);
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = e.ref[i];
  const double tol = 52 * 2 * km::gemm::kUnitRoundoffDouble;
  EXPECT_TRUE(km::gemm::compare<double>(got.data(), e.ref.data(), e.scale.data(), 40, 30, 30, tol).passed());
  got[7 * 30 + 11] += 1e-9 * e.scale[7 * 30 + 11];  // far below any float error, far above double's
  const auto c = km::gemm::compare<double>(got.data(), e.ref.data(), e.scale.data(), 40, 30, 30, tol);
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_NE(c.first_mismatches.find("(7,11)"), std::string::npos) << c.first_mismatches;
  got[0] = std::nan("");
  EXPECT_EQ(km::gemm::compare<double>(got.data(), e.ref.data(), e.scale.data(), 40, 30, 30, tol).mismatches, 2u);
}

TEST(GemmCheck, ConstantTestCatchesAFloatPath) {
  for (Op op : kOps) {
    const int m = 9, n = 7, k = 300;
    // A double kernel passes ...
    const auto pd = km::gemm::make_constant_problem<double>(op, m, n, k, km::gemm::kConstantValue);
    km::HostBuffer<double> d(m * n);
    km::gemm::cpu_blocked(pd.args(d.data()), 0);
    EXPECT_TRUE(km::gemm::check_constant(d.data(), op, m, n, k, n).passed()) << km::gemm::op_name(op);
    // ... the same product through float (1 + 2^-25 rounds to 1) does not.
    const auto pf = km::gemm::make_constant_problem<float>(op, m, n, k, float(km::gemm::kConstantValue));
    km::HostBuffer<float> f(m * n);
    km::gemm::cpu_blocked(pf.args(f.data()), 0);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = f[i];
    const auto c = km::gemm::check_constant(d.data(), op, m, n, k, n);
    EXPECT_FALSE(c.passed()) << km::gemm::op_name(op);
    EXPECT_NEAR(c.max_rel_error, 0x1p-24, 1e-9);
  }
}

TEST(GemmProblem, SameSeedSameMatricesAnyThreads) {
  const auto a = km::gemm::make_problem<float>(Op::nt, 33, 17, 9, 5);
  const auto b = km::gemm::make_problem<float>(Op::nt, 33, 17, 9, 5);
  const auto c = km::gemm::make_problem<float>(Op::nt, 33, 17, 9, 6);
  ASSERT_EQ(a.a.size(), 33u * 9u);
  ASSERT_EQ(a.b.size(), 17u * 9u);
  ASSERT_EQ(a.c.size(), 33u * 17u);
  bool differs = false;
  for (std::size_t i = 0; i < a.a.size(); ++i) {
    EXPECT_EQ(a.a[i], b.a[i]);
    EXPECT_GE(a.a[i], -1.0f);
    EXPECT_LT(a.a[i], 1.0f);
    differs |= a.a[i] != c.a[i];
  }
  EXPECT_TRUE(differs);
}

TEST(GemmProblem, FlopsCountThePlusC) {
  EXPECT_EQ(km::gemm::gemm_flops(Op::nn, 2, 3, 4), 48.0);
  EXPECT_EQ(km::gemm::gemm_flops(Op::nt, 2, 3, 4), 54.0);
}

// ---- CPU kernels (run everywhere) ------------------------------------------------------

class CpuGemm : public ::testing::TestWithParam<std::string> {};

template <class T>
void check_cpu_kernel(const std::string& kernel) {
  for (Op op : kOps)
    for (const Dims& d : kDims) {
      const auto p = km::gemm::make_problem<T>(op, d.m, d.n, d.k, 11);
      Expected<T> e(p);
      for (int threads : {1, 2}) {
        km::HostBuffer<T> got(std::size_t(d.m) * d.n);
        const auto g = p.args(got.data());
        km::gemm::find_kernel(kernel).cpu<T>()(g, threads);
        expect_close(p, got.data(), e.ref.data(), e.scale.data(), u<T>(),
                     kernel + " " + label(op, d) + " threads " + std::to_string(threads));
      }
    }
}

TEST_P(CpuGemm, MatchesOpenBlasDouble) { check_cpu_kernel<double>(GetParam()); }
TEST_P(CpuGemm, MatchesOpenBlasFloat) { check_cpu_kernel<float>(GetParam()); }
std::vector<std::string> cpu_kernels() {
  std::vector<std::string> out;
  for (const auto& k : km::gemm::kernels())
    if (k.where == km::gemm::Where::cpu) out.push_back(k.name);
  return out;
}
INSTANTIATE_TEST_SUITE_P(Kernels, CpuGemm, ::testing::ValuesIn(cpu_kernels()),
                         [](const auto& tp) {
                           std::string s = tp.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(CpuGemm, BlockedCrossesPanelEdges) {
  // Larger than one packed panel in every direction (256 columns, depth 256).
  const auto p = km::gemm::make_problem<double>(Op::nt, 37, 600, 700, 2);
  Expected<double> e(p);
  km::HostBuffer<double> got(37 * 600);
  km::gemm::cpu_blocked(p.args(got.data()), 2);
  expect_close(p, got.data(), e.ref.data(), e.scale.data(), u<double>(), "blocked 37x600x700");
}

TEST(GemmRunner, CpuRunsValidateAndReport) {
  km::gemm::RunOptions o;
  o.kernel = "cpu-blocked";
  o.op = Op::tn;
  o.m = 70;
  o.n = 50;
  o.k = 90;
  o.gpu.reps = 2;
  const auto r = km::gemm::run(o);
  EXPECT_TRUE(r.checked);
  EXPECT_TRUE(r.constant_checked);
  EXPECT_TRUE(r.passed());
  EXPECT_GT(r.gflops, 0);
  EXPECT_GT(r.reference_gflops, 0);
  EXPECT_EQ(r.device, "cpu");
}

TEST(GemmRunner, RefusesBadRequests) {
  km::gemm::RunOptions o;
  o.kernel = "tensor";
  o.is_double = false;
  o.m = o.n = o.k = 8;
  EXPECT_THROW(km::gemm::run(o), km::UsageError);  // TF32 needs the opt-in, GPU or not
  o.kernel = "nonsense";
  EXPECT_THROW(km::gemm::run(o), km::UsageError);
  o.kernel = "shared";
  o.gpu.tile = 12;
  EXPECT_THROW(km::gemm::run(o), km::UsageError);
  o.kernel = "cpu-omp";
  o.gpu.tile = 16;
  o.m = 0;
  EXPECT_THROW(km::gemm::run(o), km::UsageError);
  EXPECT_THROW(km::gemm::parse_op("tt"), km::UsageError);
}

TEST(GemmRunner, GpuKernelWithoutGpuIsADeviceError) {
  if (km::gpu_info().present) GTEST_SKIP() << "a GPU is present";
  km::gemm::RunOptions o;
  o.kernel = "regblock";
  o.m = o.n = o.k = 8;
  EXPECT_THROW(km::gemm::run(o), km::DeviceError);
}

}  // namespace
