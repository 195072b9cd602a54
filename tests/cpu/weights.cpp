// Sample weights on the CPU (Dataset::weights; kmeans/fixed_point.hpp, cpu_steps.hpp): weights
// of 1 give the unweighted bits, seq against a weighted Lloyd in long double, omp against seq and
// across thread counts, objects of weight 0 change nothing, integer weights as repeated objects,
// weighted k-means++, the weighted inertia of predict, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/init.hpp"
#include "kmeans/registry.hpp"
#include "metric_data.hpp"
#include "test_util.hpp"
#include "weights_data.hpp"

namespace {

using kmtest::sample_weights;

template <class T>
km::Dataset<T> copy_of(const km::Dataset<T>& data) {
  km::Dataset<T> out(data.n, data.d, data.source);
  std::copy_n(data.values.data(), data.n * data.d, out.values.data());
  return out;
}

template <class T>
void expect_same(const km::Result<T>& a, const km::Result<T>& b) {
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_EQ(a.inertia, b.inertia);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.centroids, b.centroids);
}

km::Params given_params(int k, const std::vector<double>& centroids, std::size_t d, km::Metric metric) {
  km::Params p;
  p.k = k;
  p.loops = 30;
  p.init = km::Init::given;
  p.given_d = d;
  p.given_centroids = centroids;
  p.metric = metric;
  return p;
}

// The first k objects as given centroids (in double).
template <class T>
std::vector<double> first_rows(const km::Dataset<T>& data, std::size_t k) {
  return std::vector<double>(data.values.data(), data.values.data() + k * data.d);
}

// Weights of 1 take the weighted code (fixed-point weight totals, w x addends) and must give
// the unweighted fit's bits: in seq, omp, every data kind, both metrics that change the update.
template <class T>
void check_ones() {
  for (int kind = 0; kind < 4; ++kind)
    for (km::Metric metric : {km::Metric::euclidean, km::Metric::cosine}) {
      SCOPED_TRACE(std::string(kmtest::metric_data_name(kind)) + " " + km::to_string(metric));
      const auto data = kmtest::metric_data<T>(kind, 3001, 7, 9, 5);
      auto weighted = copy_of(data);
      weighted.weights = km::HostBuffer<T>(data.n);
      std::fill_n(weighted.weights.data(), data.n, T(1));
      for (const char* name : {"seq", "omp"}) {
        SCOPED_TRACE(name);
        const km::Implementation& impl = km::find_implementation(name);
        for (km::Init init : {km::Init::first, km::Init::random}) {
          km::Params p;
          p.k = 9;
          p.loops = 20;
          p.init = init;
          p.seed = 4;
          p.metric = metric;
          expect_same(km::run(impl, weighted, p), km::run(impl, data, p));
        }
      }
    }
}
TEST(Weights, OnesGiveUnweightedBitsDouble) { check_ones<double>(); }
TEST(Weights, OnesGiveUnweightedBitsFloat) { check_ones<float>(); }

// Lloyd with weights in long double: labels by seq's distance (the same ties), means sum w x / sum w.
struct Reference {
  std::vector<long double> centroids;
  std::vector<std::int32_t> labels;
  int iterations = 0;
};
Reference weighted_lloyd(const km::Dataset<double>& data, std::vector<double> centroids, std::size_t k, int loops) {
  const std::size_t n = data.n, d = data.d;
  Reference r;
  r.labels.assign(n, -1);
  r.centroids.assign(centroids.begin(), centroids.end());
  for (int it = 1; it <= loops; ++it) {
    std::size_t changed = 0;
    std::vector<long double> sums(k * d, 0), weights(k, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int32_t label = km::nearest_centroid(data.row(i), centroids.data(), k, d);
      changed += label != r.labels[i];
      r.labels[i] = label;
      for (std::size_t j = 0; j < d; ++j) sums[label * d + j] += static_cast<long double>(data.weights[i]) * data.row(i)[j];
      weights[label] += data.weights[i];
    }
    r.iterations = it;
    for (std::size_t c = 0; c < k; ++c)
      if (weights[c] > 0)
        for (std::size_t j = 0; j < d; ++j) {
          r.centroids[c * d + j] = sums[c * d + j] / weights[c];
          centroids[c * d + j] = static_cast<double>(r.centroids[c * d + j]);
        }
    if (changed == 0) break;
  }
  return r;
}

TEST(Weights, SeqAndOmpAgreeWithWeightedLloyd) {
  for (bool integers : {false, true}) {
    SCOPED_TRACE(integers ? "integer weights" : "continuous weights with zeros");
    auto data = kmtest::make_data<double>(true, 4000, 5, 6, 8);
    data.weights = sample_weights<double>(data.n, 3, integers);
    const auto init = first_rows(data, 6);
    const Reference ref = weighted_lloyd(data, init, 6, 100);
    const km::Params p = given_params(6, init, data.d, km::Metric::euclidean);
    for (const char* name : {"seq", "omp"}) {
      SCOPED_TRACE(name);
      const auto got = km::run(km::find_implementation(name), data, p);
      EXPECT_EQ(got.iterations, ref.iterations);
      EXPECT_EQ(got.labels, ref.labels);
      for (std::size_t i = 0; i < got.centroids.size(); ++i)
        EXPECT_NEAR(got.centroids[i], static_cast<double>(ref.centroids[i]), 1e-12) << "value " << i;
      long double inertia = 0;
      for (std::size_t i = 0; i < data.n; ++i)
        inertia += data.weights[i] * km::squared_distance_double(data.row(i), &got.centroids[got.labels[i] * data.d],
                                                                 data.d);
      EXPECT_NEAR(got.inertia, static_cast<double>(inertia), 1e-12 * static_cast<double>(inertia));
    }
  }
}

TEST(Weights, OmpSameBitsOnAnyThreadCount) {
  for (int kind = 0; kind < 4; ++kind) {
    auto data = kmtest::metric_data<float>(kind, 20011, 9, 12, 2);
    data.weights = sample_weights<float>(data.n, 7);
    km::Params p;
    p.k = 12;
    p.loops = 15;
    p.init = km::Init::kmeanspp;
    p.seed = 3;
    p.threads = 1;
    const auto one = km::run(km::find_implementation("omp"), data, p);
    p.threads = 3;
    expect_same(km::run(km::find_implementation("omp"), data, p), one);
  }
}

// Objects of weight 0 (here far outliers) move no centroid: seq's addends 0 x and 0 change neither
// its sums nor their carries (add_to_cluster), so the fit is the fit without them, bit for bit, and
// their labels are still their nearest centroids.
TEST(Weights, ZeroWeightObjectsChangeNothing) {
  const auto base = kmtest::make_data<double>(true, 3000, 4, 5, 6);
  km::Dataset<double> with(base.n + 50, base.d, "with outliers");
  std::copy_n(base.values.data(), base.n * base.d, with.values.data());
  for (std::size_t i = base.n; i < with.n; ++i)
    for (std::size_t j = 0; j < with.d; ++j) with.row(i)[j] = 1e6 * static_cast<double>(i % 7 + 1);
  with.weights = km::HostBuffer<double>(with.n);
  std::fill_n(with.weights.data(), base.n, 1.0);
  std::fill_n(with.weights.data() + base.n, with.n - base.n, 0.0);
  const km::Params p = given_params(5, first_rows(base, 5), base.d, km::Metric::euclidean);
  const auto seq = km::find_implementation("seq");
  const auto a = km::run(seq, with, p), b = km::run(seq, base, p);
  EXPECT_EQ(a.centroids, b.centroids);
  EXPECT_EQ(a.inertia, b.inertia);
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_TRUE(std::equal(b.labels.begin(), b.labels.end(), a.labels.begin()));
  const auto o = km::run(km::find_implementation("omp"), with, p);
  for (std::size_t i = 0; i < o.centroids.size(); ++i) EXPECT_NEAR(o.centroids[i], b.centroids[i], 1e-9);
}

// Integer weights fit as the objects repeated that many times (to rounding: the sums' order differs).
TEST(Weights, IntegerWeightsAsRepeatedObjects) {
  auto data = kmtest::make_data<double>(true, 2000, 3, 4, 9);
  data.weights = sample_weights<double>(data.n, 5, true);
  std::size_t total = 0;
  for (std::size_t i = 0; i < data.n; ++i) total += static_cast<std::size_t>(data.weights[i]);
  km::Dataset<double> repeated(total, data.d, "repeated");
  for (std::size_t i = 0, at = 0; i < data.n; ++i)
    for (int r = 0; r < static_cast<int>(data.weights[i]); ++r, ++at) std::copy_n(data.row(i), data.d, repeated.row(at));
  const km::Params p = given_params(4, first_rows(data, 4), data.d, km::Metric::euclidean);
  for (const char* name : {"seq", "omp"}) {
    SCOPED_TRACE(name);
    const auto a = km::run(km::find_implementation(name), data, p);
    const auto b = km::run(km::find_implementation(name), repeated, p);
    EXPECT_EQ(a.iterations, b.iterations);
    for (std::size_t i = 0; i < a.centroids.size(); ++i) EXPECT_NEAR(a.centroids[i], b.centroids[i], 1e-12);
    EXPECT_NEAR(a.inertia, b.inertia, 1e-12 * b.inertia);
  }
}

// Weighted k-means++ (scikit-learn's): every centre is an object of positive weight, the
// same on every run, and not the unweighted draw.
TEST(Weights, KmeansPlusPlusDrawsByWeight) {
  auto data = kmtest::make_data<double>(true, 5000, 3, 8, 4);
  data.weights = km::HostBuffer<double>(data.n);
  for (std::size_t i = 0; i < data.n; ++i) data.weights[i] = i % 10 == 3 ? 1.0 + static_cast<double>(i % 7) : 0.0;
  km::Params p;
  p.k = 8;
  p.init = km::Init::kmeanspp;
  p.seed = 11;
  const auto centres = km::initial_centroids(data, p);
  EXPECT_EQ(km::initial_centroids(data, p), centres);
  for (std::size_t c = 0; c < 8; ++c) {
    bool found = false;
    for (std::size_t i = 3; i < data.n && !found; i += 10)
      found = std::equal(data.row(i), data.row(i) + data.d, centres.begin() + static_cast<std::ptrdiff_t>(c * data.d));
    EXPECT_TRUE(found) << "centre " << c << " is not an object of positive weight";
  }
  auto unweighted = copy_of(data);
  EXPECT_NE(km::initial_centroids(unweighted, p), centres);
}

// predict (score) with weights: the weighted inertia, the labels unchanged.
TEST(Weights, PredictWeighsTheInertia) {
  auto data = kmtest::make_data<double>(true, 1000, 3, 4, 2);
  km::Params p = given_params(4, first_rows(data, 4), data.d, km::Metric::euclidean);
  const auto impl = km::find_implementation("omp");
  const auto plain = km::predict(impl, data, p);
  data.weights = sample_weights<double>(data.n, 9);
  const auto weighted = km::predict(impl, data, p);
  EXPECT_EQ(weighted.labels, plain.labels);
  long double want = 0;
  for (std::size_t i = 0; i < data.n; ++i)
    want += data.weights[i] *
            km::squared_distance_double(data.row(i), &plain.centroids[plain.labels[i] * data.d], data.d);
  EXPECT_NEAR(weighted.inertia, static_cast<double>(want), 1e-12 * static_cast<double>(want));
}

template <class F>
void expect_error(F&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Weights, BadWeightsAreRefusedWithOneLine) {
  auto data = kmtest::make_data<double>(false, 100, 2, 3, 1);
  km::Params p;
  p.k = 3;
  p.init = km::Init::first;
  const auto impl = km::find_implementation("seq");
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (double bad : {-1.0, nan, inf, 0x1p65}) {
    data.weights = km::HostBuffer<double>(data.n);
    std::fill_n(data.weights.data(), data.n, 1.0);
    data.weights[17] = bad;
    expect_error([&] { km::run(impl, data, p); }, "sample weight 17 is");
  }
  std::fill_n(data.weights.data(), data.n, 0.0);
  expect_error([&] { km::run(impl, data, p); }, "the sample weights are all 0");
  data.weights = km::HostBuffer<double>(data.n - 1);
  std::fill_n(data.weights.data(), data.n - 1, 1.0);
  expect_error([&] { km::run(impl, data, p); }, "99 values for 100 objects");
  data.weights = km::HostBuffer<double>(data.n);
  std::fill_n(data.weights.data(), data.n, 1e-30);
  expect_error([&] { km::run(impl, data, p); }, "at least 2^-64 is needed");
}

// Weighted k-means|| (on the CPU): weights of 1 draw and reduce as without weights, bit for bit;
// the same centres on 1 and 3 threads; and weights move them.
TEST(Weights, KmeansParallelByWeight) {
  auto data = kmtest::make_data<double>(true, 30011, 4, 20, 6);
  km::Params p;
  p.k = 20;
  p.init = km::Init::kmeans_parallel;
  p.seed = 3;
  const auto plain = km::initial_centroids(data, p);
  data.weights = km::HostBuffer<double>(data.n);
  std::fill_n(data.weights.data(), data.n, 1.0);
  EXPECT_EQ(km::initial_centroids(data, p), plain);
  data.weights = sample_weights<double>(data.n, 4);
  kmtest::ScopedThreads threads(1);
  const auto one = km::initial_centroids(data, p);
  threads.set(3);
  EXPECT_EQ(km::initial_centroids(data, p), one);
  EXPECT_NE(one, plain);
}

// Weights too spread for 64-bit fixed point (a cluster of the lightest objects would get its mean
// to worse than 2^-30 of max|x|): the fixed-point rungs refuse them, seq (double sums) takes them
// and gets the light cluster's mean; predict (score) with weights all 0 gives an inertia of 0.
TEST(Weights, SpreadBeyondFixedPointIsRefusedWhereItMatters) {
  auto data = kmtest::make_data<double>(true, 1000, 2, 4, 3);
  data.weights = km::HostBuffer<double>(data.n);
  std::fill_n(data.weights.data(), data.n, 1.0);
  data.weights[5] = 1e12;
  const km::Params p = given_params(4, first_rows(data, 4), data.d, km::Metric::euclidean);
  expect_error([&] { km::run(km::find_implementation("omp"), data, p); }, "resolve n * largest / smallest");
  const auto seq = km::run(km::find_implementation("seq"), data, p);
  EXPECT_GT(seq.iterations, 0);
  data.weights[5] = 1e5;  // n * 1e5 < 2^32: taken, and within 1e-9 of seq
  const auto a = km::run(km::find_implementation("omp"), data, p), b = km::run(km::find_implementation("seq"), data, p);
  EXPECT_EQ(a.labels, b.labels);
  for (std::size_t i = 0; i < a.centroids.size(); ++i) EXPECT_NEAR(a.centroids[i], b.centroids[i], 1e-9 * 10);
  std::fill_n(data.weights.data(), data.n, 0.0);
  EXPECT_EQ(km::predict(km::find_implementation("omp"), data, p).inertia, 0.0);
}

}  // namespace
