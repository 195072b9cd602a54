// The driver every implementation shares: the stop rules (and the kernels' rule equal to the
// driver's), the empty-cluster rule, the parameters' checks, --gpus refused on the CPU, more
// clusters than objects, predict with fewer objects than centroids.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "io/generate.hpp"
#include "kernels/kmeans/stop_rule.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/init.hpp"
#include "kmeans/registry.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

TEST(Gpus, RefusedForCpuImplementationsAndBelowOne) {
  auto data = km::generate_uniform<double>(100, 2, 1);
  km::Params p;
  p.k = 3;
  p.gpus = 2;
  for (const char* impl : {"seq", "omp"}) {
    try {
      run_impl(impl, data, p);
      ADD_FAILURE() << impl << " accepted --gpus=2";
    } catch (const km::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("runs on the CPU"), std::string::npos) << e.what();
    }
  }
  p.gpus = 0;
  EXPECT_THROW(km::validate(p), km::UsageError);
}

TEST(StopRules, ShouldStop) {
  km::Params p;
  km::IterationStats s;
  s.changed = 0;
  EXPECT_TRUE(km::should_stop(s, 100, p));
  s.changed = 1;
  EXPECT_FALSE(km::should_stop(s, 100, p));
  p.threshold = 0.01;
  EXPECT_TRUE(km::should_stop(s, 100, p));
  s.changed = 2;
  EXPECT_FALSE(km::should_stop(s, 100, p));
  p.tol = 0.5;
  s.shift = 0.6;
  EXPECT_FALSE(km::should_stop(s, 100, p));
  s.shift = 0.5;
  EXPECT_TRUE(km::should_stop(s, 100, p));
}

// The limits the driver hands fused's delta kernel (launched ahead, its last block decides whether
// the kernel queued behind it runs) and the function both ask: its verdict equals should_stop's
// over the lab rule's and the tol rule's edges (at, below and above each limit; no tol; a tol of
// 0, -0.0 and below 0, which never stops a fit with shift >= 0).
TEST(StopRules, KernelRuleAsShouldStop) {
  const std::size_t n = 1000;
  for (const double threshold : {0.0, 0.001, 0.01, 0.5}) {
    for (const std::optional<double> tol : {std::optional<double>{}, std::optional<double>{0.0},
                                            std::optional<double>{-0.0}, std::optional<double>{-1.0},
                                            std::optional<double>{0.25}}) {
      km::Params p;
      p.threshold = threshold;
      p.tol = tol;
      const km::StopLimits limits = km::stop_limits(n, p);
      EXPECT_EQ(limits.changed, threshold * static_cast<double>(n));
      EXPECT_EQ(limits.shift < 0, !tol || *tol < 0);
      for (const std::int64_t changed : {std::int64_t{0}, std::int64_t{1}, std::int64_t{9}, std::int64_t{10},
                                         std::int64_t{11}, std::int64_t{500}, std::int64_t{501}}) {
        for (const double shift : {0.0, 0.1, 0.25, 0.2500001, 3.0}) {
          km::IterationStats s;
          s.changed = changed;
          s.shift = shift;
          SCOPED_TRACE("threshold " + std::to_string(threshold) + " tol " + (tol ? std::to_string(*tol) : "none") +
                       " changed " + std::to_string(changed) + " shift " + std::to_string(shift));
          const bool rule = km::kernels::meets_stop_rule(static_cast<double>(changed), shift, limits.changed, limits.shift);
          EXPECT_EQ(rule, km::should_stop(s, n, p));
          const bool expected = static_cast<double>(changed) <= threshold * static_cast<double>(n) ||
                                (tol.has_value() && shift <= *tol);
          EXPECT_EQ(rule, expected);
        }
      }
    }
  }
}

TEST(StopRules, LoopsThresholdAndTolInTheDriver) {
  auto data = km::generate_uniform<double>(3001, 2, 1);
  km::Params p;
  p.k = 8;
  p.loops = 3;
  for (const char* impl : {"seq", "omp"}) {
    SCOPED_TRACE(impl);
    auto limited = run_impl(impl, data, p);
    EXPECT_EQ(limited.iterations, 3);
    EXPECT_FALSE(limited.converged);
    EXPECT_EQ(limited.per_iteration.size(), 3u);

    km::Params all = p;
    all.threshold = 1.0;  // any change count passes: stop after one iteration
    auto once = run_impl(impl, data, all);
    EXPECT_EQ(once.iterations, 1);
    EXPECT_TRUE(once.converged);

    km::Params tol = p;
    tol.loops = 1000;
    tol.tol = 1e-6;
    auto by_tol = run_impl(impl, data, tol);
    EXPECT_TRUE(by_tol.converged);
    EXPECT_LE(by_tol.per_iteration.back().shift, 1e-6);
    for (int i = 0; i + 1 < by_tol.iterations; ++i) EXPECT_GT(by_tol.per_iteration[i].shift, 1e-6);

    km::Params until_stable = p;
    until_stable.loops = 1000;
    auto stable = run_impl(impl, data, until_stable);
    EXPECT_TRUE(stable.converged);
    EXPECT_EQ(stable.per_iteration.back().changed, 0);
    EXPECT_EQ(stable.per_iteration.back().shift, 0.0) << "no change, no move";
    EXPECT_GT(stable.iterations, 3);
  }
}

TEST(EmptyCluster, KeepsItsCentroid) {
  // Duplicate initial centroids (the first two objects are equal): every tie goes to the
  // lowest index, so in the first iteration cluster 1 is empty and must keep its centroid.
  km::Dataset<double> data(5, 1, "test");
  const double v[5] = {0, 0, 4, 6, 100};
  std::copy(v, v + 5, data.values.data());
  km::Params p;
  p.k = 2;
  p.loops = 1;
  for (const char* impl : {"seq", "omp"}) {
    auto r = run_impl(impl, data, p);
    EXPECT_EQ(r.centroids[0], 22.0) << impl;  // the mean of everything
    EXPECT_EQ(r.centroids[1], 0.0) << impl;   // empty: unchanged
    // Final labels: 0, 0, 4, 6 are nearer the kept centroid 0, and 100 to 22.
    EXPECT_EQ(r.labels, (std::vector<std::int32_t>{1, 1, 1, 1, 0})) << impl;
    EXPECT_EQ(r.inertia, 16.0 + 36.0 + 78.0 * 78.0) << impl;
  }
}

TEST(Params, Validation) {
  auto bad = [](auto mutate, const char* needle) {
    km::Params p;
    mutate(p);
    try {
      km::validate(p);
      ADD_FAILURE() << "accepted; expected " << needle;
    } catch (const km::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad([](km::Params& p) { p.k = 0; }, "--clusters=0");
  bad([](km::Params& p) { p.loops = 0; }, "--loops=0");
  bad([](km::Params& p) { p.loops = -2; }, "--loops=-2");
  bad([](km::Params& p) { p.oversampling = 0; }, "--oversampling=0");
  bad([](km::Params& p) { p.oversampling = NAN; }, "--oversampling=nan");
  bad([](km::Params& p) { p.init_rounds = 0; }, "--init-rounds=0");
  bad([](km::Params& p) { p.init_rounds = km::kMaxInitRounds + 1; }, "--init-rounds=65");
  bad([](km::Params& p) { p.block = 16; }, "--block=16");
  bad([](km::Params& p) { p.block = 2048; }, "--block=2048");
  bad([](km::Params& p) { p.block = 100; }, "--block=100");
  bad([](km::Params& p) { p.threshold = 1.5; }, "--threshold");
  bad([](km::Params& p) { p.tol = -1; }, "--tol");
  for (int block : {32, 128, 1024}) {
    km::Params p;
    p.block = block;
    EXPECT_NO_THROW(km::validate(p));
  }
}

TEST(Params, MoreClustersThanObjects) {
  auto data = km::generate_uniform<double>(10, 2, 0);
  km::Params p;
  p.k = 11;
  EXPECT_THROW(run_impl("seq", data, p), km::UsageError);
  p.k = 10;
  EXPECT_NO_THROW(run_impl("omp", data, p));
}

// Predict labels any number of objects, fewer than the centroids included (one object with
// K = 8: what scikit-learn's predict does on a single sample).
TEST(Predict, FewerObjectsThanCentroids) {
  const auto centres = km::generate_uniform<double>(8, 3, 1);
  for (std::size_t n : {1u, 3u}) {
    const auto data = km::generate_uniform<double>(n, 3, 2);
    km::Params p;
    p.k = 8;
    p.init = km::Init::given;
    p.given_d = 3;
    p.given_centroids.assign(centres.values.data(), centres.values.data() + 24);
    for (const char* name : {"seq", "omp"}) {
      const auto r = km::predict(km::find_implementation(name), data, p);
      ASSERT_EQ(r.labels.size(), n);
      for (std::size_t i = 0; i < n; ++i) {
        int best = 0;
        double best_d = 1e300;
        for (int c = 0; c < 8; ++c) {
          double s = 0;
          for (int j = 0; j < 3; ++j) {
            const double e = data.row(i)[j] - p.given_centroids[c * 3 + j];
            s += e * e;
          }
          if (s < best_d) best_d = s, best = c;
        }
        EXPECT_EQ(r.labels[i], best) << name << " object " << i;
      }
    }
    // A fit still needs K objects.
    p.init = km::Init::first;
    EXPECT_THROW(run_impl("seq", data, p), km::UsageError);
  }
}

}  // namespace
