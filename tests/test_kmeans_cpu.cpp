// The algorithm contract on the CPU: seq against brute force, omp against seq, stop
// rules, the empty-cluster rule, init, the registry.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "common/errors.hpp"
#include "io/generate.hpp"
#include "io/hash.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/stop_rule.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/gpu/fused_plan.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/init.hpp"
#include "kmeans/registry.hpp"
#include "test_util.hpp"

namespace {

// An engine that does nothing, for registry entries made up by the tests.
template <class T>
struct FakeEngine final : km::Engine<T> {
  explicit FakeEngine(const km::Params&) {}
  void setup(const km::Dataset<T>&, const std::vector<T>&) override {}
  void iterate(km::IterationStats&) override {}
  void read_centroids(std::vector<T>&) override {}
  void final_labels(std::vector<std::int32_t>&) override {}
};

template <class T>
km::Result<T> run_impl(const std::string& name, const km::Dataset<T>& data, const km::Params& p) {
  return km::run(km::find_implementation(name), data, p);
}

// Adjusted Rand index of two labelings.
double adjusted_rand_index(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  std::map<std::pair<int, int>, double> joint;
  std::map<int, double> ra, rb;
  for (std::size_t i = 0; i < a.size(); ++i) {
    joint[{a[i], b[i]}] += 1;
    ra[a[i]] += 1;
    rb[b[i]] += 1;
  }
  auto c2 = [](double n) { return n * (n - 1) / 2; };
  double sum_joint = 0, sum_a = 0, sum_b = 0;
  for (auto& [key, n] : joint) sum_joint += c2(n);
  for (auto& [key, n] : ra) sum_a += c2(n);
  for (auto& [key, n] : rb) sum_b += c2(n);
  const double expected = sum_a * sum_b / c2(static_cast<double>(a.size()));
  const double max_index = (sum_a + sum_b) / 2;
  return max_index == expected ? 1.0 : (sum_joint - expected) / (max_index - expected);
}

using kmtest::dist2;
using kmtest::make_data;

}  // namespace

// ------------------------------------------------------------------ seq, the reference

TEST(Seq, OneIterationMatchesBruteForceMeans) {
  auto data = km::generate_uniform<double>(1001, 3, 5);
  km::Params p;
  p.k = 7;
  p.loops = 1;
  auto r = run_impl("seq", data, p);
  // Brute force: assign to the first 7 objects, average.
  std::vector<double> sum(21, 0.0);
  std::vector<int> count(7, 0);
  for (std::size_t i = 0; i < data.n; ++i) {
    int best = 0;
    for (int c = 1; c < 7; ++c)
      if (dist2(data.row(i), data.row(c), 3) < dist2(data.row(i), data.row(best), 3)) best = c;
    ++count[best];
    for (int j = 0; j < 3; ++j) sum[best * 3 + j] += data.row(i)[j];
  }
  for (int c = 0; c < 7; ++c)
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(r.centroids[c * 3 + j], sum[c * 3 + j] / count[c], 1e-15);
  EXPECT_EQ(r.per_iteration.at(0).changed, 1001) << "every object changes on the first iteration";
}

TEST(Seq, FinalLabelsAndInertiaMatchBruteForce) {
  for (std::size_t d : {1, 2, 16}) {
    auto data = km::generate_uniform<double>(2003, d, 11);
    km::Params p;
    p.k = 16;
    p.loops = 4;
    auto r = run_impl("seq", data, p);
    double inertia = 0;
    for (std::size_t i = 0; i < data.n; ++i) {
      double best = INFINITY;
      for (int c = 0; c < p.k; ++c) best = std::min(best, dist2(data.row(i), &r.centroids[c * d], d));
      // The returned label is a nearest final centroid (to rounding).
      EXPECT_NEAR(dist2(data.row(i), &r.centroids[r.labels[i] * d], d), best, 1e-12) << "object " << i;
      inertia += best;
    }
    // Relative 1e-12: both sum ~2000 non-negative terms in double; the orders differ.
    EXPECT_NEAR(r.inertia, inertia, 1e-12 * inertia) << "d=" << d;
  }
}

// ------------------------------------------------------------------ omp equals seq

struct Shape {
  std::size_t d;
  int k;
  bool blobs;
};

class OmpMatchesSeq : public ::testing::TestWithParam<Shape> {};

template <class T>
void check_omp_matches_seq(const Shape& s) {
  const std::size_t n = 2503;  // prime: not a multiple of any block, lane or thread count
  auto data = make_data<T>(s.blobs, n, s.d, static_cast<std::size_t>(s.k), 3);
  km::Params p;
  p.k = s.k;
  p.loops = 5;
  p.threads = 3;  // uneven ranges over the threads
  auto ref = run_impl("seq", data, p);
  auto got = run_impl("omp", data, p);
  ASSERT_EQ(got.iterations, ref.iterations);
  for (int i = 0; i < ref.iterations; ++i) EXPECT_EQ(got.per_iteration[i].changed, ref.per_iteration[i].changed);
  // Distances are computed in the same order as seq, so labels are identical; only the
  // centroid sums are added in another order (per-thread partials), which moves the
  // centroids by a few ulps. A label may differ only where that could matter: an object
  // whose two candidate distances agree to within that rounding.
  const double rel = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (got.labels[i] == ref.labels[i]) continue;
    ++differ;
    const double a = dist2(data.row(i), &ref.centroids[ref.labels[i] * s.d], s.d);
    const double b = dist2(data.row(i), &ref.centroids[got.labels[i] * s.d], s.d);
    EXPECT_NEAR(a, b, rel * a + 1e-30) << "object " << i << " changed label without a near-tie";
  }
  EXPECT_LE(differ, n / 1000);
  for (std::size_t i = 0; i < ref.centroids.size(); ++i)
    EXPECT_NEAR(got.centroids[i], ref.centroids[i], rel * (1 + std::abs(ref.centroids[i]))) << "at " << i;
  EXPECT_NEAR(got.inertia, ref.inertia, rel * ref.inertia);
}

TEST_P(OmpMatchesSeq, Double) { check_omp_matches_seq<double>(GetParam()); }
TEST_P(OmpMatchesSeq, Float) { check_omp_matches_seq<float>(GetParam()); }

std::vector<Shape> omp_shapes() {
  std::vector<Shape> shapes;
  for (std::size_t d : {1, 2, 3, 16, 100})
    for (int k : {1, 2, 16, 200})
      for (bool blobs : {false, true}) shapes.push_back({d, k, blobs});
  return shapes;
}

INSTANTIATE_TEST_SUITE_P(Shapes, OmpMatchesSeq, ::testing::ValuesIn(omp_shapes()),
                         [](const ::testing::TestParamInfo<Shape>& param_info) {
                           // (appended piece by piece: GCC 12's -Wrestrict misfires on "d" + std::string&&)
                           std::string name = "d";
                           name += std::to_string(param_info.param.d);
                           name += "_k";
                           name += std::to_string(param_info.param.k);
                           name += param_info.param.blobs ? "_blobs" : "_uniform";
                           return name;
                         });

TEST(Omp, ExactlySeqLabelsOnLargerData) {
  // The vector kernels (AVX-512/AVX2/baseline, 4-object groups, centroid chunks) must
  // reproduce seq's distances bit for bit: compare the final labels of the same centroids.
  auto data = km::generate_uniform<double>(40009, 16, 8);
  km::Params p;
  p.k = 300;  // several centroid chunks
  p.loops = 1;
  auto seq = km::find_implementation("seq").make<double>(p);
  auto omp = km::find_implementation("omp").make<double>(p);
  const auto init = km::initial_centroids(data, p);
  seq->setup(data, init);
  omp->setup(data, init);
  std::vector<std::int32_t> a, b;
  seq->final_labels(a);
  omp->final_labels(b);
  EXPECT_EQ(a, b);
}

// The sums are fixed point (kmeans/fixed_point.hpp): the same bits on any thread count,
// on random, clustered and quantised (tie-heavy) data (double sums per thread would not be: 1 and 3 threads
// add the objects in different groups).
template <class T>
void check_omp_thread_independent() {
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind);
    auto data = make_data<T>(kind == 1, 4099, 5, 12, 21);
    if (kind == 2)
      for (std::size_t i = 0; i < data.n * data.d; ++i) data.values[i] = std::round(data.values[i] * 4) / 4;
    km::Params p;
    p.k = 12;
    p.loops = 8;
    p.init = km::Init::kmeanspp;
    p.threads = 1;
    const auto one = run_impl("omp", data, p);
    for (int threads : {2, 3, 7}) {
      p.threads = threads;
      const auto many = run_impl("omp", data, p);
      EXPECT_EQ(many.centroids, one.centroids) << threads << " threads";
      EXPECT_EQ(many.labels, one.labels);
      EXPECT_EQ(many.inertia, one.inertia);
      ASSERT_EQ(many.iterations, one.iterations);
      for (int it = 0; it < one.iterations; ++it) {
        EXPECT_EQ(many.per_iteration[it].inertia, one.per_iteration[it].inertia);
        EXPECT_EQ(many.per_iteration[it].shift, one.per_iteration[it].shift);
      }
    }
  }
}

TEST(Omp, SameBitsOnAnyThreadCountDouble) { check_omp_thread_independent<double>(); }
TEST(Omp, SameBitsOnAnyThreadCountFloat) { check_omp_thread_independent<float>(); }

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

TEST(FixedPoint, RoundsLikeTheGpuAndUpdatesLikeUpdateCentroids) {
  EXPECT_EQ(km::to_fixed(2.5, 1.0), 2);  // ties to even, as __double2ll_rn
  EXPECT_EQ(km::to_fixed(3.5, 1.0), 4);
  EXPECT_EQ(km::to_fixed(-2.5, 1.0), -2);
  EXPECT_EQ(km::to_fixed(0.375, 8.0), 3);
  // The vectorised rounding is to_fixed's, ties and negatives included, up to 2^50.
  std::uint64_t h = 1;
  for (int i = 0; i < 100000; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    const double v = (static_cast<double>(h >> 11) * 0x1p-53 - 0.5) * 0x1p51;
    const double tie = std::floor(v) + 0.5;
    for (double w : {v, tie, -tie, std::floor(v)}) ASSERT_EQ(km::to_fixed_small(w, 1.0), km::to_fixed(w, 1.0)) << w;
  }
  const auto s = km::fixed_scales(3.0, 1000, 4);
  EXPECT_LT(3.0 * 1000 * s.sum, 0x1p61);
  EXPECT_GE(3.0 * 1000 * s.sum, 0x1p60);
  EXPECT_EQ(s.sum * s.inv_sum, 1.0);
  // Two clusters of d = 2: sums 3 and -1 (cluster 0, 2 objects), cluster 1 empty.
  const std::int64_t sums[4] = {3 * 1024, -1024, 99, 99}, counts[2] = {2, 0};
  double c[4] = {0, 0, 5, 6};
  const double shift = km::finalize_fixed(sums, counts, 2, 2, 1.0 / 1024, c);
  EXPECT_EQ(c[0], 1.5);
  EXPECT_EQ(c[1], -0.5);
  EXPECT_EQ(c[2], 5);  // the empty cluster keeps its centroid
  EXPECT_EQ(shift, 1.5 * 1.5 + 0.25);
}

// ------------------------------------------------------------------ stop rules

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

// ------------------------------------------------------------------ init

TEST(Init, FirstTakesTheFirstObjects) {
  auto data = km::generate_uniform<float>(50, 4, 2);
  km::Params p;
  p.k = 5;
  auto c = km::initial_centroids(data, p);
  EXPECT_TRUE(std::equal(c.begin(), c.end(), data.values.data()));
}

template <class T>
std::set<std::vector<T>> rows_of(const std::vector<T>& c, std::size_t d) {
  std::set<std::vector<T>> rows;
  for (std::size_t i = 0; i < c.size(); i += d) rows.insert(std::vector<T>(c.begin() + i, c.begin() + i + d));
  return rows;
}

TEST(Init, RandomAndKmeansppAreDistinctDataPointsAndSeeded) {
  auto data = km::generate_uniform<double>(5000, 3, 4);
  std::set<std::vector<double>> points = rows_of(std::vector<double>(data.values.data(), data.values.data() + 15000), 3);
  for (km::Init init : {km::Init::random, km::Init::kmeanspp, km::Init::kmeans_parallel}) {
    SCOPED_TRACE(km::to_string(init));
    km::Params p;
    p.k = 50;
    p.init = init;
    p.seed = 7;
    auto a = km::initial_centroids(data, p);
    EXPECT_EQ(rows_of(a, 3).size(), 50u) << "distinct centres";
    for (auto& row : rows_of(a, 3)) EXPECT_TRUE(points.count(row)) << "centres are objects";
    EXPECT_EQ(km::initial_centroids(data, p), a) << "same seed, same centres";
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    EXPECT_EQ(km::initial_centroids(data, p), a) << "independent of the thread count";
    omp_set_num_threads(threads);
    p.seed = 8;
    EXPECT_NE(km::initial_centroids(data, p), a) << "another seed, other centres";
  }
}

TEST(Init, KmeansppAndParallelFindEveryBlob) {
  auto blobs = km::generate_blobs<double>(kmtest::blob_options(4000, 2, 10, 3, 0.05));
  for (km::Init init : {km::Init::kmeanspp, km::Init::kmeans_parallel})
    for (std::uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(std::string(km::to_string(init)) + " seed " + std::to_string(seed));
      km::Params p;
      p.k = 10;
      p.init = init;
      p.seed = seed;
      auto c = km::initial_centroids(blobs.data, p);
      std::set<int> hit;
      for (int i = 0; i < 10; ++i) {
        int best = 0;
        for (int b = 1; b < 10; ++b)
          if (dist2(&c[i * 2], &blobs.centers[b * 2], 2) < dist2(&c[i * 2], &blobs.centers[best * 2], 2)) best = b;
        hit.insert(best);
      }
      EXPECT_EQ(hit.size(), 10u) << "one centre in each blob";
    }
}

// k-means|| whose K x d result is at least 256 KB (600 x 64 doubles) and whose candidates are
// the centres (5 distinct objects, fewer than K): the result's room comes from a thread of its
// own (init.cpp: touched_async) and the rows are fetched into it. (The GPU's reduction takes the
// same path at 1M x 128, K = 1024; the CPU's reduction builds its own.)
TEST(Init, ParallelLargeResultIsObjects) {
  const std::size_t d = 64;
  km::Dataset<double> data(6000, d);
  for (std::size_t i = 0; i < data.n; ++i)
    for (std::size_t j = 0; j < d; ++j) data.values.data()[i * d + j] = 1.0 + static_cast<double>((i % 5) * (j + 1));
  km::Params p;
  p.k = 600;
  p.init = km::Init::kmeans_parallel;
  p.seed = 3;
  const auto c = km::initial_centroids(data, p);
  ASSERT_EQ(c.size(), 600 * d);
  const auto distinct = rows_of(c, d);
  EXPECT_EQ(distinct.size(), 5u) << "all five distinct objects, and duplicates";
  for (const auto& row : distinct)
    EXPECT_TRUE(std::equal(row.begin(), row.end(), data.row(static_cast<std::size_t>(row[1] - row[0])))) << "centres are objects";
  EXPECT_EQ(km::initial_centroids(data, p), c) << "same seed, same centres";
}

// k-means|| with fewer distinct objects than K: every distinct object becomes a centre (the
// rounds stop once each sits on a candidate), the rest are duplicates, as in k-means++.
TEST(Init, ParallelWithFewerDistinctObjectsThanK) {
  km::Dataset<double> data(600, 2);
  for (std::size_t i = 0; i < data.n; ++i) {
    data.values.data()[2 * i] = static_cast<double>(i % 5);
    data.values.data()[2 * i + 1] = static_cast<double>((i % 5) * (i % 5));
  }
  km::Params p;
  p.k = 8;
  p.init = km::Init::kmeans_parallel;
  const auto c = km::initial_centroids(data, p);
  ASSERT_EQ(c.size(), 16u);
  EXPECT_EQ(rows_of(c, 2).size(), 5u) << "all five distinct objects, and duplicates";
  EXPECT_EQ(km::initial_centroids(data, p), c);
}

// Its rounds and oversampling matter (more candidates, other centres), and the whole run
// through omp lands near k-means++'s inertia on blobs.
TEST(Init, ParallelOptionsAndQuality) {
  auto blobs = km::generate_blobs<double>(kmtest::blob_options(6000, 8, 40, 5, 0.5));
  km::Params p;
  p.k = 40;
  p.loops = 30;
  p.init = km::Init::kmeans_parallel;
  const auto base = km::initial_centroids(blobs.data, p);
  p.init_rounds = 2;
  EXPECT_NE(km::initial_centroids(blobs.data, p), base) << "--init-rounds ignored";
  p.init_rounds = 5;
  p.oversampling = 2;
  EXPECT_NE(km::initial_centroids(blobs.data, p), base) << "--oversampling ignored";
  p.oversampling = 0.5;
  const double parallel = run_impl("omp", blobs.data, p).inertia;
  p.init = km::Init::kmeanspp;
  const double plusplus = run_impl("omp", blobs.data, p).inertia;
  EXPECT_LT(parallel, 1.5 * plusplus) << "k-means|| far worse than k-means++";
}

// The reduction's definition (init.hpp: reduce_weighted), written here as plainly as it reads:
// each step, one tree over all m weighted distances padded with zeros to max(4096, 2^ceil(log2 m))
// leaves, rebuilt whole; a draw descends it from the root; each trial's potential is its root.
// The library builds it from 64-leaf chunk subtrees and a tree of chunk sums above them (the
// GPU's layout): the same sums only if the chunks sit exactly on the subtrees.
template <class T>
std::vector<T> reference_tree_reduction(const km::Dataset<T>& pool, const std::vector<double>& w, std::size_t k,
                                        std::uint64_t seed, std::vector<double>& potentials) {
  const std::size_t m = pool.n, d = pool.d, trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
  std::size_t pow2 = 64 * 64, counter = 0;
  while (pow2 < m) pow2 *= 2;
  auto uniform = [&] { return km::unit_double(km::hash64(seed, 24, counter++)); };  // init.cpp's kParallelReduce
  auto below = [&](std::size_t n) { return std::min(n - 1, static_cast<std::size_t>(uniform() * n)); };
  auto dist = [&](std::size_t a, std::size_t b) { return km::squared_distance_double(pool.row(a), pool.row(b), d); };
  auto heap_of = [&](const std::vector<double>& v) {
    std::vector<double> h(2 * pow2, 0.0);
    for (std::size_t i = 0; i < m; ++i) h[pow2 + i] = v[i];
    for (std::size_t j = pow2 - 1; j >= 1; --j) h[j] = h[2 * j] + h[2 * j + 1];
    return h;
  };
  std::vector<std::size_t> picks{below(m)};
  std::vector<double> closest(m);
  for (std::size_t i = 0; i < m; ++i) closest[i] = w[i] * dist(picks[0], i);
  std::vector<double> heap = heap_of(closest);
  potentials.assign(1, heap[1]);
  for (std::size_t c = 1; c < k; ++c) {
    std::vector<std::size_t> cands(trials);
    for (auto& cand : cands) {
      if (heap[1] <= 0) {
        cand = below(m);
        continue;
      }
      double r = uniform() * heap[1];
      std::size_t node = 1;
      while (node < pow2) {
        if (r < heap[2 * node]) {
          node = 2 * node;
        } else {
          r -= heap[2 * node];
          node = 2 * node + 1;
        }
      }
      cand = std::min(node - pow2, m - 1);
      while (closest[cand] == 0) cand = (cand + 1) % m;
    }
    std::size_t best = 0;  // the first least potential (trial 0 if none is below +inf)
    double best_p = INFINITY;
    std::vector<double> best_mins;
    for (std::size_t t = 0; t < trials; ++t) {
      std::vector<double> mins(m);
      for (std::size_t i = 0; i < m; ++i) mins[i] = std::min(closest[i], w[i] * dist(cands[t], i));
      const double p = heap_of(mins)[1];
      if (t == 0) best_mins = mins;
      if (p < best_p) {
        best_p = p;
        best = t;
        best_mins = mins;
      }
    }
    picks.push_back(cands[best]);
    closest = best_mins;
    heap = heap_of(closest);
    potentials.insert(potentials.end(), {best_p, heap[1]});
  }
  std::vector<T> out;
  for (std::size_t c : picks) out.insert(out.end(), pool.row(c), pool.row(c) + d);
  return out;
}

// k-means||'s reduction through the distance table gives the direct steps' centres and every
// step's potential bit for bit, and both are the plain definition's (above): uniform, blobs
// and quantised rows (exact ties), both precisions, more candidates than one 64-row chunk and
// a count that is not a power of two, weights with zeros, on 1 and on all threads.
template <class T>
void check_reduction_table() {
  struct Case {
    const char* name;
    km::Dataset<T> pool;
  };
  std::vector<Case> cases;
  cases.push_back({"uniform", km::generate_uniform<T>(700, 13, 5)});
  cases.push_back({"blobs", km::generate_blobs<T>(kmtest::blob_options(650, 40, 12, 6, 0.3)).data});
  km::Dataset<T> quantised(600, 9);
  std::uint64_t h = 11;
  for (std::size_t i = 0; i < quantised.n * quantised.d; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    quantised.values.data()[i] = static_cast<T>(static_cast<double>((h >> 33) % 4) / 255.0);
  }
  cases.push_back({"quantised", std::move(quantised)});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<double> w(c.pool.n);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>((i * 7) % 5);  // zeros among them
    for (std::size_t k : {2, 37, 150}) {
      SCOPED_TRACE(k);
      std::vector<double> direct_p, table_p, one_p;
      const std::vector<T> direct = km::reduce_weighted(c.pool, w, k, 3, false, &direct_p);
      const std::vector<T> table = km::reduce_weighted(c.pool, w, k, 3, true, &table_p);
      ASSERT_EQ(direct_p.size(), 2 * k - 1);
      EXPECT_GT(direct_p.front(), direct_p.back()) << "the potential must fall as centres are added";
      EXPECT_EQ(table, direct);
      EXPECT_EQ(table_p, direct_p) << "the potentials, bit for bit";
      std::vector<double> reference_p;
      EXPECT_EQ(reference_tree_reduction(c.pool, w, k, 3, reference_p), table) << "not the tree order's picks";
      EXPECT_EQ(reference_p, table_p) << "not the tree order's potentials";
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      EXPECT_EQ(km::reduce_weighted(c.pool, w, k, 3, true, &one_p), table);
      omp_set_num_threads(threads);
      EXPECT_EQ(one_p, table_p);
    }
  }
}

TEST(Init, ParallelReductionTableIsExact) {
  check_reduction_table<double>();
  check_reduction_table<float>();
}

TEST(Blobs, SeqRecoversTheTrueClustering) {
  for (std::size_t d : {2, 16}) {
    auto blobs = km::generate_blobs<double>(kmtest::blob_options(3000, d, 6, 21, 0.1));
    km::Params p;
    p.k = 6;
    p.loops = 50;
    p.init = km::Init::kmeanspp;
    auto r = run_impl("seq", blobs.data, p);
    EXPECT_TRUE(r.converged);
    EXPECT_DOUBLE_EQ(adjusted_rand_index(r.labels, blobs.labels), 1.0) << "d=" << d;
  }
}

// ------------------------------------------------------------------ parameters, registry

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

TEST(Registry, NamesDescriptionsAndGpuRule) {
  ASSERT_GE(km::implementations().size(), 2u);
  for (const km::Implementation* impl : km::implementations()) {
    EXPECT_GT(std::strlen(impl->description), 10u) << impl->name;
    EXPECT_NE(impl->make_float, nullptr);
    EXPECT_NE(impl->make_double, nullptr);
  }
  EXPECT_STREQ(km::find_implementation("seq").name, "seq");
  try {
    km::find_implementation("warp-drive");
    ADD_FAILURE();
  } catch (const km::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("available: seq, omp"), std::string::npos) << e.what();
  }
  EXPECT_EQ(km::default_implementation(false), "omp");
  EXPECT_EQ(km::default_implementation(true), "fused");
  EXPECT_NO_THROW(km::find_implementation(km::default_implementation(true)));
  const km::Implementation gpu_only = km::describe<FakeEngine>("fake-gpu", "test", km::Where::gpu);
  km::GpuInfo none;
  none.why_absent = "no CUDA-capable device is detected";
  try {
    km::require_runnable(gpu_only, none);
    ADD_FAILURE();
  } catch (const km::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a CUDA GPU"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no CUDA-capable device"), std::string::npos);
  }
  km::GpuInfo one;
  one.present = true;
  EXPECT_NO_THROW(km::require_runnable(gpu_only, one));
  EXPECT_NO_THROW(km::require_runnable(km::find_implementation("omp"), none));
}

TEST(Registry, ListIsTheLadderInOrder) {
  const auto list = nlohmann::json::parse(km::registry_json());
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), km::implementations().size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const km::Implementation* impl = km::implementations()[i];
    EXPECT_EQ(list[i]["name"], impl->name);
    EXPECT_EQ(list[i]["description"], impl->description);
    EXPECT_EQ(list[i]["where"], impl->needs_gpu() ? "gpu" : "cpu");
    EXPECT_EQ(list[i]["order"], i);
  }
}

TEST(Registry, ListAnswersForAShape) {
  const auto small = nlohmann::json::parse(km::registry_json(16, 16, 8));
  const auto large = nlohmann::json::parse(km::registry_json(1024, 128, 8));
  for (std::size_t i = 0; i < small.size(); ++i) {
    const km::Implementation* impl = km::implementations()[i];
    const km::Support s = km::supports(*impl, 1024, 128, 8);
    EXPECT_EQ(large[i]["runs"], s.ok) << impl->name;
    if (!s.ok) {
      EXPECT_EQ(large[i]["reason"], s.reason) << impl->name;
    }
    EXPECT_EQ(large[i].contains("path"), impl->path != nullptr) << impl->name;
  }
  const auto fused = [](const nlohmann::json& list) {
    for (const auto& e : list)
      if (e["name"] == "fused") return e["path"].get<std::string>();
    return std::string("missing");
  };
  // (16 x 16 in double: d fixed, and the staged loads from the float copy, which the engine takes
  // where n % 4 == 0 and the device has room for the copy)
  EXPECT_EQ(fused(small), "one-pass, d fixed, staged, float copy");
  // (the tensor path with its scores, for this GPU's facts or, without one, an H100's)
  EXPECT_EQ(fused(large).rfind("tensor, ", 0), 0u) << fused(large);
  EXPECT_EQ(fused(large), km::find_implementation("fused").path(1024, 128, 8, {}));
  EXPECT_FALSE(nlohmann::json::parse(km::registry_json())[0].contains("runs")) << "no shape, no answer";
}

namespace {

km::gpu::DeltaPlan plan_for(std::size_t d, std::size_t k, std::size_t elem, std::size_t optin = 227 * 1024,
                            const km::FusedConfig& env = {}, std::size_t n = 1 << 20, double max_abs = 1.0,
                            int block = 128, bool block_given = false) {
  return km::gpu::plan_delta({n, d, k, elem, max_abs, block, block_given, optin}, env);
}

// Every buffer the plan sizes fits the device it was planned for, and the staged kernel's
// buffers start past the rest.
void expect_fits(const km::gpu::DeltaPlan& p, std::size_t optin) {
  if (!p.delta) return;
  EXPECT_LE(p.bytes, optin);
  if (p.tile) {
    EXPECT_LE(p.tile_bytes, optin);
    if (p.cells_side) {
      EXPECT_GE(p.tile_offset, p.bytes) << "its buffers after the cell table";
      EXPECT_GT(p.tile_bytes, p.tile_offset);
    } else {
      EXPECT_GT(p.tile_bytes, 0u);
    }
  }
  if (p.shadow) {
    EXPECT_TRUE(p.tile) << "the float copy is the staged kernel's";
    EXPECT_LE(p.shadow_bytes, optin);
    EXPECT_GT(p.shadow_bytes, p.bytes);
  } else {
    EXPECT_EQ(p.shadow_bytes, 0u);
  }
}

}  // namespace

// The delta kernel's variant per shape (fused_plan.cpp), where the engine and --list both take it:
// the lab's rows as measured (plots/delta_*_ab_*), each FusedConfig override, and the limits.
TEST(DeltaPlan, LabShapesTakeTheMeasuredVariants) {
  EXPECT_EQ(plan_for(2, 16, 4).describe(), "cells");
  EXPECT_EQ(plan_for(2, 16, 8).describe(), "cells");
  EXPECT_EQ(plan_for(2, 4, 4).describe(), "") << "below K = 8 in float: no table";
  EXPECT_EQ(plan_for(2, 8, 8).describe(), "") << "below K = 16 in double: no table";
  EXPECT_EQ(plan_for(16, 16, 8).describe(), "d fixed, staged, float copy") << "double: the staged kernel from the copy";
  EXPECT_EQ(plan_for(16, 16, 4).describe(), "d fixed, staged") << "float at d = 16: staged for 8 < K <= 24 (session 22)";
  EXPECT_EQ(plan_for(16, 8, 4).describe(), "d fixed") << "K = 8: the staged loads measured 1.06x";
  EXPECT_EQ(plan_for(16, 9, 4).describe(), "d fixed, staged");
  EXPECT_EQ(plan_for(32, 16, 4).describe(), "d fixed, staged");
  EXPECT_EQ(plan_for(32, 64, 4).describe(), "d fixed, mma");
  EXPECT_EQ(plan_for(32, 64, 8).describe(), "d fixed, mma");
  EXPECT_EQ(plan_for(16, 64, 4).describe(), "d fixed, mma");
  EXPECT_EQ(plan_for(16, 32, 4).describe(), "d fixed, staged, mma") << "float at d = 16 (fixed): mma from K = 24, staged";
  EXPECT_EQ(plan_for(16, 23, 4).describe(), "d fixed, staged") << "below K = 24 the staged FMA scores";
  EXPECT_EQ(plan_for(16, 24, 4).describe(), "d fixed, staged, mma") << "from K = 24 the tensor-core scores (session 30)";
  EXPECT_EQ(plan_for(16, 56, 4).describe(), "d fixed, staged, mma") << "staged up to K = 56";
  EXPECT_EQ(plan_for(16, 57, 4).describe(), "d fixed, mma") << "K = 64 staged measured 1.21x";
  EXPECT_EQ(plan_for(16, 24, 8).describe(), "d fixed, mma") << "double: staged only up to K = 16";
  EXPECT_EQ(plan_for(12, 32, 4).describe(), "") << "float at d = 9-15: mma only above K = 32";
  EXPECT_EQ(plan_for(12, 32, 8).describe(), "mma") << "d = 12 does not fill its width";
  EXPECT_EQ(plan_for(4, 16, 4).describe(), "d fixed");
  EXPECT_EQ(plan_for(4, 128, 4).describe(), "") << "d = 4 fixed only up to K = 64";
  EXPECT_EQ(plan_for(3, 16, 8).describe(), "");
  const auto ball = plan_for(1, 64, 8);
  EXPECT_TRUE(ball.ball);
  EXPECT_EQ(ball.cells_side, 0) << "the table is for d = 2";
  const auto table = plan_for(2, 64, 8);
  EXPECT_EQ(table.cells_side, 128);
  EXPECT_FALSE(table.ball) << "the table replaces Elkan's test";
  EXPECT_TRUE(table.ball_wanted) << "... which runs where no grid exists";
  EXPECT_FALSE(table.cell_masks) << "above K = 16 the candidates stay in L2";
  EXPECT_FALSE(table.ring_xy) << "above K = 16 the ring without coordinates";
  EXPECT_FALSE(plan_for(2, 32, 8).ring_xy) << "... with 64 x 64 cells too";
  EXPECT_FALSE(plan_for(2, 64, 4).ring_xy) << "... and in float";
  EXPECT_TRUE(plan_for(2, 16, 8).ring_xy) << "double, K = 16";
  // Up to K = 16 each cell's 16-bit candidates after the table, and the ring's coordinates, where
  // the device has room; the table keeps its side and whatever does not fit is left out.
  EXPECT_EQ(plan_for(2, 16, 4).cells_side, 64);
  EXPECT_TRUE(plan_for(2, 16, 4).cell_masks);
  const auto full = plan_for(2, 16, 4);
  EXPECT_TRUE(full.ring_xy);
  const std::size_t xy = km::kernels::delta_ring_xy_bytes(full.queue_threads, 4);
  EXPECT_EQ(xy, 8u * 64 * 4 * 8) << "8 warps of 64 U entries, two floats each";
  const auto no_xy = plan_for(2, 16, 4, full.bytes - 1);
  EXPECT_EQ(no_xy.cells_side, 64);
  EXPECT_TRUE(no_xy.cell_masks);
  EXPECT_FALSE(no_xy.ring_xy);
  EXPECT_EQ(full.bytes - no_xy.bytes, xy);
  km::FusedConfig side128;
  side128.cells = 128;
  const auto masked = plan_for(2, 16, 4, 227 * 1024, side128);
  EXPECT_TRUE(masked.cell_masks);
  EXPECT_TRUE(masked.ring_xy);
  const auto tight = plan_for(2, 16, 4, masked.bytes - xy - 1, side128);
  EXPECT_EQ(tight.cells_side, 128) << "the table keeps its side; only the masks give way";
  EXPECT_FALSE(tight.cell_masks);
  EXPECT_TRUE(tight.ring_xy) << "the coordinates fit where the masks did not";
  EXPECT_EQ(masked.bytes - tight.bytes, 2u * 128 * 128) << "two bytes a cell";
  EXPECT_EQ(masked.describe(), tight.describe());
  EXPECT_EQ(plan_for(32, 70, 4).bits, 0) << "K > 64: the index is not packed";
  EXPECT_FALSE(plan_for(32, 70, 4).mma);
  for (std::size_t d : {1, 2, 3, 4, 8, 12, 16, 24, 32})
    for (std::size_t k : {1, 2, 5, 16, 33, 64, 70, 256})
      for (std::size_t elem : {4, 8}) {
        SCOPED_TRACE("d " + std::to_string(d) + " k " + std::to_string(k) + " elem " + std::to_string(elem));
        expect_fits(plan_for(d, k, elem), 227 * 1024);
      }
}

// Without --block, the threads per block that measured faster (plots/delta_block_ab_s15_h100.txt);
// with it, --block up to the planned kernel's launch bounds (layouts.hpp: delta_max_threads).
TEST(DeltaPlan, BlockMeasuredUnlessGiven) {
  EXPECT_EQ(plan_for(32, 64, 8).block, 192) << "the tensor-core scores in double at width 32: two blocks of 192";
  EXPECT_EQ(plan_for(24, 64, 8).block, 192);
  EXPECT_EQ(km::kernels::delta_max_threads(8, 32, true, false), 192);
  EXPECT_EQ(km::kernels::delta_max_threads(4, 32, true, false), 256);
  EXPECT_EQ(km::kernels::delta_max_threads(8, 32, true, true), 256) << "staged: its own launch bounds";
  EXPECT_EQ(km::kernels::delta_max_threads(8, 16, true, false), 256);
  EXPECT_EQ(km::kernels::delta_max_threads(8, 32, false, false), 256) << "K > 64 (the index not packed)";
  EXPECT_EQ(plan_for(32, 8, 8).block, 192) << "the FMA scores in double at width 32, not staged";
  EXPECT_EQ(plan_for(24, 16, 8).block, 192);
  EXPECT_TRUE(plan_for(32, 16, 8).tile);
  EXPECT_EQ(plan_for(32, 16, 8).block, 256) << "the staged kernel keeps 256 (192 1.16x)";
  EXPECT_EQ(plan_for(32, 100, 8).block, 256) << "K > 64: 256 (192 1.13x)";
  // Two of its blocks fit an H100's or H200's SM (228 KB, 1 KB reserved a block, ~1 KB static):
  // its stage holds the rows of x'' alone (the movers in rounds of 18), not 32 objects in double.
  EXPECT_LE(2 * (plan_for(32, 64, 8).bytes + 2048), 228u * 1024);
  EXPECT_EQ(km::kernels::delta_stage_warp_bytes(32, 8, 1, true), 32u * 36 * 4);
  EXPECT_EQ(km::kernels::delta_stage_warp_bytes(32, 8, 1, false), 32u * 32 * 8);
  EXPECT_EQ(km::kernels::delta_stage_warp_bytes(16, 4, 2, true), 64u * 20 * 4) << "float: the rows, as before";
  EXPECT_EQ(km::kernels::delta_stage_warp_bytes(16, 8, 1, true), 32u * 16 * 8) << "double at width 16: plain";
  km::FusedConfig both;
  both.mma = both.staged = true;
  EXPECT_EQ(plan_for(32, 16, 8, 227 * 1024, both).block, 256) << "mma forced, staged: the staged kernel's 256";
  both.staged = false;
  EXPECT_EQ(plan_for(32, 16, 8, 227 * 1024, both).block, 192) << "mma forced, not staged";
  EXPECT_EQ(plan_for(16, 64, 8).block, 256);
  EXPECT_EQ(plan_for(2, 16, 8).block, 256);
  EXPECT_EQ(plan_for(16, 16, 8).block, 256) << "the staged double d = 16 kernel, its centre in shared memory (H200: 0.97x of 192)";
  EXPECT_TRUE(plan_for(16, 16, 4).tile);
  EXPECT_EQ(plan_for(16, 16, 4).block, 256) << "the staged float d = 16 kernel: 256 (128 1.03x, 192 1.07x)";
  km::FusedConfig unstaged;
  unstaged.staged = false;
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, unstaged).block, 256);
  EXPECT_TRUE(plan_for(32, 16, 4).tile);
  EXPECT_EQ(plan_for(32, 16, 4).block, 192) << "float, d = 17-32 up to K = 64 where the staged kernel is planned";
  EXPECT_EQ(plan_for(32, 16, 4).queue_threads, 192);
  EXPECT_FALSE(plan_for(32, 8, 4).tile);
  EXPECT_EQ(plan_for(32, 8, 4).block, 256);
  EXPECT_FALSE(plan_for(24, 16, 4).tile) << "d below its width: no staged kernel";
  EXPECT_EQ(plan_for(24, 16, 4).block, 256);
  EXPECT_TRUE(plan_for(32, 64, 4).mma);
  EXPECT_EQ(plan_for(32, 64, 4).block, 256) << "the tensor-core scores at width 32 in float: 256";
  EXPECT_EQ(plan_for(32, 128, 4).block, 256);
  EXPECT_EQ(plan_for(4, 16, 4).block, 128);
  EXPECT_EQ(plan_for(8, 64, 4).block, 256);
  EXPECT_EQ(plan_for(2, 16, 4).block, 256);
  EXPECT_EQ(plan_for(16, 64, 4).block, 256);
  for (int given : {32, 128, 256, 1024}) {
    SCOPED_TRACE(given);
    const auto p = plan_for(32, 64, 4, 227 * 1024, {}, 1 << 20, 1.0, given, true);
    EXPECT_EQ(p.block, std::min(given, 256)) << "--block, up to the kernel's launch bounds";
    EXPECT_EQ(p.queue_threads, std::min(given, 256));
    const auto q = plan_for(32, 64, 8, 227 * 1024, {}, 1 << 20, 1.0, given, true);
    EXPECT_EQ(q.block, std::min(given, 192)) << "up to the kernel's launch bounds";
    EXPECT_EQ(q.queue_threads, std::min(given, 192));
  }
  // The shared memory is sized for the block chosen: 256 threads' queues are larger.
  EXPECT_GT(plan_for(32, 64, 8).bytes, plan_for(32, 64, 8, 227 * 1024, {}, 1 << 20, 1.0, 128, true).bytes);
  const auto classic = [] {
    km::FusedConfig o;
    o.classic = true;
    return o;
  }();
  EXPECT_EQ(plan_for(32, 64, 8, 227 * 1024, classic).block, 128) << "no delta kernel: --block's default";
}

// The cell table's kernel takes its rings, their coordinates, the table and the masks from
// delta_cells_layout (6_fused_delta.cuh): whatever the plan chose, the bytes it asks for reach
// past all of them, and the staged loads' buffers start after them.
// The dynamic passes' schedule (6_fused_delta.cuh: the lean cell passes, as the staged kernel's in
// double), simulated on the CPU with the warps stepping in a random order: warp g of G takes chunks
// g and g + G, then 2 G + v C + g % C for the v-th count of counter g % C, each count taken a chunk
// ahead and only while the chunk it follows is one to do. Every chunk below the total must be done
// exactly once, for grids the host lets take the counters (delta_chunks_dynamic: G >= C); with
// fewer warps than counters, chunks are lost, which is why the host keeps those grids on fixed
// shares.
namespace {
std::vector<int> simulate_chunk_schedule(long long warps, long long chunks, unsigned seed) {
  constexpr long long C = km::kernels::kDeltaChunkCounters;
  struct Warp {
    long long c, following;
    unsigned count;
  };
  std::vector<unsigned> counter(C, 0);
  std::vector<int> done(static_cast<std::size_t>(chunks), 0);
  std::vector<Warp> w;
  for (long long g = 0; g < warps; ++g) {
    Warp x{g, g + warps, 0};
    if (x.following < chunks) x.count = counter[g % C]++;
    w.push_back(x);
  }
  std::mt19937 rng(seed);
  std::vector<long long> live;
  for (long long g = 0; g < warps; ++g)
    if (w[g].c < chunks) live.push_back(g);
  while (!live.empty()) {
    const std::size_t pick = rng() % live.size();
    const long long g = live[pick];
    Warp& x = w[g];
    ++done[static_cast<std::size_t>(x.c)];  // (the pass)
    x.c = x.following;
    if (x.c < chunks) {
      x.following = 2 * warps + static_cast<long long>(x.count) * C + g % C;
      if (x.following < chunks) x.count = counter[g % C]++;
    } else {
      live.erase(live.begin() + static_cast<long>(pick));
    }
  }
  return done;
}
}  // namespace

TEST(DeltaChunks, EveryChunkOnceWhereTheHostTakesTheCounters) {
  for (const long long blocks : {1LL, 2LL, 3LL, 132LL, 396LL}) {
    for (const int threads : {32, 128, 256}) {
      const long long warps = blocks * (threads / 32);
      for (const long long chunks : {1LL, warps, 2 * warps, 2 * warps + 1, 2 * warps + 17, 7 * warps + 5, 40 * warps + 3}) {
        if (!km::kernels::delta_chunks_dynamic(blocks, threads)) continue;
        for (unsigned seed = 1; seed <= 3; ++seed) {
          SCOPED_TRACE("blocks " + std::to_string(blocks) + " threads " + std::to_string(threads) + " chunks " +
                       std::to_string(chunks) + " seed " + std::to_string(seed));
          const std::vector<int> done = simulate_chunk_schedule(warps, chunks, seed);
          EXPECT_EQ(std::count(done.begin(), done.end(), 1), chunks) << "a chunk lost or done twice";
        }
      }
    }
  }
}

TEST(DeltaChunks, FewerWarpsThanCountersStayOnFixedShares) {
  EXPECT_FALSE(km::kernels::delta_chunks_dynamic(1, 256));   // 8 warps
  EXPECT_TRUE(km::kernels::delta_chunks_dynamic(2, 256));    // 16
  EXPECT_FALSE(km::kernels::delta_chunks_dynamic(15, 32));   // 15
  EXPECT_TRUE(km::kernels::delta_chunks_dynamic(16, 32));
  EXPECT_FALSE(km::kernels::delta_chunks_dynamic(132, 48));  // not whole warps
  // Why: 8 warps and chunks beyond 2 G leave counters 8-15 unread, their chunks never done.
  const std::vector<int> done = simulate_chunk_schedule(8, 200, 1);
  EXPECT_LT(std::count(done.begin(), done.end(), 1), 200);
}

TEST(DeltaPlan, CellTableLayoutFitsThePlan) {
  int tables = 0, with_xy = 0, with_masks = 0;
  for (std::size_t elem : {4, 8})
    for (std::size_t k : {8, 16, 17, 32, 33, 64})
      for (std::size_t optin : {48 * 1024, 64 * 1024, 100 * 1024, 227 * 1024})
        for (int block : {64, 128, 256})
          for (int side : {0, 4, 64, 128, 256})
            for (int tile : {0, 1}) {
              km::FusedConfig env;
              if (side) env.cells = side;
              if (tile) env.staged = true;
              const auto p = plan_for(2, k, elem, optin, env, 1 << 20, 1.0, block, true);
              if (!p.delta || !p.cells_side) continue;
              SCOPED_TRACE("elem " + std::to_string(elem) + " k " + std::to_string(k) + " optin " +
                           std::to_string(optin) + " block " + std::to_string(block) + " side " +
                           std::to_string(p.cells_side) + (tile ? " staged" : ""));
              const std::size_t base = (km::kernels::delta_layout<std::size_t>(k, 2, elem).bytes + 15) / 16 * 16;
              const auto at = km::kernels::delta_cells_layout((p.queue_threads + 31) / 32, km::kernels::delta_unroll(2, elem),
                                                              elem, p.cells_side, p.ring_xy, p.cell_masks);
              EXPECT_EQ(p.queue_threads, block) << "the kernel's warps are the block's";
              EXPECT_LE(base + at.end, p.bytes);
              EXPECT_LE(p.bytes, optin);
              EXPECT_EQ((base + at.table) % 16, 0u) << "the table is copied 16 bytes at a time";
              EXPECT_EQ((base + at.masks) % 16, 0u) << "so are the masks";
              if (p.tile) {
                EXPECT_GE(p.tile_offset, base + at.end);
              }
              ++tables;
              with_xy += p.ring_xy;
              with_masks += p.cell_masks;
            }
  EXPECT_GT(tables, 100);
  EXPECT_GT(with_xy, 0);
  EXPECT_LT(with_xy, tables);
  EXPECT_GT(with_masks, 0);
  EXPECT_LT(with_masks, tables);
}

TEST(DeltaPlan, OverridesAndLimits) {
  km::FusedConfig env;
  env.classic = true;
  EXPECT_FALSE(plan_for(16, 16, 8, 227 * 1024, env).delta);
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, env).describe(), "");
  env = {};
  env.fixed_width = false;
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, env).describe(), "") << "the staged kernel needs d fixed";
  env = {};
  env.staged = false;
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, env).describe(), "d fixed") << "no float copy without the staged kernel";
  env.staged = true;
  EXPECT_EQ(plan_for(16, 8, 4, 227 * 1024, env).describe(), "d fixed, staged");
  EXPECT_EQ(plan_for(2, 16, 4, 227 * 1024, env).describe(), "staged, cells");
  env = {};
  env.mma = true;
  EXPECT_EQ(plan_for(16, 16, 4, 227 * 1024, env).describe(), "d fixed, staged, mma") << "staged there by default";
  env.staged = false;
  EXPECT_EQ(plan_for(16, 16, 4, 227 * 1024, env).describe(), "d fixed, mma");
  env.staged.reset();
  EXPECT_EQ(plan_for(8, 16, 4, 227 * 1024, env).describe(), "d fixed") << "no mma at width 8";
  env.mma = false;
  EXPECT_EQ(plan_for(32, 64, 4, 227 * 1024, env).describe(), "d fixed");
  env = {};
  env.float_copy = false;
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, env).describe(), "d fixed, staged") << "float_copy=0";
  env.float_copy = true;
  EXPECT_EQ(plan_for(16, 16, 4, 227 * 1024, env).describe(), "d fixed, staged") << "no float copy in float";
  EXPECT_EQ(plan_for(16, 24, 8, 227 * 1024, env).describe(), "d fixed, mma") << "nor with the tensor-core scores";
  EXPECT_EQ(plan_for(16, 8, 8, 227 * 1024, env).describe(), "d fixed") << "nor where no staged kernel runs";
  EXPECT_EQ(plan_for(12, 16, 8, 227 * 1024, env).describe(), "") << "nor with d at run time";
  EXPECT_EQ(plan_for(32, 16, 8, 227 * 1024, env).describe(), "d fixed, staged") << "nor at d = 32";
  env.staged = true;
  EXPECT_EQ(plan_for(2, 16, 8, 227 * 1024, env).describe(), "staged, cells") << "nor with the cell table";
  env = {};
  env.cells = 0;
  EXPECT_EQ(plan_for(2, 64, 8, 227 * 1024, env).cells_side, 0);
  EXPECT_TRUE(plan_for(2, 64, 8, 227 * 1024, env).ball) << "without the table, Elkan's test at K > 32";
  env.cells = 256;
  EXPECT_EQ(plan_for(2, 16, 8, 227 * 1024, env).cells_side, 256);
  env = {};
  env.ring_xy = false;
  EXPECT_FALSE(plan_for(2, 16, 8, 227 * 1024, env).ring_xy) << "ring_xy=0";
  EXPECT_FALSE(plan_for(2, 16, 4, 227 * 1024, env).ring_xy);
  env.ring_xy = true;
  EXPECT_TRUE(plan_for(2, 64, 8, 227 * 1024, env).ring_xy) << "ring_xy=1: in double at 128 x 128 cells too";
  env = {};
  env.ball = false;
  EXPECT_FALSE(plan_for(1, 64, 8, 227 * 1024, env).ball);
  env.ball = true;
  EXPECT_TRUE(plan_for(1, 16, 8, 227 * 1024, env).ball);
  // The data: beyond 2^48 the float filter could overflow; u32 indices in the table's rings.
  EXPECT_FALSE(plan_for(16, 16, 8, 227 * 1024, {}, 1 << 20, 0x1p49).delta);
  EXPECT_EQ(plan_for(2, 16, 8, 227 * 1024, {}, std::size_t{1} << 32).cells_side, 0);
  EXPECT_FALSE(plan_for(2, 65535, 8).delta);
  // A smaller device: the table's side halves to fit, the tensor-core tables may not fit at all,
  // and nothing the plan sizes passes the limit.
  for (std::size_t optin : {48 * 1024, 64 * 1024, 100 * 1024, 164 * 1024, 227 * 1024})
    for (std::size_t d : {2, 16, 32})
      for (std::size_t k : {16, 64})
        for (std::size_t elem : {4, 8}) {
          SCOPED_TRACE("optin " + std::to_string(optin) + " d " + std::to_string(d) + " k " + std::to_string(k));
          km::FusedConfig all;
          all.staged = true;
          all.mma = true;
          all.cells = 256;
          expect_fits(plan_for(d, k, elem, optin, all), optin);
          expect_fits(plan_for(d, k, elem, optin), optin);
        }
  env = {};
  env.cells = 256;
  const auto small = plan_for(2, 64, 8, 48 * 1024, env);
  EXPECT_GT(small.cells_side, 0);
  EXPECT_LT(small.cells_side, 256) << "48 KB cannot hold 256 x 256 cells beside the rest";
}

TEST(Registry, SupportsAnswersWithAReason) {
  // The CPU implementations take every shape; without a GPU every GPU one refuses and says why.
  for (const char* cpu : {"seq", "omp"}) EXPECT_TRUE(km::supports(km::find_implementation(cpu), 65536, 1024, 8).ok);
  km::GpuInfo big;
  big.present = true;
  big.shared_optin = 227 * 1024;
  const km::Implementation& shared = km::find_implementation("shared");
  ASSERT_NE(shared.supports, nullptr);
  EXPECT_TRUE(shared.supports(16, 16, 8, big).ok);
  const km::Support no = shared.supports(2000, 64, 8, big);  // 1 MB of centroids
  EXPECT_FALSE(no.ok);
  EXPECT_NE(no.reason.find("shared memory"), std::string::npos) << no.reason;
  EXPECT_NE(no.reason.find("--impl=fused"), std::string::npos) << no.reason;
  // The limit is the device's, not a constant: a smaller device refuses sooner.
  km::GpuInfo small = big;
  small.shared_optin = 48 * 1024;
  EXPECT_TRUE(shared.supports(49, 128, 8, big).ok);
  EXPECT_FALSE(shared.supports(49, 128, 8, small).ok);
  EXPECT_TRUE(shared.supports(48, 128, 8, small).ok) << "exactly the limit fits";
  EXPECT_FALSE(km::find_implementation("fused").supports(65536, 65536, 8, big).ok) << "K*d past int";
  EXPECT_TRUE(km::find_implementation("fused").supports(65536, 1024, 8, big).ok);
  if (!km::gpu_info().present)
    for (const km::Implementation* impl : km::implementations())
      if (impl->needs_gpu()) {
        const km::Support s = km::supports(*impl, 16, 16, 8);
        EXPECT_FALSE(s.ok) << impl->name;
        EXPECT_NE(s.reason.find("needs a CUDA GPU"), std::string::npos) << s.reason;
      }
}

// The delta kernel's staged loads (6_fused_delta.cuh, TILE) copy a warp's pass by the plan in
// layouts.hpp: every 16-byte chunk of every coordinate row exactly once over the steps and 32 lanes,
// where the kernel instantiates it (d = 2 with the cells, U = 4; d = 16 and 32, the delta kernel's
// U) and where it does not (d = 8); where a row is at most 32 chunks, a lane's rows step by a
// constant stride and its chunk stays (the kernel's addressing); the buffers hold the rows, the
// labels' row and, with mma, the stage's rows of x''.
TEST(Layouts, StagedCopyPlanCoversEveryChunkOnce) {
  using namespace km::kernels;
  for (int maxd : {2, 8, 16, 32})
    for (std::size_t elem : {4, 8})
      for (int unroll : {1, 2, 4}) {
        SCOPED_TRACE("maxd " + std::to_string(maxd) + " elem " + std::to_string(elem) + " U " + std::to_string(unroll));
        const int rc = tile_row_chunks(unroll, elem), steps = tile_copy_steps(maxd, unroll, elem);
        EXPECT_EQ(rc * 16, 32 * unroll * static_cast<int>(elem));
        if (maxd >= 16 && unroll == delta_unroll(maxd, elem)) {
          EXPECT_GT(steps, 0) << "an instantiated width without a plan";
        }
        if (maxd == 2 && unroll == delta_unroll(2, elem)) {
          EXPECT_GT(steps, 0);
        }
        if (steps == 0) continue;
        std::vector<int> seen(static_cast<std::size_t>(maxd * rc), 0);
        for (int step = 0; step < steps; ++step)
          for (int lane = 0; lane < 32; ++lane) {
            const TileChunk c = tile_chunk(maxd, unroll, elem, step, lane);
            ASSERT_GE(c.row, 0);
            ASSERT_LT(c.row, maxd);
            ASSERT_GE(c.col, 0);
            ASSERT_LT(c.col, rc);
            ++seen[static_cast<std::size_t>(c.row * rc + c.col)];
            if (rc <= 32) {
              const TileChunk f = tile_chunk(maxd, unroll, elem, 0, lane);
              EXPECT_EQ(c.row, f.row + step * (32 / rc));
              EXPECT_EQ(c.col, f.col);
            }
          }
        for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "chunk " << i;
        EXPECT_LE(8 * unroll, 32) << "the labels' row, a chunk a lane";
        for (bool mma : {false, true}) {
          const std::size_t buffer = delta_tile_warp_bytes(maxd, elem, unroll, mma) / 2;
          EXPECT_GE(buffer, static_cast<std::size_t>((maxd + 1) * 32 * unroll) * elem);
          if (mma) {
            EXPECT_GE(buffer, static_cast<std::size_t>(32 * unroll * (maxd + 4)) * 4);
          }
          EXPECT_EQ(buffer % 16, 0u) << "each buffer 16-byte aligned";
        }
      }
  EXPECT_EQ(tile_copy_steps(16, 2, 4), 8) << "d = 16 in float: 16 chunks a row, two rows a step";
  EXPECT_EQ(tile_copy_steps(2, 4, 8), 4) << "d = 2 in double: 64 chunks a row, two steps a row";
  EXPECT_EQ(tile_copy_steps(8, 8, 4), 0) << "labels of 64 U bytes: more chunks than lanes";
}

TEST(Layouts, SharedMemoryFootprints) {
  using namespace km::kernels;
  EXPECT_EQ(centroids_bytes(16, 16, 8), 2048u);
  for (std::size_t k : {1, 2, 3, 16, 17, 257})
    for (std::size_t d : {1, 2, 16, 33})
      for (std::size_t elem : {4, 8}) {
        const BlockSumsLayout<std::size_t> l = block_sums_layout<std::size_t>(k, d, elem);
        EXPECT_EQ(l.counts_offset, k * d * 8);
        EXPECT_GE(l.centroids_offset, l.counts_offset + k * 4);
        EXPECT_EQ(l.centroids_offset % 8, 0u) << "centroids must stay 8-byte aligned";
        EXPECT_EQ(l.bytes, l.centroids_offset + k * d * elem);
      }
  // The delta kernel's centroid rows (above width 2, up to kDeltaRowsMaxK centroids): 16-byte
  // aligned rows of the width and 16 bytes, after the [d][k] centroids; none past them.
  for (std::size_t k : {1, 5, 64, 65, 128, 1024})
    for (std::size_t d : {2, 3, 4, 16, 32})
      for (std::size_t elem : {4, 8}) {
        const DeltaLayout<std::size_t> l = delta_layout<std::size_t>(k, d, elem);
        const int maxd = fused_register_width(d);
        EXPECT_EQ(l.rows_offset % 16, 0u);
        EXPECT_GE(l.rows_offset, l.centroids_offset + k * d * elem);
        const std::size_t row = d > 2 && k <= 64 ? static_cast<std::size_t>(maxd) + 16 / elem : 0;
        EXPECT_EQ(l.bytes, l.rows_offset + k * row * elem) << k << " " << d << " " << elem;
        EXPECT_EQ(row * elem % 16, 0u) << "each row starts 16-byte aligned";
      }
  EXPECT_EQ(fused_register_width(1), 1);
  EXPECT_EQ(fused_register_width(3), 4);
  EXPECT_EQ(fused_register_width(16), 16);
  EXPECT_EQ(fused_register_width(17), 32);
  EXPECT_EQ(fused_unroll(2), 8);
  EXPECT_EQ(fused_unroll(16), 2);
  EXPECT_EQ(fused_unroll(32), 1);
  EXPECT_TRUE(fused_owner_lanes(16, 32));
  EXPECT_FALSE(fused_owner_lanes(16, 33));
  EXPECT_FALSE(fused_owner_lanes(4, 16));
  EXPECT_TRUE(fused_one_pass(16, 16, 8));
  EXPECT_FALSE(fused_one_pass(16, 33, 8)) << "d > 32 takes the tensor path";
  EXPECT_FALSE(fused_one_pass(1024, 128, 4));
  // The measured crossover (layouts.hpp): one pass for d <= 4 at any K that fits, and for
  // d <= 8 in float; up to K*d = 4096 otherwise (d = 8 up to K = 512 in double, d = 16 up to
  // K = 256, d = 32 up to K = 128).
  EXPECT_TRUE(fused_one_pass(1024, 2, 8));
  EXPECT_TRUE(fused_one_pass(1024, 4, 8));
  EXPECT_TRUE(fused_one_pass(1024, 8, 4));
  EXPECT_TRUE(fused_one_pass(512, 8, 8));
  EXPECT_FALSE(fused_one_pass(1024, 8, 8)) << "the tensor path with the movers' scheme: 1.12 against 1.30 ms";
  EXPECT_TRUE(fused_one_pass(128, 16, 8));
  EXPECT_TRUE(fused_one_pass(256, 16, 8));
  EXPECT_TRUE(fused_one_pass(256, 16, 4));
  EXPECT_FALSE(fused_one_pass(512, 16, 8));
  EXPECT_FALSE(fused_one_pass(512, 16, 4));
  EXPECT_TRUE(fused_one_pass(128, 32, 8));
  EXPECT_TRUE(fused_one_pass(128, 32, 4));
  EXPECT_FALSE(fused_one_pass(256, 32, 8));
  EXPECT_FALSE(fused_one_pass(256, 32, 4));
  EXPECT_FALSE(fused_one_pass(8192, 4, 8)) << "one pass only while its shared memory fits (200 KB)";
  // Wherever the rule gives one pass above K*d = 1024, the delta kernel fits an H100/H200 block
  // (227 KB opt-in), so the engine never falls back there to the classic kernel (20x slower at
  // d = 32, K = 256); at d = 32, K = 256 (outside the rule) it does not fit.
  for (std::size_t d = 9; d <= 32; ++d)
    for (std::size_t k = 2; k * d <= 4096; ++k)
      for (std::size_t elem : {std::size_t{4}, std::size_t{8}})
        if (fused_one_pass(k, d, elem)) {
          EXPECT_LE(delta_shared_bytes(k, d, elem), 232448u) << d << " " << k << " " << elem;
        }
  EXPECT_GT(delta_shared_bytes(256, 32, 8), 232448u);
}

TEST(CpuSteps, TransposesRoundTripAndAccumulate) {
  const std::size_t k = 3, d = 5, stride = 4;
  std::vector<double> rows(k * d), cols(d * stride, -1), back(k * d);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<double>(i);
  km::to_coord_major(rows.data(), k, d, cols.data(), stride);
  EXPECT_EQ(cols[2 * stride + 1], rows[1 * d + 2]);
  EXPECT_EQ(cols[3], -1) << "padding columns untouched";
  km::from_coord_major(cols.data(), k, d, stride, back.data());
  EXPECT_EQ(back, rows);
  std::vector<double> sums(d, 0);
  std::int64_t count = 0;
  km::add_to_cluster(rows.data() + d, d, sums.data(), count);
  km::add_to_cluster(rows.data() + d, d, sums.data(), count);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(sums[4], 2 * rows[d + 4]);
  // chunked_sum: the same bits for any thread count, and each chunk's sum reported.
  const std::size_t n = 3 * km::kSumChunk + 17;
  std::vector<double> chunks;
  const auto value = [](std::size_t i) { return 1.0 / static_cast<double>(i + 1); };
  omp_set_num_threads(1);
  const double one = km::chunked_sum(n, chunks, value);
  omp_set_num_threads(2);
  std::vector<double> chunks2;
  EXPECT_EQ(km::chunked_sum(n, chunks2, value), one);
  EXPECT_EQ(chunks, chunks2);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0] + chunks[1] + chunks[2] + chunks[3], one);
}
