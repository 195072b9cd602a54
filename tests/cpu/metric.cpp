// The cosine and dot metrics on the CPU (kmeans/metric.hpp, kernels/kmeans/unit_norm.hpp):
// the normalisation's arithmetic, the update's re-normalisation, seq's labels against a
// brute-force similarity in long double, omp against seq, the objective, predict with a fit's
// centroids, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/init.hpp"
#include "kmeans/metric.hpp"
#include "kmeans/registry.hpp"
#include "metric_data.hpp"
#include "test_util.hpp"

namespace {

using km::Metric;

template <class T>
double unit_roundoff() {
  return std::numeric_limits<T>::epsilon() / 2;
}

template <class T>
long double length(const T* v, std::size_t d) {
  long double s = 0;
  for (std::size_t j = 0; j < d; ++j) s += static_cast<long double>(v[j]) * v[j];
  return std::sqrt(s);
}

template <class T>
void check_unit_rows() {
  auto data = kmtest::metric_data<T>(0, 500, 13, 4, 3);
  for (std::size_t j = 0; j < data.d; ++j) data.row(7)[j] = 0;  // a zero object stays zero
  const std::vector<T> before(data.values.data(), data.values.data() + data.n * data.d);
  const auto unit = km::unit_rows(data);
  ASSERT_EQ(unit.n, data.n);
  for (std::size_t i = 0; i < data.n; ++i) {
    if (i == 7) {
      for (std::size_t j = 0; j < data.d; ++j) EXPECT_EQ(unit.row(i)[j], T(0));
      continue;
    }
    EXPECT_NEAR(static_cast<double>(length(unit.row(i), data.d)), 1.0, 4 * unit_roundoff<T>()) << "object " << i;
    // Each coordinate is x_j / |x| correctly rounded from double: within one ulp of the exact quotient.
    const long double norm = length(data.row(i), data.d);
    for (std::size_t j = 0; j < data.d; ++j)
      EXPECT_NEAR(static_cast<double>(unit.row(i)[j]), static_cast<double>(data.row(i)[j] / norm),
                  2 * unit_roundoff<T>());
  }
  EXPECT_TRUE(std::equal(before.begin(), before.end(), data.values.data())) << "the caller's data changed";
}

TEST(Metric, UnitRowsDouble) { check_unit_rows<double>(); }
TEST(Metric, UnitRowsFloat) { check_unit_rows<float>(); }

// Rows whose squares leave double's range (their sum overflows, or underflows towards 0) have the
// same unit rows, bit for bit, as the rows scaled back by a power of two: not rows of length 0.
// And a cosine fit of such data gives the labels of the unscaled data.
TEST(Metric, UnitRowsOfHugeAndTinyValues) {
  const auto data = kmtest::metric_data<double>(1, 400, 6, 3, 8);
  const auto unit = km::unit_rows(data);
  km::Params p;
  p.k = 3;
  p.metric = Metric::cosine;
  p.init = km::Init::first;
  const auto want = km::run(km::find_implementation("seq"), data, p);
  for (const int e : {600, -600, 1000, -1000}) {
    SCOPED_TRACE("2^" + std::to_string(e));
    km::Dataset<double> scaled(data.n, data.d, "scaled");
    for (std::size_t i = 0; i < data.n * data.d; ++i) scaled.values.data()[i] = std::ldexp(data.values.data()[i], e);
    const auto got = km::unit_rows(scaled);
    EXPECT_TRUE(std::equal(got.values.data(), got.values.data() + got.n * got.d, unit.values.data()));
    EXPECT_EQ(km::run(km::find_implementation("seq"), scaled, p).labels, want.labels);
    EXPECT_EQ(km::run(km::find_implementation("omp"), scaled, p).labels, want.labels);
  }
}

// The update with `unit`: the normalised mean, an empty cluster and a mean of length 0 keep
// their centroids, and the shift is measured against the normalised values.
template <class T>
void check_unit_update() {
  const std::size_t k = 3, d = 4;
  const double inv_scale = 0x1p-20;
  std::vector<std::int64_t> sums(k * d), counts = {2, 0, 3};
  const double means[k][d] = {{3, -4, 0, 12}, {9, 9, 9, 9}, {0, 0, 0, 0}};
  for (std::size_t c = 0; c < k; ++c)
    for (std::size_t j = 0; j < d; ++j) sums[c * d + j] = km::to_fixed(means[c][j] * counts[c], 1 / inv_scale);
  std::vector<T> centroids = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  const std::vector<T> before = centroids;
  const double shift = km::finalize_fixed(sums.data(), counts.data(), k, d, inv_scale, centroids.data(), true);
  const double expect[d] = {3.0 / 13, -4.0 / 13, 0, 12.0 / 13};
  double want_shift = 0;
  for (std::size_t j = 0; j < d; ++j) {
    EXPECT_EQ(centroids[j], static_cast<T>(expect[j])) << "coordinate " << j;
    want_shift += std::pow(static_cast<double>(static_cast<T>(expect[j])) - before[j], 2);
  }
  EXPECT_DOUBLE_EQ(shift, want_shift);
  for (std::size_t j = d; j < k * d; ++j) EXPECT_EQ(centroids[j], before[j]) << "an empty or zero-length mean moved";
  // seq's update (compensated double sums) normalises the same way.
  std::vector<double> dsums(k * d), carries(k * d, 0.0);
  for (std::size_t c = 0; c < k; ++c)
    for (std::size_t j = 0; j < d; ++j) dsums[c * d + j] = means[c][j] * static_cast<double>(counts[c]);
  std::vector<T> seq_centroids = before;
  const std::vector<double> dcounts(counts.begin(), counts.end());
  km::finalize_centroids(dsums.data(), carries.data(), dcounts.data(), k, d, seq_centroids.data(), true);
  EXPECT_EQ(seq_centroids, centroids);
}

TEST(Metric, UnitUpdateDouble) { check_unit_update<double>(); }
TEST(Metric, UnitUpdateFloat) { check_unit_update<float>(); }

km::Params metric_params(Metric metric, int k) {
  km::Params p;
  p.k = k;
  p.loops = 8;
  p.metric = metric;
  p.init = km::Init::kmeanspp;
  p.seed = 5;
  return p;
}

// seq's labels are the largest similarity (brute force in long double) except where two
// centroids' similarities agree to within rounding; its centroids have length 1; its inertia is
// the metric's objective.
template <class T>
void check_seq_metric(Metric metric) {
  const double u = unit_roundoff<T>();
  for (int kind = 0; kind < 4; ++kind) {
    SCOPED_TRACE(std::string(km::to_string(metric)) + " " + kmtest::metric_data_name(kind));
    const std::size_t n = 2000, d = 9;
    const int k = 12;
    const auto data = kmtest::metric_data<T>(kind, n, d, k, 11);
    const auto r = km::run(km::find_implementation("seq"), data, metric_params(metric, k));
    for (int c = 0; c < k; ++c)
      EXPECT_NEAR(static_cast<double>(length(&r.centroids[c * d], d)), 1.0, 8 * u) << "centroid " << c;
    long double objective = 0;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const T* x = data.row(i);
      const long double mine = kmtest::similarity(x, &r.centroids[r.labels[i] * d], d, metric);
      long double best = mine;
      for (int c = 0; c < k; ++c) best = std::max(best, kmtest::similarity(x, &r.centroids[c * d], d, metric));
      const long double scale = metric == Metric::dot ? length(x, d) : 1;
      if (best - mine > 16 * d * u * scale) ++wrong;
      objective += metric == Metric::cosine ? 1 - mine : -mine * length(&r.centroids[r.labels[i] * d], d);
    }
    EXPECT_EQ(wrong, 0u) << "objects whose label is not their largest similarity beyond rounding";
    const double size = metric == Metric::cosine ? static_cast<double>(n) : static_cast<double>(n) * 1000 * std::sqrt(d);
    EXPECT_NEAR(r.inertia, static_cast<double>(objective), 16 * d * u * size);
  }
}

TEST(Metric, SeqCosineDouble) { check_seq_metric<double>(Metric::cosine); }
TEST(Metric, SeqCosineFloat) { check_seq_metric<float>(Metric::cosine); }
TEST(Metric, SeqDotDouble) { check_seq_metric<double>(Metric::dot); }
TEST(Metric, SeqDotFloat) { check_seq_metric<float>(Metric::dot); }

// omp: the same bits on 1 and 3 threads; against seq (double sums, not fixed point), the same
// iterations and labels but at near-ties, centroids to rounding.
template <class T>
void check_omp_metric(Metric metric) {
  for (int kind = 0; kind < 4; ++kind) {
    SCOPED_TRACE(std::string(km::to_string(metric)) + " " + kmtest::metric_data_name(kind));
    const std::size_t n = 3000, d = 16;
    const int k = 10;
    const auto data = kmtest::metric_data<T>(kind, n, d, k, 29);
    km::Params p = metric_params(metric, k);
    const auto seq = km::run(km::find_implementation("seq"), data, p);
    p.threads = 1;
    const auto one = km::run(km::find_implementation("omp"), data, p);
    p.threads = 3;
    const auto three = km::run(km::find_implementation("omp"), data, p);
    EXPECT_EQ(one.centroids, three.centroids);
    EXPECT_EQ(one.labels, three.labels);
    EXPECT_EQ(one.inertia, three.inertia);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += one.labels[i] != seq.labels[i];
    EXPECT_LE(differ, n / 200);
    for (std::size_t i = 0; i < seq.centroids.size(); ++i)
      EXPECT_NEAR(one.centroids[i], seq.centroids[i], (std::is_same_v<T, float> ? 1e-4 : 1e-10));
  }
}

TEST(Metric, OmpCosineDouble) { check_omp_metric<double>(Metric::cosine); }
TEST(Metric, OmpCosineFloat) { check_omp_metric<float>(Metric::cosine); }
TEST(Metric, OmpDotDouble) { check_omp_metric<double>(Metric::dot); }
TEST(Metric, OmpDotFloat) { check_omp_metric<float>(Metric::dot); }

// predict with a fit's centroids gives the fit's labels and objective (the centroids, already of
// length 1, are taken as they are).
template <class T>
void check_predict_metric(const char* impl, Metric metric) {
  SCOPED_TRACE(std::string(impl) + " " + km::to_string(metric));
  const auto data = kmtest::metric_data<T>(1, 2500, 7, 6, 41);
  const auto fit = km::run(km::find_implementation(impl), data, metric_params(metric, 6));
  km::Params p;
  p.k = 6;
  p.metric = metric;
  p.init = km::Init::given;
  p.given_d = data.d;
  p.given_centroids.assign(fit.centroids.begin(), fit.centroids.end());
  const auto again = km::predict(km::find_implementation(impl), data, p);
  EXPECT_EQ(again.centroids, fit.centroids);
  EXPECT_EQ(again.labels, fit.labels);
  EXPECT_EQ(again.inertia, fit.inertia);
}

TEST(Metric, PredictGivesFitLabels) {
  for (const char* impl : {"seq", "omp"})
    for (Metric metric : {Metric::cosine, Metric::dot}) {
      check_predict_metric<double>(impl, metric);
      check_predict_metric<float>(impl, metric);
    }
}

TEST(Metric, ZeroLengthCentroidRefused) {
  auto data = kmtest::metric_data<double>(0, 100, 3, 2, 1);
  for (std::size_t j = 0; j < 3; ++j) data.row(1)[j] = 0;
  km::Params p = metric_params(Metric::dot, 2);
  p.init = km::Init::first;
  try {
    km::run(km::find_implementation("seq"), data, p);
    FAIL() << "a zero initial centroid was accepted";
  } catch (const km::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("initial centroid 1 has length 0"), std::string::npos) << e.what();
    // drawn from the data: the message says where it came from and what to do
    EXPECT_NE(std::string(e.what()).find("--init=first took it from the data: remove rows of length 0"),
              std::string::npos)
        << e.what();
  }
}

// The number of rows of c (K rows of d) that are all zeros.
int zero_centres(const std::vector<double>& c, std::size_t d) {
  int zeros = 0;
  for (std::size_t r = 0; r * d < c.size(); ++r)
    zeros += std::all_of(c.begin() + r * d, c.begin() + (r + 1) * d, [](double v) { return v == 0; });
  return zeros;
}
km::Dataset<double> with_zero_rows(std::size_t n, std::size_t d, std::size_t every) {
  auto data = kmtest::metric_data<double>(0, n, d, 20, 1);
  for (std::size_t i = 0; i < n; i += every) std::fill(data.row(i), data.row(i) + d, 0.0);
  return data;
}
km::Dataset<double> copy_of(const km::Dataset<double>& from) {
  km::Dataset<double> to(from.n, from.d);
  std::copy_n(from.values.data(), from.n * from.d, to.values.data());
  return to;
}
const km::Init kDrawingInits[] = {km::Init::kmeanspp, km::Init::kmeans_parallel, km::Init::random};

// k-means++, k-means|| and random never draw a row of length 0 under cosine and dot (a third of
// the rows here, as padding would be): the fit runs, no initial centroid is zero, the centres are
// distinct rows, and the seed still decides them. (Euclidean draws them.)
TEST(Metric, DrawsSkipZeroRows) {
  const auto data = with_zero_rows(600, 8, 3);
  for (km::Init init : kDrawingInits) {
    km::Params p = metric_params(Metric::euclidean, 150);
    p.init = init;
    EXPECT_GT(zero_centres(km::initial_centroids(data, p), data.d), 0) << "euclidean draws rows of length 0";
    for (Metric metric : {Metric::cosine, Metric::dot}) {
      SCOPED_TRACE(std::string(km::to_string(init)) + " " + km::to_string(metric));
      p.metric = metric;
      const auto c = km::initial_centroids(data, p);
      EXPECT_EQ(zero_centres(c, data.d), 0);
      std::vector<std::vector<double>> rows;
      for (std::size_t r = 0; r * data.d < c.size(); ++r)
        rows.emplace_back(c.begin() + r * data.d, c.begin() + (r + 1) * data.d);
      std::sort(rows.begin(), rows.end());
      EXPECT_EQ(std::unique(rows.begin(), rows.end()) - rows.begin(), 150) << "distinct rows";
      p.seed += 1;
      EXPECT_NE(km::initial_centroids(data, p), c);
      for (const char* impl : {"seq", "omp"}) EXPECT_NO_THROW(km::run(km::find_implementation(impl), data, p)) << impl;
    }
  }
}

// Almost every row zero (99%, or 5 of 400,000: past draw_nonzero_row's redraws, the scan), and
// fewer non-zero directions than K (the D^2 draws' fallback draws duplicates, never zero rows):
// no initial centroid is zero. Random with fewer non-zero rows than K says so.
TEST(Metric, DrawsSkipZeroRowsWhenAlmostAllAreZero) {
  const auto sparse = with_zero_rows(20000, 4, 1);
  auto mostly = copy_of(sparse);
  for (std::size_t i = 0; i < mostly.n; i += 100) mostly.row(i)[i % 4] = 1.0 + static_cast<double>(i);
  auto five = with_zero_rows(400000, 2, 1);
  for (std::size_t i = 0; i < 5; ++i) five.row(77777 * (i + 1))[0] = 1.0 + static_cast<double>(i);
  auto directions = kmtest::metric_data<double>(0, 330, 3, 2, 1);
  for (std::size_t i = 0; i < directions.n; ++i)
    for (std::size_t j = 0; j < 3; ++j) directions.row(i)[j] = i % 11 == 0 ? 0.0 : (i % 3 == j ? 1.0 : 0.0);
  for (km::Init init : kDrawingInits)
    for (Metric metric : {Metric::cosine, Metric::dot}) {
      SCOPED_TRACE(std::string(km::to_string(init)) + " " + km::to_string(metric));
      km::Params p = metric_params(metric, 10);
      p.init = init;
      for (p.seed = 1; p.seed <= 20; ++p.seed) EXPECT_EQ(zero_centres(km::initial_centroids(mostly, p), 4), 0);
      p.k = 3;
      EXPECT_EQ(zero_centres(km::initial_centroids(five, p), 2), 0);
      p.k = 8;
      if (init == km::Init::random) {
        kmtest::expect_error([&] { km::initial_centroids(five, p); }, "fewer than --clusters=8 rows have a non-zero");
      } else {
        for (p.seed = 1; p.seed <= 10; ++p.seed)
          EXPECT_EQ(zero_centres(km::initial_centroids(directions, p), 3), 0) << "seed " << p.seed;
      }
      kmtest::expect_error([&] { km::initial_centroids(sparse, p); },
                           init == km::Init::random ? "fewer than --clusters=8" : "every row has length 0");
    }
}

// Sample weights: rows of length 0 weigh for no k-means|| candidate, so weights 0 on them give the
// unweighted centres; k-means++ with no non-zero row of positive weight says so (no endless walk).
TEST(Metric, DrawsSkipZeroRowsWeighted) {
  const auto data = with_zero_rows(3000, 6, 2);
  auto weighted = copy_of(data);
  weighted.weights = km::HostBuffer<double>(data.n);
  for (std::size_t i = 0; i < data.n; ++i) weighted.weights[i] = i % 2 == 0 ? 0.0 : 1.0;
  km::Params p = metric_params(Metric::cosine, 40);
  p.init = km::Init::kmeans_parallel;
  for (p.seed = 1; p.seed <= 5; ++p.seed)
    EXPECT_EQ(km::initial_centroids(weighted, p), km::initial_centroids(data, p)) << "seed " << p.seed;
  for (std::size_t i = 1; i < data.n; i += 2) weighted.weights[i] = 0.0;
  weighted.weights[0] = 1.0;  // a row of length 0
  p.init = km::Init::kmeanspp;
  kmtest::expect_error([&] { km::initial_centroids(weighted, p); }, "every row has length 0 (or, with sample weights");
}

TEST(Metric, Names) {
  for (Metric m : {Metric::euclidean, Metric::cosine, Metric::dot})
    EXPECT_EQ(km::metric_from_string(km::to_string(m)), m);
  EXPECT_THROW(km::metric_from_string("manhattan"), km::UsageError);
}

}  // namespace
