// seq, the reference, against brute force; omp against seq over a table of shapes, both
// precisions, uniform and blobs, exactly seq's labels on larger data and the same bits on any
// thread count; the 64-bit fixed-point sums the GPU rungs share with omp; the CPU steps.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "io/generate.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/init.hpp"
#include "kmeans/registry.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

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

// Initial centroids far from the data (an --init file, Python's init=): the first iteration's
// inertia, a sum of fixed-point addends in omp, must not overflow (the scale counts the initial
// centroids: fixed_point.hpp). Against the brute-force sum in double, to float's or double's
// rounding of the distances; seq's likewise.
template <class T>
void check_far_initial_centroids() {
  const std::size_t n = 3000, d = 4, k = 8;
  const auto data = km::generate_uniform<T>(n, d, 11);
  for (double offset : {6.0, 1e6}) {
    km::Params p;
    p.k = static_cast<int>(k);
    p.loops = 3;
    p.threads = 3;
    p.init = km::Init::given;
    p.given_d = d;
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t j = 0; j < d; ++j) p.given_centroids.push_back(static_cast<double>(data.row(c)[j]) + offset);
    std::vector<T> initial(p.given_centroids.begin(), p.given_centroids.end());
    double expected = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double best = INFINITY;
      for (std::size_t c = 0; c < k; ++c) best = std::min(best, dist2(data.row(i), &initial[c * d], d));
      expected += best;
    }
    const double rel = std::is_same_v<T, float> ? 1e-5 : 1e-12;
    for (const char* name : {"seq", "omp"}) {
      const auto r = run_impl(name, data, p);
      ASSERT_FALSE(r.per_iteration.empty());
      EXPECT_NEAR(r.per_iteration[0].inertia, expected, rel * expected) << name << " offset " << offset;
    }
  }
}

TEST(Omp, FarInitialCentroidsKeepTheFirstInertiaDouble) { check_far_initial_centroids<double>(); }
TEST(Omp, FarInitialCentroidsKeepTheFirstInertiaFloat) { check_far_initial_centroids<float>(); }

// Data far from 0 with a small spread (1e8 plus noise of 1e-4, in double): seq's compensated sums
// (add_to_cluster) give each mean to within an ulp of the exact one, computed here in long double
// from the same labels. Plain sums of x, the mean their total over the count, are many ulps away on
// this data (checked below, so that the data can tell the two apart).
TEST(Seq, MeansStayExactOnOffsetData) {
  const std::size_t n = 200000, d = 2;
  auto data = km::generate_uniform<double>(n, d, 3);
  for (std::size_t i = 0; i < n * d; ++i) data.values[i] = 1e8 + 1e-4 * data.values[i];
  km::Params p;
  p.k = 4;
  p.loops = 1;
  p.init = km::Init::kmeanspp;
  p.seed = 3;
  const auto one = run_impl("seq", data, p);
  const auto init = km::initial_centroids(data, p);
  const std::size_t k = static_cast<std::size_t>(p.k);
  std::vector<long double> sum(k * d, 0.0L), count(k, 0.0L);
  std::vector<double> plain(k * d, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<std::size_t>(km::nearest_centroid(data.row(i), init.data(), k, d));
    count[c] += 1;
    for (std::size_t j = 0; j < d; ++j) {
      sum[c * d + j] += data.row(i)[j] - 1e8L;  // exact in long double
      plain[c * d + j] += data.row(i)[j];
    }
  }
  const double ulp = std::nextafter(1e8, 2e8) - 1e8;
  double plain_worst = 0;
  for (std::size_t c = 0; c < k; ++c)
    for (std::size_t j = 0; j < d; ++j) {
      const double exact = static_cast<double>(1e8L + sum[c * d + j] / count[c]);
      EXPECT_LE(std::fabs(one.centroids[c * d + j] - exact), ulp) << "centroid " << c << " coordinate " << j;
      plain_worst = std::max(plain_worst, std::fabs(plain[c * d + j] / static_cast<double>(count[c]) - exact) / ulp);
    }
  EXPECT_GT(plain_worst, 10) << "plain sums are as good here: the data does not test the compensation";
}

// A first object far from the rest (1e12 beside values in [0.1, 0.7]) leaves the other cluster's
// mean within an ulp of the exact one; and a cosine cluster whose objects cancel exactly (+-(1, 1)) has a mean of length 0,
// so it keeps its centroid in seq as in omp, whose fixed-point sums are exact.
TEST(Seq, MeansOfFarAndCancellingObjects) {
  km::Dataset<double> far(8, 1);
  const double values[8] = {1e12, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7};
  std::copy(values, values + 8, far.values.data());
  km::Params p;
  p.k = 2;
  const auto r = run_impl("seq", far, p);
  EXPECT_EQ(r.centroids[0], 1e12);
  long double exact = 0;  // the seven doubles' sum, exact in long double's 64 bits
  for (int i = 1; i < 8; ++i) exact += static_cast<long double>(values[i]);
  const double mean = static_cast<double>(exact / 7);  // (the sum rounded, then the quotient: within an ulp)
  EXPECT_LE(std::fabs(r.centroids[1] - mean), std::nextafter(mean, 1.0) - mean);
  km::Dataset<double> pm(20, 2);
  for (std::size_t i = 0; i < 20; ++i) pm.row(i)[0] = pm.row(i)[1] = i < 10 ? 1.0 : -1.0;
  p.metric = km::Metric::cosine;
  p.loops = 20;
  const auto seq = run_impl("seq", pm, p), omp = run_impl("omp", pm, p);
  EXPECT_EQ(seq.labels, omp.labels);
  EXPECT_EQ(seq.centroids, omp.centroids);
  EXPECT_EQ(seq.inertia, omp.inertia);
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

TEST(CpuSteps, TransposesRoundTripAndAccumulate) {
  const std::size_t k = 3, d = 5, stride = 4;
  std::vector<double> rows(k * d), cols(d * stride, -1), back(k * d);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<double>(i);
  km::to_coord_major(rows.data(), k, d, cols.data(), stride);
  EXPECT_EQ(cols[2 * stride + 1], rows[1 * d + 2]);
  EXPECT_EQ(cols[3], -1) << "padding columns untouched";
  km::from_coord_major(cols.data(), k, d, stride, back.data());
  EXPECT_EQ(back, rows);
  // add_to_cluster: the sums with their rounding errors carried beside them; finalize_centroids
  // takes (sum + carry) / count.
  std::vector<double> sums(d, 0), carries(d, 0);
  double count = 0;
  km::add_to_cluster(rows.data() + d, 1.0, d, sums.data(), carries.data(), count);
  km::add_to_cluster(rows.data() + d, 1.0, d, sums.data(), carries.data(), count);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(sums[4], 2 * rows[d + 4]);
  km::add_to_cluster(rows.data() + d, 0.5, d, sums.data(), carries.data(), count);  // weighted: w x, and w
  EXPECT_EQ(count, 2.5);
  EXPECT_EQ(sums[4], 2.5 * rows[d + 4]);
  std::vector<double> centroid(d, -7);
  km::finalize_centroids(sums.data(), carries.data(), &count, 1, d, centroid.data());
  for (std::size_t j = 0; j < d; ++j) EXPECT_EQ(centroid[j], rows[d + j]) << "the mean of one object, repeated";
  // The carry holds what the sum lost: 1 + 2^-60 + ... (2^10 times 2^-60) is 1 in a plain sum.
  const double unit = 1, tiny = 0x1p-60;
  std::fill(sums.begin(), sums.end(), 0.0);
  std::fill(carries.begin(), carries.end(), 0.0);
  count = 0;
  km::add_to_cluster(&unit, 1.0, 1, sums.data(), carries.data(), count);
  for (int i = 0; i < 1024; ++i) km::add_to_cluster(&tiny, 1.0, 1, sums.data(), carries.data(), count);
  EXPECT_EQ(sums[0] + carries[0], 1 + 0x1p-50);
  // Addends of 0 (weight 0, a zero coordinate) change neither the sum nor its carry.
  const double values[3] = {-0.035, 0.294, -0.68}, zero = 0;
  std::vector<double> with(2, 0.0), without(2, 0.0);
  double count_with = 0, count_without = 0;
  for (double v : values) {
    km::add_to_cluster(&v, 1.0, 1, &without[0], &without[1], count_without);
    km::add_to_cluster(&v, 1.0, 1, &with[0], &with[1], count_with);
    km::add_to_cluster(&zero, 1.0, 1, &with[0], &with[1], count_with);
    km::add_to_cluster(&v, 0.0, 1, &with[0], &with[1], count_with);
  }
  EXPECT_EQ(with, without);
  // chunked_sum: the same bits for any thread count, and each chunk's sum reported.
  const std::size_t n = 3 * km::kSumChunk + 17;
  std::vector<double> chunks;
  const auto value = [](std::size_t i) { return 1.0 / static_cast<double>(i + 1); };
  ScopedThreads threads(1);
  const double one = km::chunked_sum(n, chunks, value);
  threads.set(2);
  std::vector<double> chunks2;
  EXPECT_EQ(km::chunked_sum(n, chunks2, value), one);
  EXPECT_EQ(chunks, chunks2);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0] + chunks[1] + chunks[2] + chunks[3], one);
}

}  // namespace
