// The GEMM kernels against their references over a table of odd shapes, all three ops,
// both precisions: CPU kernels against OpenBLAS (always run), GPU kernels against cuBLAS
// (skipped, with the reason, where no GPU is usable). Plus the checks themselves: a test
// of a tolerance must show that it rejects a wrong answer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
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

namespace {

using km::gemm::Op;

struct Dims {
  int m, n, k;
};
// 1×1×1; odd sizes that use no vector path; sizes that are multiples of 4 (the 16-byte
// paths) with partial edge tiles; several blocks in both directions with k spanning many
// pipeline stages.
const std::vector<Dims> kDims = {{1, 1, 1},     {17, 33, 9},    {130, 70, 260}, {64, 64, 64},
                                 {129, 257, 35}, {132, 136, 260}, {300, 260, 520}};
const Op kOps[] = {Op::nn, Op::tn, Op::nt};
// KMEANS_TEST_QUICK=1 (for the sanitizers): an odd shape, a vector-path shape with partial
// tiles, one shape spanning several pipeline stages; tiles 8 and 32.
const std::vector<Dims> kQuickDims = {{17, 33, 9}, {132, 136, 260}, {129, 257, 35}};
bool quick() {
  const char* v = std::getenv("KMEANS_TEST_QUICK");
  return v && std::string(v) == "1";
}

std::string label(Op op, const Dims& d) {
  return std::string(km::gemm::op_name(op)) + " " + std::to_string(d.m) + "x" + std::to_string(d.n) + "x" +
         std::to_string(d.k);
}

template <class T>
double u() {
  return sizeof(T) == 8 ? km::gemm::kUnitRoundoffDouble : km::gemm::kUnitRoundoffFloat;
}

// The CPU reference and its scale for a problem.
template <class T>
struct Expected {
  km::HostBuffer<T> ref, scale;
  explicit Expected(const km::gemm::Problem<T>& p)
      : ref(std::size_t(p.m) * p.n), scale(std::size_t(p.m) * p.n) {
    km::gemm::cpu_blas(p.args(ref.data()), 0);
    km::gemm::cpu_scale(p.args(nullptr), scale.data(), 0);
  }
};

template <class T>
void expect_close(const km::gemm::Problem<T>& p, const T* got, const T* ref, const T* scale, double u_result,
                  const std::string& what) {
  const double tol = (p.k + 2) * (u_result + u<T>());
  const km::gemm::Check c = km::gemm::compare<T>(got, ref, scale, p.m, p.n, std::size_t(p.n), tol);
  EXPECT_TRUE(c.passed()) << what << ": " << c.mismatches << " mismatches, max error " << c.max_rel_error
                          << " (tolerance " << tol << "): " << c.first_mismatches;
}

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
