// Batches (kmeans/batch.hpp) on the CPU rungs, which fit the problems one after another: each
// result equals the problem's separate fit bit for bit, the batch's iteration times are the sums
// of the problems' own, and an error names its problem. (The GPU's iterations together: gpu/batch.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "io/generate.hpp"
#include "kmeans/batch.hpp"
#include "kmeans/registry.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

TEST(Batch, CpuProblemsEqualSeparateFits) {
  const std::size_t batch = 3, n = 500, d = 5;
  auto all = km::generate_uniform<double>(batch * n, d, 7);
  std::vector<km::Params> params(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    params[b].k = 4;
    params[b].loops = 50;
    params[b].seed = 3;
    params[b].init = b == 1 ? km::Init::first : km::Init::kmeanspp;
  }
  for (const char* name : {"seq", "omp"}) {
    SCOPED_TRACE(name);
    const km::Implementation& impl = km::find_implementation(name);
    const km::BatchResult<double> got = km::run_batch(impl, all, batch, params);
    EXPECT_FALSE(got.together);
    ASSERT_EQ(got.problems.size(), batch);
    std::vector<double> sums;
    for (std::size_t b = 0; b < batch; ++b) {
      km::Dataset<double> one;
      one.n = n;
      one.d = d;
      one.values = km::HostBuffer<double>::borrow(all.row(b * n), n * d);
      const km::Result<double> want = km::run(impl, one, params[b]);
      const km::Result<double>& r = got.problems[b];
      EXPECT_EQ(r.iterations, want.iterations);
      EXPECT_EQ(r.inertia, want.inertia);
      EXPECT_EQ(r.labels, want.labels);
      EXPECT_EQ(r.centroids, want.centroids);
      if (sums.size() < r.per_iteration.size()) sums.resize(r.per_iteration.size());
      for (std::size_t i = 0; i < r.per_iteration.size(); ++i) sums[i] += r.per_iteration[i].total;
    }
    EXPECT_EQ(got.iteration_seconds, sums);
  }
}

TEST(Batch, ErrorsNameTheProblem) {
  const std::size_t batch = 3, n = 50, d = 2;
  auto all = km::generate_uniform<float>(batch * n, d, 1);
  all.row(2 * n + 7)[1] = std::numeric_limits<float>::quiet_NaN();
  km::Params p;
  p.k = 3;
  const km::Implementation& omp = km::find_implementation("omp");
  expect_error<km::InputError>([&] { km::run_batch(omp, all, batch, std::vector<km::Params>(batch, p)); },
                               "problem 2: ");
  p.k = 51;  // more clusters than a problem's objects
  expect_error<km::UsageError>([&] { km::run_batch(omp, all, batch, std::vector<km::Params>(batch, p)); },
                               "problem 0: ");
  expect_error<km::UsageError>([&] { km::run_batch(omp, all, 0, {}); }, "at least one problem");
}

}  // namespace

namespace {

// A batch of many small problems holds, beside its data, each problem's parameters, result and
// report: counted against the host's memory first (KMEANS_HOST_MEMORY here), one line, no OOM
// kill. A budget the variable cannot give is refused, not ignored.
TEST(Batch, ManySmallProblemsAreCountedFirst) {
  const std::size_t batch = 200000;
  km::Dataset<double> data(batch * 2, 1, "many");
  for (std::size_t i = 0; i < data.n; ++i) data.values.data()[i] = static_cast<double>(i % 7);
  km::Params p;
  p.k = 1;
  p.loops = 3;
  const std::vector<km::Params> params(batch, p);
  EXPECT_GT(km::batch_host_bytes(batch, 2, 1, 1, 3, 8), batch * 8192.0);
  // (max_iter's worst case is not what a problem keeps: a huge one is no huge estimate)
  EXPECT_LT(km::batch_host_bytes(1, 100, 2, 3, 1000000000, 8), 1e6);
  struct Budget {  // KMEANS_HOST_MEMORY for this test only, whatever it throws
    explicit Budget(const char* v) { setenv("KMEANS_HOST_MEMORY", v, 1); }
    ~Budget() { unsetenv("KMEANS_HOST_MEMORY"); }
  };
  {
    const Budget budget("512M");
    try {
      km::run_batch(km::find_implementation("omp"), data, batch, params);
      ADD_FAILURE() << "no error";
    } catch (const km::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("a batch of 200000 problems"), std::string::npos) << e.what();
    }
  }
  for (const char* bad : {"512 MB", " -1", "-5", "1.5G", "99999999999999999999", "17179869184G", "12X", ""}) {
    const Budget budget(bad);
    EXPECT_THROW(km::available_host_memory(), km::UsageError) << "'" << bad << "'";
  }
  for (const char* good : {"1000000000000", "4g", "2T"}) {
    const Budget budget(good);
    EXPECT_GT(km::available_host_memory(), 1u << 30) << good;
  }
}

}  // namespace
