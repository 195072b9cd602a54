// Every GPU implementation of the registry against seq and omp: whole fits as registry × shapes
// × block sizes (test names like fused_d16_k257_b128), both precisions, uniform and blob data,
// a shape an implementation does not support refused with the reason its supports() gives; the
// empty-cluster rule; the same bits on every run; predict with fewer objects than centroids;
// labels from given centroids exactly seq's on tie-heavy data; the final inertia the host's bit
// for bit; the device's range check as the host's. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "fit_checks.hpp"
#include "io/generate.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/registry.hpp"

namespace {

using namespace kmtest;

struct Shape {
  std::size_t d;
  int k;
};

const std::vector<Shape> kShapes = {{1, 1},   {2, 2},    {3, 16},  {16, 16},   {33, 16},  {128, 16},
                                    {1, 257}, {16, 257}, {33, 2},  {128, 257}, {64, 2000}};
const std::vector<int> kBlocks = {32, 128, 1024};
// KMEANS_TEST_QUICK=1 (for the sanitizers, which slow kernels down a hundredfold): a few
// shapes that still reach every kernel path, one block size.
const std::vector<Shape> kQuickShapes = {{3, 16}, {33, 2}, {16, 257}, {64, 2000}};

constexpr std::size_t kObjects = 3001;  // not a multiple of any block size

// seq's run of each (precision, data, shape), computed once per process.
template <class T>
const km::Result<T>& seq_result(bool blobs, const Shape& s, const km::Dataset<T>& data, const km::Params& p) {
  static std::map<std::tuple<bool, std::size_t, int>, km::Result<T>> cache;
  const auto key = std::make_tuple(blobs, s.d, s.k);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, km::run(km::find_implementation("seq"), data, p)).first;
  return it->second;
}

struct Case {
  const km::Implementation* impl;
  Shape shape;
  int block;
};

std::string name_of(const Case& c) {
  std::string name = c.impl->name;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name + "_d" + std::to_string(c.shape.d) + "_k" + std::to_string(c.shape.k) + "_b" + std::to_string(c.block);
}
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const km::Implementation* impl : km::implementations())
    if (impl->needs_gpu())
      for (const Shape& s : quick() ? kQuickShapes : kShapes)
        for (int block : quick() ? std::vector<int>{128} : kBlocks) out.push_back({impl, s, block});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return name_of(info.param); }

template <class T>
void check_against_seq(const Case& c) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation* impl = c.impl;
  const Shape& s = c.shape;
  const bool is_float = std::is_same_v<T, float>;
  // Labels from the same centroids are seq's exactly (GpuExactLabels below); over several
  // iterations the GPU's centroids (fixed-point sums) and seq's (double sums) may differ in the
  // last bits, so a later label may differ at a near-tie. Double: centroids agree to ~1e-15 and
  // the inertia to far better than 1e-9. Float: rounding differs by ~1e-7 per
  // distance and a near-tie flip can move a centroid, hence 1e-4 on the inertia.
  const double tol = is_float ? 1e-4 : 1e-9;
  km::Params p;
  p.k = s.k;
  p.loops = 5;
  p.block = c.block;
  const km::Support support = km::supports(*impl, static_cast<std::size_t>(s.k), s.d, sizeof(T));
  for (bool blobs : {false, true}) {
    SCOPED_TRACE(blobs ? "blobs" : "uniform");
    const auto data = kmtest::make_data<T>(blobs, kObjects, s.d, static_cast<std::size_t>(s.k), 17);
    if (!support.ok) {  // refused, with the reason supports() gives
      try {
        km::run(*impl, data, p);
        ADD_FAILURE() << "accepted a shape supports() refuses: " << support.reason;
      } catch (const km::UsageError& e) {
        EXPECT_EQ(std::string(e.what()), support.reason);
        EXPECT_NE(support.reason.find("fused"), std::string::npos) << support.reason;
      }
      continue;
    }
    const km::Result<T>& ref = seq_result<T>(blobs, s, data, p);
    const auto got = km::run(*impl, data, p);
    ASSERT_EQ(got.labels.size(), kObjects);
    // The report names the path the registry predicts, and may say more after a comma (fused:
    // "tensor, wgmma" where the GPU and the data's room allow; the one-pass variants, which
    // depend on n and the data, are checked where they hold: GpuFusedDelta.*ListNamesThePathTaken).
    std::string predicted = impl->path ? impl->path(static_cast<std::size_t>(s.k), s.d, sizeof(T), km::FusedConfig{}) : "";
    predicted = predicted.substr(0, predicted.find(','));
    EXPECT_TRUE(got.path == predicted || got.path.rfind(predicted + ", ", 0) == 0)
        << "the report names the path the registry predicts: " << got.path << " vs " << predicted;
    EXPECT_EQ(got.iterations, ref.iterations);
    EXPECT_EQ(got.per_iteration.at(0).changed, static_cast<std::int64_t>(kObjects));
    EXPECT_NEAR(got.inertia, ref.inertia, tol * ref.inertia);
    for (int it = 0; it < std::min(got.iterations, ref.iterations); ++it)
      EXPECT_NEAR(got.per_iteration[it].inertia, ref.per_iteration[it].inertia, tol * ref.per_iteration[it].inertia)
          << "inertia of iteration " << it + 1;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < kObjects; ++i) {
      if (got.labels[i] == ref.labels[i]) continue;
      ++differ;
      if (!is_float) {
        const double a = kmtest::dist2(data.row(i), &ref.centroids[ref.labels[i] * s.d], s.d);
        const double b = kmtest::dist2(data.row(i), &ref.centroids[got.labels[i] * s.d], s.d);
        EXPECT_NEAR(a, b, 1e-9 * a + 1e-300) << "object " << i << " moved without a near-tie";
      }
    }
    EXPECT_LE(differ, is_float ? kObjects / 100 : kObjects / 1000);
    for (std::size_t i = 0; i < ref.centroids.size(); ++i)
      ASSERT_NEAR(got.centroids[i], ref.centroids[i], (is_float ? 1e-3 : 1e-9) * (1 + std::abs(ref.centroids[i])))
          << "centroid value " << i;
  }
}

class GpuMatchesSeq : public ::testing::TestWithParam<Case> {};
TEST_P(GpuMatchesSeq, Double) { check_against_seq<double>(GetParam()); }
TEST_P(GpuMatchesSeq, Float) { check_against_seq<float>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuMatchesSeq, ::testing::ValuesIn(cases()), case_name);

template <class T>
void check_empty_cluster(const km::Implementation& impl) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  // Objects 0 and 1 are equal, so centroids 0 and 1 start equal; every tie goes to the
  // lowest index and cluster 1 is empty in the first iteration: it must keep its centroid.
  auto data = km::generate_uniform<T>(1000, 4, 5);
  std::copy(data.row(0), data.row(0) + 4, data.row(1));
  km::Params p;
  p.k = 6;
  p.loops = 1;
  auto ref = km::run(km::find_implementation("seq"), data, p);
  auto got = km::run(impl, data, p);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(got.centroids[4 + j], data.row(1)[j]) << "empty cluster moved";
  for (std::size_t i = 0; i < ref.centroids.size(); ++i)
    EXPECT_NEAR(got.centroids[i], ref.centroids[i], 1e-5 * (1 + std::abs(ref.centroids[i])));
}

class GpuEmptyCluster : public ::testing::TestWithParam<const km::Implementation*> {};
TEST_P(GpuEmptyCluster, Double) { check_empty_cluster<double>(*GetParam()); }
TEST_P(GpuEmptyCluster, Float) { check_empty_cluster<float>(*GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuEmptyCluster, ::testing::ValuesIn(gpu_implementations()),
                         impl_name);

// The same input, parameters and implementation give the same bits on every run: centroids,
// labels, inertia, and every iteration's change count and shift. Big enough for many blocks
// to meet on every cluster, where floating-point atomics would reorder the sums.
template <class T>
void check_reproducible(const km::Implementation& impl) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  struct Problem {
    std::size_t n, d;
    int k;
  };
  for (const Problem& c : {Problem{300000, 2, 16}, Problem{200000, 16, 16}, Problem{100000, 32, 64},
                           Problem{50000, 64, 300}}) {
    SCOPED_TRACE("d=" + std::to_string(c.d) + " k=" + std::to_string(c.k));
    if (!km::supports(impl, static_cast<std::size_t>(c.k), c.d, sizeof(T)).ok) continue;
    const auto data = kmtest::make_data<T>(true, c.n, c.d, static_cast<std::size_t>(c.k), 5);
    km::Params p;
    p.k = c.k;
    p.loops = 6;
    const auto a = km::run(impl, data, p);
    const auto b = km::run(impl, data, p);
    ASSERT_EQ(a.iterations, b.iterations);
    EXPECT_EQ(std::memcmp(a.centroids.data(), b.centroids.data(), a.centroids.size() * sizeof(T)), 0) << "centroids";
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(std::memcmp(&a.inertia, &b.inertia, sizeof(double)), 0) << a.inertia << " vs " << b.inertia;
    for (int it = 0; it < a.iterations; ++it) {
      EXPECT_EQ(a.per_iteration[it].changed, b.per_iteration[it].changed) << "iteration " << it + 1;
      EXPECT_EQ(std::memcmp(&a.per_iteration[it].shift, &b.per_iteration[it].shift, sizeof(double)), 0)
          << "iteration " << it + 1 << " shift " << a.per_iteration[it].shift << " vs " << b.per_iteration[it].shift;
    }
  }
}

class GpuReproducible : public ::testing::TestWithParam<const km::Implementation*> {};
TEST_P(GpuReproducible, Double) { check_reproducible<double>(*GetParam()); }
TEST_P(GpuReproducible, Float) { check_reproducible<float>(*GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuReproducible, ::testing::ValuesIn(gpu_implementations()),
                         impl_name);

// Predict with fewer objects than centroids (1 and 5 objects, K = 16 and 300): omp's labels.
template <class T>
void check_predict_few_objects(const km::Implementation& impl) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (int k : {16, 300}) {
    if (!km::supports(impl, static_cast<std::size_t>(k), 24, sizeof(T)).ok) continue;
    const auto centres = km::generate_uniform<double>(static_cast<std::size_t>(k), 24, 3);
    for (std::size_t n : {1u, 5u}) {
      SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(n));
      const auto data = km::generate_uniform<T>(n, 24, 4);
      km::Params p;
      p.k = k;
      p.init = km::Init::given;
      p.given_d = 24;
      p.given_centroids.assign(centres.values.data(), centres.values.data() + centres.n * 24);
      const auto ref = km::predict(km::find_implementation("omp"), data, p);
      const auto got = km::predict(impl, data, p);
      EXPECT_EQ(got.labels, ref.labels);
    }
  }
}

class GpuPredictFewObjects : public ::testing::TestWithParam<const km::Implementation*> {};
TEST_P(GpuPredictFewObjects, Double) { check_predict_few_objects<double>(*GetParam()); }
TEST_P(GpuPredictFewObjects, Float) { check_predict_few_objects<float>(*GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuPredictFewObjects, ::testing::ValuesIn(gpu_implementations()), impl_name);

// Labels from the same centroids (predict) equal seq's on every object, in both precisions:
// uniform, blobs, and quantised data (integers / 255, centroids drawn from the objects, one
// centroid duplicated three times), so exact ties and near-ties are everywhere. omp is the
// reference (its labels equal seq's, tests/cpu/seq_omp.cpp) so the large shapes stay quick.
const std::vector<LabelShape> kLabelShapes = {{3000, 1, 2},   {3000, 3, 100},   {4000, 16, 16}, {2500, 64, 1024}, {3000, 128, 100},
                                              {1500, 784, 256}, {2000, 1000, 2}, {5000, 16, 4097},
                                              {70000, 1, 65536}};
const std::vector<LabelShape> kQuickLabelShapes = {{3000, 3, 100}, {4000, 16, 16}, {2500, 64, 1024}, {1500, 784, 256}};

template <class T>
void check_exact_labels(const km::Implementation& impl) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const LabelShape& s : quick() ? kQuickLabelShapes : kLabelShapes) {
    if (!km::supports(impl, static_cast<std::size_t>(s.k), s.d, sizeof(T)).ok) continue;
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data " +
                   (kind == 0 ? "uniform" : kind == 1 ? "blobs" : "quantised"));
      const auto data = label_data<T>(kind, s);
      km::Params p;
      p.k = s.k;
      p.init = km::Init::given;
      p.given_d = s.d;
      p.given_centroids.resize(static_cast<std::size_t>(s.k) * s.d);
      for (int c = 0; c < s.k; ++c) {  // objects spread over the data; the last three copy centroid 0
        const std::size_t from = c >= 3 && c >= s.k - 3 ? 0 : static_cast<std::size_t>(c) * (s.n / s.k);
        for (std::size_t j = 0; j < s.d; ++j) p.given_centroids[c * s.d + j] = data.row(from)[j];
      }
      const auto ref = km::predict(km::find_implementation("omp"), data, p);
      const auto got = km::predict(impl, data, p);
      std::size_t differ = 0, first = 0;
      for (std::size_t i = 0; i < s.n; ++i)
        if (got.labels[i] != ref.labels[i] && differ++ == 0) first = i;
      EXPECT_EQ(differ, 0u) << "first at object " << first << ": " << got.labels[first] << " vs seq's "
                            << ref.labels[first];
    }
  }
}

class GpuExactLabels : public ::testing::TestWithParam<const km::Implementation*> {};
TEST_P(GpuExactLabels, Double) { check_exact_labels<double>(*GetParam()); }
TEST_P(GpuExactLabels, Float) { check_exact_labels<float>(*GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuExactLabels, ::testing::ValuesIn(gpu_implementations()), impl_name);

// The final inertia from the device (the GPU rungs' final_inertia: the distances in seq's
// arithmetic, the chunks summed in order) is the host's inertia() bit for bit: every GPU rung
// (both layouts), uniform, blob and quantised data, both precisions, and out of core, where the
// host sums it.
template <class T>
void check_final_inertia(const km::Implementation& impl) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const LabelShape& s : {LabelShape{20011, 2, 16}, LabelShape{3001, 784, 256}, LabelShape{30011, 33, 100}}) {
    if (!km::supports(impl, static_cast<std::size_t>(s.k), s.d, sizeof(T)).ok) continue;
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data " + std::to_string(kind));
      const auto data = label_data<T>(kind, s);
      km::Params p;
      p.k = s.k;
      p.loops = 4;
      p.init = km::Init::first;
      for (bool streamed : {false, true}) {
        km::Params run_p = p;
        if (streamed) run_p.stream_rows = 4096;
        const auto r = km::run(impl, data, run_p);
        const double host = km::inertia(data, r.centroids.data(), r.labels.data());
        EXPECT_EQ(std::memcmp(&r.inertia, &host, sizeof(double)), 0)
            << (streamed ? "streamed " : "") << r.inertia << " vs the host's " << host;
        const auto q = km::predict(impl, data, [&] {
          km::Params g = p;
          g.init = km::Init::given;
          g.given_d = s.d;
          g.given_centroids.assign(r.centroids.begin(), r.centroids.end());
          return g;
        }());
        const double host_q = km::inertia(data, r.centroids.data(), q.labels.data());
        EXPECT_EQ(std::memcmp(&q.inertia, &host_q, sizeof(double)), 0) << "predict: " << q.inertia << " vs " << host_q;
      }
    }
  }
}

class GpuFinalInertia : public ::testing::TestWithParam<const km::Implementation*> {};
TEST_P(GpuFinalInertia, Double) { check_final_inertia<double>(*GetParam()); }
TEST_P(GpuFinalInertia, Float) { check_final_inertia<float>(*GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuFinalInertia, ::testing::ValuesIn(gpu_implementations()), impl_name);

// Initial centroids far from the data (an --init file, Python's init=; offsets 6 and 1e6): the
// first iteration's inertia, summed in fixed point on the device, against the brute-force sum in
// double over the distances in T (float's rounding of a distance, 2^-24 relative, in float). The
// scale counts the initial centroids (fixed_point.hpp); with the data's range alone it overflowed.
template <class T>
void check_far_initial_centroids(const km::Implementation& impl) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const LabelShape& s : {LabelShape{20011, 2, 16}, LabelShape{20011, 16, 16}, LabelShape{3001, 128, 300}}) {
    if (!km::supports(impl, static_cast<std::size_t>(s.k), s.d, sizeof(T)).ok) continue;
    const auto data = km::generate_uniform<T>(static_cast<std::size_t>(s.n), s.d, 5);
    for (double offset : {6.0, 1e6}) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " offset " + std::to_string(offset));
      km::Params p;
      p.k = s.k;
      p.loops = 2;
      p.init = km::Init::given;
      p.given_d = s.d;
      for (int c = 0; c < s.k; ++c)
        for (std::size_t j = 0; j < s.d; ++j) p.given_centroids.push_back(static_cast<double>(data.row(c)[j]) + offset);
      const std::vector<T> initial(p.given_centroids.begin(), p.given_centroids.end());
      double expected = 0;
      for (std::size_t i = 0; i < data.n; ++i) {
        double best = INFINITY;
        for (int c = 0; c < s.k; ++c) best = std::min(best, dist2(data.row(i), &initial[c * s.d], s.d));
        expected += best;
      }
      const auto r = km::run(impl, data, p);
      ASSERT_FALSE(r.per_iteration.empty());
      EXPECT_NEAR(r.per_iteration[0].inertia, expected, (std::is_same_v<T, float> ? 1e-5 : 1e-11) * expected);
    }
  }
}

class GpuFarInitial : public ::testing::TestWithParam<const km::Implementation*> {};
TEST_P(GpuFarInitial, Double) { check_far_initial_centroids<double>(*GetParam()); }
TEST_P(GpuFarInitial, Float) { check_far_initial_centroids<float>(*GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuFarInitial, ::testing::ValuesIn(gpu_implementations()), impl_name);

// The range check the registry leaves to the device-update rungs (on the device, after the
// upload; on the host when out of core) refuses what the host's check refuses, with the same
// message: a NaN, an infinity (named by object and coordinate), values whose squares overflow.
template <class T>
void check_device_range(const char* name) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& impl = km::find_implementation(name);
  const T huge = sizeof(T) == 4 ? static_cast<T>(1e30) : static_cast<T>(1e200);
  for (const T bad : {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::infinity(), huge}) {
    auto data = km::generate_uniform<T>(20000, 8, 3);
    data.values.data()[12345 * 8 + 5] = bad;
    km::Params p;
    p.k = 4;
    p.loops = 2;
    p.init = km::Init::first;
    auto message = [&](const km::Implementation& which) {
      try {
        km::run(which, data, p);
      } catch (const km::InputError& e) {
        return std::string(e.what());
      }
      return std::string("(no error)");
    };
    const std::string host = message(km::find_implementation("omp"));
    SCOPED_TRACE(host);
    EXPECT_NE(host, "(no error)");
    EXPECT_EQ(message(impl), host) << "in memory";
    p.stream_rows = 4096;
    EXPECT_EQ(message(impl), host) << "out of core";
  }
  auto data = km::generate_uniform<T>(20000, 8, 3);  // and valid data still runs, as before
  km::Params p;
  p.k = 4;
  p.loops = 3;
  p.init = km::Init::first;
  const auto a = km::run(impl, data, p), b = km::run(km::find_implementation("omp"), data, p);
  EXPECT_EQ(a.labels, b.labels);
}

TEST(GpuRangeCheck, FusedDouble) { check_device_range<double>("fused"); }
TEST(GpuRangeCheck, FusedFloat) { check_device_range<float>("fused"); }
TEST(GpuRangeCheck, OffloadDouble) { check_device_range<double>("offload"); }
TEST(GpuRangeCheck, OffloadBlockFloat) { check_device_range<float>("offload-block"); }

}  // namespace
