// Every GPU implementation of the registry against seq, as registry × shapes × block sizes
// (test names like fused_d16_k257_b128), both precisions, uniform and blob data. A shape an
// implementation does not support (its supports() says why) must be refused with that
// reason. Skipped, with the reason, where no GPU is usable, as in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <tuple>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "io/generate.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/gpu/fused_plan.hpp"
#include "kmeans/gpu/tensor_kernels.hpp"
#include "kmeans/gpu/tensor_nearest.hpp"
#include "kmeans/init.hpp"
#include "kmeans/multi_gpu.hpp"
#include "kmeans/registry.hpp"
#include "test_util.hpp"

namespace {

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

bool quick() {
  const char* v = std::getenv("KMEANS_TEST_QUICK");
  return v && std::string(v) == "1";
}

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

std::string impl_name(const ::testing::TestParamInfo<const km::Implementation*>& param_info) {
  std::string name = param_info.param->name;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

std::vector<const km::Implementation*> gpu_implementations() {
  std::vector<const km::Implementation*> out;
  for (const km::Implementation* impl : km::implementations())
    if (impl->needs_gpu()) out.push_back(impl);
  return out;
}

}  // namespace

namespace km {  // gtest prints a parameter through PrintTo found beside its type
void PrintTo(const Implementation* impl, std::ostream* os) { *os << impl->name; }
}  // namespace km

namespace {

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

}  // namespace

namespace {

// Labels from the same centroids (predict) equal seq's on every object, in both precisions:
// uniform, blobs, and quantised data (integers / 255, centroids drawn from the objects, one
// centroid duplicated three times), so exact ties and near-ties are everywhere. omp is the
// reference (its labels equal seq's, test_kmeans_cpu) so the large shapes stay quick.
struct LabelShape {
  std::size_t n, d;
  int k;
};
const std::vector<LabelShape> kLabelShapes = {{3000, 1, 2},   {3000, 3, 100},   {4000, 16, 16}, {2500, 64, 1024}, {3000, 128, 100},
                                              {1500, 784, 256}, {2000, 1000, 2}, {5000, 16, 4097},
                                              {70000, 1, 65536}};
const std::vector<LabelShape> kQuickLabelShapes = {{3000, 3, 100}, {4000, 16, 16}, {2500, 64, 1024}, {1500, 784, 256}};

template <class T>
km::Dataset<T> label_data(int kind, const LabelShape& s) {
  if (kind < 2) return kmtest::make_data<T>(kind == 1, s.n, s.d, static_cast<std::size_t>(s.k), 23);
  auto data = km::generate_uniform<T>(s.n, s.d, 23);
  for (std::size_t i = 0; i < data.n * data.d; ++i)
    data.values.data()[i] = static_cast<T>(std::floor(static_cast<double>(data.values.data()[i]) * 6) / 255.0);
  return data;
}

// body(shape, data) for each shape with uniform, blobs and quantised data (label_data's kinds).
template <class T, class F>
void each_label_case(const std::vector<LabelShape>& shapes, F&& body) {
  for (const LabelShape& s : shapes)
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data " +
                   (kind == 0 ? "uniform" : kind == 1 ? "blobs" : "quantised"));
      body(s, label_data<T>(kind, s));
    }
}

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

// The tensor path's re-checks run on purpose: on quantised data, from centroids of which four
// are copies of object 0 (so its neighbours have four tied keys and are checked against every
// centroid), some objects are queued with their candidates and some against every centroid
// (the JSON's "rechecked" / "rechecked_all"), and the first iteration still equals omp's.
// Double by default scores on TF32 candidates (4 keys kept, as float); with
// FusedConfig::tf32_in_double off on FP64 DMMA keys (2 kept).
template <class T>
void check_recheck_exercised(bool dmma = false) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const LabelShape s{4000, 64, 300};
  const auto data = label_data<T>(2, s);
  km::Params p;
  p.k = s.k;
  p.loops = 3;
  p.init = km::Init::given;
  p.given_d = s.d;
  p.given_centroids.resize(static_cast<std::size_t>(s.k) * s.d);
  for (int c = 0; c < s.k; ++c)
    for (std::size_t j = 0; j < s.d; ++j)
      p.given_centroids[c * s.d + j] = data.row(c >= s.k - 3 ? 0 : static_cast<std::size_t>(c))[j];
  p.fused.tf32_in_double = !dmma;
  const auto& fused = km::find_implementation("fused");
  ASSERT_EQ(fused.path(static_cast<std::size_t>(s.k), s.d, sizeof(T), p.fused).rfind("tensor", 0), 0u);
  const auto got = km::run(fused, data, p);
  const auto ref = km::run(km::find_implementation("omp"), data, p);
  ASSERT_GE(got.per_iteration.size(), 1u);
  EXPECT_EQ(got.path.find("tf32 candidates") != std::string::npos, sizeof(T) == 8 && !dmma) << got.path;
  const auto& first = got.per_iteration[0];
  if (dmma)  // FP64 keys, two kept: any close call is checked against every centroid
    EXPECT_EQ(first.rechecked, first.rechecked_all);
  else
    EXPECT_GT(first.rechecked, first.rechecked_all) << "some objects must be queued with their candidates";
  EXPECT_GT(first.rechecked_all, 0) << "the copies of object 0 must send some objects to every centroid";
  EXPECT_LT(first.rechecked, static_cast<std::int64_t>(s.n));
  EXPECT_EQ(first.changed, ref.per_iteration[0].changed);
  // The GPU sums the inertia in double from T's differences, omp in T: 1e-12 in double, 1e-5 in float.
  EXPECT_NEAR(first.inertia, ref.per_iteration[0].inertia, (sizeof(T) == 8 ? 1e-12 : 1e-5) * ref.per_iteration[0].inertia);
}
TEST(GpuTensorRecheck, Double) { check_recheck_exercised<double>(); }
TEST(GpuTensorRecheck, DoubleDmma) { check_recheck_exercised<double>(true); }
TEST(GpuTensorRecheck, Float) { check_recheck_exercised<float>(); }

// Two fits agree bit for bit: centroids, labels, and per iteration the change counts and (with
// `same_keys`) the re-check counts.
template <class R>
void expect_same_fit(const R& with, const R& without, bool same_keys = true) {
  EXPECT_EQ(with.centroids, without.centroids);
  EXPECT_EQ(with.labels, without.labels);
  ASSERT_EQ(with.iterations, without.iterations);
  for (int it = 0; it < with.iterations; ++it) {
    EXPECT_EQ(with.per_iteration[it].changed, without.per_iteration[it].changed) << "iteration " << it + 1;
    if (!same_keys) continue;
    EXPECT_EQ(with.per_iteration[it].rechecked, without.per_iteration[it].rechecked) << "iteration " << it + 1;
    EXPECT_EQ(with.per_iteration[it].rechecked_all, without.per_iteration[it].rechecked_all);
  }
}

// Whole fits of fused (5 iterations; uniform, blobs, quantised data) with the configuration
// `base` and with `base` and the FusedConfig field `field`=`value` agree bit for bit: labels,
// centroids, and per iteration the change counts and (with `same_keys`) the re-check counts.
// `paths` checks what the two reports name.
template <class T = float, class Paths>
void check_same_fits_without(const km::FusedConfig& base, const std::string& field,
                             const std::vector<LabelShape>& shapes, Paths paths, const std::string& value = "0",
                             bool same_keys = true) {
  const km::Implementation& fused = km::find_implementation("fused");
  each_label_case<T>(shapes, [&](const LabelShape& s, const km::Dataset<T>& data) {
    km::Params p;
    p.k = s.k;
    p.loops = 5;
    p.fused = base;
    const auto with = km::run(fused, data, p);
    km::apply_fused_config(p.fused, field + "=" + value);
    const auto without = km::run(fused, data, p);
    paths(with.path, without.path);
    expect_same_fit(with, without, same_keys);
  });
}

// Float's tensor path reads its objects from a centred, TF32-rounded copy when it fits, and
// forms the same operands itself when not (out of core, --device-memory, tensor_copy=0):
// the two give the same keys, so the same labels, centroids, change counts and re-check
// counts, bit for bit; short d (16-deep slices), d not a multiple of 4 (4-byte copies), long d.
// With the copy and several stages of centroids (d = 16, K = 1500) the kernel also starts each
// row's list at a threshold from its previous label, which must leave out only keys the margin
// test never needs: the re-check counts then still agree with the formed path's, which has none.
// The fused delta kernel's TF32 object operands are x's bits plus 2^12 (one integer add), which
// rounds as cvt.rna only where the tensor cores ignore the 13 low bits. This device's reading of
// both, bit for bit, on the cases that tell: ties (low bits exactly 0x1000), just below and above
// them, carries into the exponent, negatives, zeros, subnormals, large and small magnitudes, and
// random floats. (Were the low bits kept, the operand would still lie within margin.hpp's 2^-11
// of x, but this is what the bound's derivation and the kernel's comment say happens.)
TEST(GpuTf32, HalfUpReadsAsRna) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  std::vector<float> xs;
  auto with_bits = [&](std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    xs.push_back(f);
    xs.push_back(-f);
  };
  for (std::uint32_t exponent : {1u, 60u, 126u, 127u, 128u, 150u, 174u})
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu})
      for (std::uint32_t high : {0x000u, 0x001u, 0x155u, 0x3feu, 0x3ffu})  // the 10 kept mantissa bits
        with_bits(exponent << 23 | high << 13 | low);
  for (std::uint32_t sub : {0x1u, 0x1000u, 0x3000u, 0x7fffffu}) with_bits(sub);  // subnormals
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1000.0f, 1000.0f);
  for (int i = 0; i < 4096; ++i) xs.push_back(u(rng));
  EXPECT_EQ(km::gpu::tf32_half_up_mismatches(xs), 0u) << "of " << xs.size() << " values";
}

TEST(GpuTensorCopy, FloatSameAsFormed) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  km::FusedConfig tensor;
  tensor.path = km::FusedConfig::Path::tensor;
  check_same_fits_without(tensor, "tensor_copy",
                          quick() ? std::vector<LabelShape>{{2500, 64, 1024}, {6000, 16, 1500}}
                                  : std::vector<LabelShape>{{3000, 3, 100}, {4000, 16, 300}, {2500, 64, 1024},
                                                            {1500, 784, 256}, {6000, 16, 1500}, {5000, 30, 1100}},
                          [](const std::string& copied, const std::string&) {
                            EXPECT_EQ(copied.rfind("tensor", 0), 0u) << copied;
                          });
}

// Double on the tensor path scores its candidates on TF32 tensor cores from a float copy by
// default (margin.hpp: tf32_candidates_bound) and on FP64 DMMA with tf32_in_double=0.
// Both give seq's labels from the same centroids, so whole fits agree bit for bit: labels,
// centroids and change counts (not the re-check counts: the keys differ). Shapes: short d (the
// 16-deep float kernel), d not a multiple of 4, d in wgmma's range, long d, K past a tile.
TEST(GpuTensorDouble, Tf32CandidatesSameAsDmma) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  km::FusedConfig tensor;
  tensor.path = km::FusedConfig::Path::tensor;
  check_same_fits_without<double>(
      tensor, "tf32_in_double",
      quick() ? std::vector<LabelShape>{{3000, 100, 129}}
              : std::vector<LabelShape>{{4000, 16, 300}, {3000, 3, 100}, {3000, 100, 129}, {1500, 784, 256},
                                        {6000, 16, 1500}},
      [](const std::string& tf32, const std::string& dmma) {
        EXPECT_EQ(tf32.rfind("tensor, tf32 candidates", 0), 0u) << tf32;
        EXPECT_EQ(dmma, "tensor");
      },
      "0", false);
}

// Double data beyond 2^48 in magnitude would leave float's range in the TF32 keys: such data
// keeps its FP64 DMMA keys (the report's path "tensor"), and its labels are still omp's.
TEST(GpuTensorDouble, LargeMagnitudesKeepDmmaKeys) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const LabelShape s{3000, 16, 300};
  for (double scale : {1.0, 0x1p50}) {
    auto data = label_data<double>(1, s);
    for (std::size_t i = 0; i < data.n * data.d; ++i) data.values.data()[i] *= scale;
    km::Params p;
    p.k = s.k;
    p.loops = 3;
    p.fused.path = km::FusedConfig::Path::tensor;
    const auto got = km::run(km::find_implementation("fused"), data, p);
    const auto ref = km::run(km::find_implementation("omp"), data, p);
    EXPECT_EQ(got.path, scale > 1 ? "tensor" : "tensor, tf32 candidates") << "scale " << scale;
    EXPECT_EQ(got.labels, ref.labels) << "scale " << scale;
  }
}

// Float on a Hopper GPU (compute capability 9.0) with 32 < d <= 128, d a multiple of 4, takes
// the wgmma assignment (6_fused_wgmma.cuh); wgmma=0 takes the mma.sync one. Both
// give seq's labels from the same centroids, so whole fits agree bit for bit; and the two
// kernels' tensor cores sum the same products alike on sm_90, so the keys, and with them the
// re-check counts, agree too (the thresholds, from iteration 2, leave out only keys the margin
// test never needs). Shapes: d padded within a slice (40, 100), whole slices (64, 128), K past a
// tile's end (129, 300, 1000), one tile (7, 128: the threshold from the tile's least key), n past
// a block's end.
TEST(GpuTensorWgmma, FloatSameAsMmaSync) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  if (km::gpu_info().compute_capability != 90)
    GTEST_SKIP() << "wgmma needs compute capability 9.0; this GPU has " << km::gpu_info().compute_capability;
  check_same_fits_without({}, "wgmma",
                          quick() ? std::vector<LabelShape>{{3000, 100, 129}, {2000, 64, 50}}
                                  : std::vector<LabelShape>{{3000, 64, 300}, {2000, 40, 1000}, {3000, 100, 129},
                                                            {5000, 128, 1024}, {4000, 128, 128}, {3000, 48, 7}},
                          [](const std::string& wgmma, const std::string& sync) {
                            EXPECT_EQ(wgmma, "tensor, wgmma");
                            EXPECT_EQ(sync, "tensor");
                          });
}

}  // namespace

namespace {

// An initialisation on the GPU gives the CPU's centres, bit for bit, and the same on every run,
// on uniform, clustered and quantised data (exact ties).
// - k-means++: the same draws, distances in the same arithmetic, chunk sums in the same order.
// - k-means||: nearest candidates from the tensor cores' TF32 keys (or, in the *Gemm tests, from
//   GEMM scores), re-checked within the proven error (only the re-check breaks the quantised
//   data's ties as the CPU does); K = 2000 draws about 5000 candidates, more than one GEMM block
//   of them.
template <class T>
void check_gpu_init(km::Init init, const std::vector<LabelShape>& full_shapes, const km::GpuInitConfig& config = {}) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const std::vector<LabelShape> shapes = quick() ? std::vector<LabelShape>{{3000, 8, 20}} : full_shapes;
  for (const LabelShape& s : shapes)
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data kind " + std::to_string(kind));
      const auto data = label_data<T>(kind, s);
      km::Params p;
      p.k = s.k;
      p.init = init;
      p.seed = 99;
      p.gpu_init = config;
      const auto cpu = km::initial_centroids(data, p, false);
      const auto gpu = km::initial_centroids(data, p, true);
      const auto again = km::initial_centroids(data, p, true);
      ASSERT_EQ(gpu.size(), cpu.size());
      EXPECT_EQ(std::memcmp(gpu.data(), cpu.data(), cpu.size() * sizeof(T)), 0) << "GPU centres differ from the CPU's";
      EXPECT_EQ(std::memcmp(gpu.data(), again.data(), cpu.size() * sizeof(T)), 0) << "not reproducible";
    }
}
const std::vector<LabelShape> kPlusPlusShapes = {{50000, 32, 100}, {40000, 3, 1000}, {20000, 200, 64}};
// (d = 64: the rounds on the wgmma kernel with closest as the ceiling, on sm_90.)
const std::vector<LabelShape> kParallelShapes = {
    {50000, 32, 100}, {40000, 3, 1000}, {20000, 200, 64}, {30000, 16, 2000}, {5000, 1000, 50}, {30000, 64, 400}};
TEST(GpuKmeansPlusPlus, Double) { check_gpu_init<double>(km::Init::kmeanspp, kPlusPlusShapes); }
TEST(GpuKmeansPlusPlus, Float) { check_gpu_init<float>(km::Init::kmeanspp, kPlusPlusShapes); }
// k-means||'s reduction runs on the GPU here (GpuInitConfig::reduce = gpu: never left to the host).
km::GpuInitConfig reduce_on_gpu(int chunks_per_block = 0) {
  km::GpuInitConfig c;
  c.reduce = km::GpuInitConfig::Reduce::gpu;
  c.reduce_chunks_per_block = chunks_per_block;
  return c;
}
TEST(GpuKmeansParallel, Double) { check_gpu_init<double>(km::Init::kmeans_parallel, kParallelShapes, reduce_on_gpu()); }
TEST(GpuKmeansParallel, Float) { check_gpu_init<float>(km::Init::kmeans_parallel, kParallelShapes, reduce_on_gpu()); }
// The reduction's blocks each owning several chunks of candidates (reduce_chunks_per_block = 3:
// the path of a GPU with fewer resident blocks than chunks), the last block fewer, the last
// chunk part of one.
TEST(GpuKmeansParallel, SeveralChunksABlock) {
  check_gpu_init<double>(km::Init::kmeans_parallel, {{30000, 16, 2000}, {40000, 3, 1000}}, reduce_on_gpu(3));
}
// Fewer distinct points than K among more candidates than K (60 points, each object repeated 500
// times; oversampling 2 draws copies of the same point in one round): the reduction's potential
// reaches zero, and its later draws are uniform over the candidates, as the host's.
TEST(GpuKmeansParallel, DuplicatesPastZeroPotential) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const auto points = km::generate_uniform<double>(60, 8, 3);
  km::Dataset<double> data(30000, 8, "repeated points");
  for (std::size_t i = 0; i < data.n; ++i) std::copy_n(points.row(i % 60), 8, data.values.data() + i * 8);
  km::Params p;
  p.k = 64;
  p.init = km::Init::kmeans_parallel;
  p.oversampling = 2;
  p.seed = 7;
  p.gpu_init = reduce_on_gpu();
  const auto cpu = km::initial_centroids(data, p, false);
  const auto gpu = km::initial_centroids(data, p, true);
  EXPECT_EQ(gpu, cpu);
}
// For --init=kmeans|| fused's tensor path makes its centred TF32 copy while it stages the data
// (Engine::centred_rows), and the initialisation's rounds read that copy instead of making their
// own: the centres are still the CPU's bit for bit, and the whole fit (whose loop adopts the copy
// rather than writing it again) is the fit without the sharing (share_copy=0) bit for bit:
// centroids, labels, inertia, and per iteration the change and re-check counts. Shapes: wgmma's
// d, long d, the 16-deep kernel's, d not a multiple of 4.
template <class T>
void check_shared_copy() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  if (km::gpu_info().compute_capability < 80)
    GTEST_SKIP() << "the centred TF32 copy needs compute capability 8.0; this GPU has "
                 << km::gpu_info().compute_capability;
  const km::Implementation& fused = km::find_implementation("fused");
  const std::vector<LabelShape> shapes =
      quick() ? std::vector<LabelShape>{{6000, 64, 100}}
              : std::vector<LabelShape>{{20000, 64, 200}, {3000, 1000, 50}, {30000, 16, 600}, {8000, 3, 100}};
  each_label_case<T>(shapes, [&](const LabelShape& s, const km::Dataset<T>& data) {
    km::Params p;
    p.k = s.k;
    p.init = km::Init::kmeans_parallel;
    p.seed = 5;
    p.loops = 4;
    p.fused.path = km::FusedConfig::Path::tensor;
    p.gpu_init = reduce_on_gpu();
    {
      auto engine = fused.make<T>(p);
      const T* x = engine->stage(data, s.k);
      ASSERT_NE(x, nullptr) << "the data was not staged";
      const km::CentredRows* centred = engine->centred_rows();
      ASSERT_NE(centred, nullptr) << "no centred copy staged";
      ASSERT_EQ(centred->mean.size(), s.d);
      const auto gpu = km::initial_centroids(data, p, true, x, centred);
      const auto cpu = km::initial_centroids(data, p, false);
      ASSERT_EQ(gpu.size(), cpu.size());
      EXPECT_EQ(std::memcmp(gpu.data(), cpu.data(), cpu.size() * sizeof(T)), 0)
          << "the centres from the engine's copy differ from the CPU's";
    }
    const auto with = km::run(fused, data, p);
    p.fused.share_copy = false;
    const auto without = km::run(fused, data, p);
    EXPECT_EQ(with.path.rfind("tensor", 0), 0u) << with.path;
    EXPECT_EQ(with.path, without.path);
    EXPECT_EQ(with.inertia, without.inertia);
    expect_same_fit(with, without);
  });
}
TEST(GpuKmeansParallel, DoubleSharedCopy) { check_shared_copy<double>(); }
TEST(GpuKmeansParallel, FloatSharedCopy) { check_shared_copy<float>(); }

// The same through cuBLAS GEMMs (GpuInitConfig::nearest = gemm), the path taken where the tensor
// cores' cannot be (no TF32, |x| > 2^48, no room for the float copy).
km::GpuInitConfig nearest_by_gemm() {
  km::GpuInitConfig c;
  c.nearest = km::GpuInitConfig::Nearest::gemm;
  return c;
}
TEST(GpuKmeansParallel, DoubleGemm) {
  check_gpu_init<double>(km::Init::kmeans_parallel, {{40000, 3, 1000}, {30000, 16, 2000}}, nearest_by_gemm());
}
TEST(GpuKmeansParallel, FloatGemm) {
  check_gpu_init<float>(km::Init::kmeans_parallel, {{40000, 3, 1000}, {5000, 1000, 50}}, nearest_by_gemm());
}

// The tensor path's centre from the rows on the device is the host's, bit for bit (the same
// rows, each coordinate summed in row order in double): n past a multiple of the step, d past a
// block of threads, and a first row far from the rest.
template <class T>
void check_sampled_mean() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (auto [n, d] : {std::pair<std::size_t, std::size_t>{200001, 3}, {30001, 130}, {5, 16}}) {
    auto data = km::generate_uniform<T>(n, d, 11);
    data.values.data()[0] = static_cast<T>(1e7);
    km::cuda::DeviceBuffer<T> rows(n * d);
    CUDA_CHECK(cudaMemcpy(rows.get(), data.values.data(), n * d * sizeof(T), cudaMemcpyHostToDevice));
    const std::vector<T> host = km::gpu::sampled_mean(data, n);
    const std::vector<T> device = km::gpu::sampled_mean(rows.get(), n, d, nullptr);
    ASSERT_EQ(host.size(), d);
    EXPECT_EQ(std::memcmp(host.data(), device.data(), d * sizeof(T)), 0) << "n=" << n << " d=" << d;
  }
}
TEST(GpuSampledMean, Double) { check_sampled_mean<double>(); }
TEST(GpuSampledMean, Float) { check_sampled_mean<float>(); }

// k-means||'s rounds on the tensor cores (tensor_nearest.hpp): each object's label is the first
// of the least CPU k-means|| distances (squared_distance_double) among m rows, on uniform, blobs
// and quantised data. The rows are objects, in runs of four equal rows in the first half and of
// two in the second: exact ties everywhere, so objects are re-checked both against their listed
// candidates and against every row, and the first of equal rows must win. Shapes through the
// 16-deep kernel, the mma.sync kernels (d not a multiple of 4, long d) and wgmma, K past a tile.
template <class T>
void check_tensor_nearest() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const std::vector<LabelShape> shapes =
      quick() ? std::vector<LabelShape>{{3000, 100, 129}}
              : std::vector<LabelShape>{{4000, 3, 100}, {3000, 16, 700}, {3000, 100, 129}, {2000, 128, 600},
                                        {1500, 784, 256}};
  unsigned long long listed_all = 0, everyone_all = 0;
  km::cuda::Stream stream;
  for (const LabelShape& s : shapes)
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " m=" + std::to_string(s.k) + " data kind " + std::to_string(kind));
      const auto data = label_data<T>(kind, s);
      const std::size_t n = data.n, d = data.d, m = static_cast<std::size_t>(s.k);
      std::vector<T> rows(m * d);
      for (std::size_t t = 0; t < m; ++t) {
        const std::size_t run = t < m / 2 ? 4 : 2, lead = t - t % run;
        std::copy_n(data.row(lead * 7919 % n), d, rows.data() + t * d);
      }
      km::cuda::DeviceBuffer<T> x(n * d), r(m * d);
      km::cuda::DeviceBuffer<std::int32_t> labels(n);
      ASSERT_EQ(cudaMemcpy(x.get(), data.values.data(), n * d * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(r.get(), rows.data(), m * d * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
      auto nearest = km::gpu::make_tensor_nearest(data, x.get(), km::max_abs_value(data), stream.get());
      ASSERT_NE(nearest, nullptr) << "the tensor path applies to this data";
      nearest->nearest(r.get(), static_cast<int>(m), labels.get());
      unsigned long long listed = 0, everyone = 0;
      nearest->rechecked(listed, everyone);
      listed_all += listed;
      everyone_all += everyone;
      std::vector<std::int32_t> got(n), nearest_t(n);
      std::vector<double> nearest_d(n);
      ASSERT_EQ(cudaMemcpy(got.data(), labels.get(), n * sizeof(std::int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
      std::size_t wrong = 0, first_wrong = n;
      for (std::size_t i = 0; i < n; ++i) {
        double best = INFINITY;
        std::int32_t want = -1;
        for (std::size_t t = 0; t < m; ++t) {
          const double a = km::squared_distance_double(data.row(i), rows.data() + t * d, d);
          if (a < best) {
            best = a;
            want = static_cast<std::int32_t>(t);
          }
        }
        if (got[i] != want && wrong++ == 0) first_wrong = i;
        nearest_d[i] = best;
        nearest_t[i] = want;
      }
      EXPECT_EQ(wrong, 0u) << "labels differ from the CPU's, the first at object " << first_wrong;
      // With a ceiling (k-means||'s closest): the first nearest row wherever its distance is
      // below ceiling[i], and -1 or a row no nearer than the ceiling elsewhere. The ceilings:
      // each object's own nearest distance (nothing beats it: ties with it included), one step
      // above it (only the nearest rows do), another row's distance, zero and +inf.
      std::vector<double> ceiling(n);
      for (std::size_t i = 0; i < n; ++i) {
        const double other = km::squared_distance_double(data.row(i), rows.data() + (i * 13 % m) * d, d);
        const double choices[5] = {nearest_d[i], std::nextafter(nearest_d[i], INFINITY), other, 0.0, INFINITY};
        ceiling[i] = choices[i % 5];
      }
      km::cuda::DeviceBuffer<double> ceil_d(n);
      ASSERT_EQ(cudaMemcpy(ceil_d.get(), ceiling.data(), n * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
      nearest->nearest(r.get(), static_cast<int>(m), labels.get(), ceil_d.get());
      ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);  // (its stream does not wait for cudaMemcpy's)
      ASSERT_EQ(cudaMemcpy(got.data(), labels.get(), n * sizeof(std::int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
      std::size_t wrong_below = 0, wrong_above = 0, none = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (nearest_d[i] < ceiling[i]) {
          wrong_below += got[i] != nearest_t[i];
        } else if (got[i] == -1) {
          ++none;
        } else {
          wrong_above += got[i] < 0 || got[i] >= static_cast<std::int32_t>(m) ||
                         km::squared_distance_double(data.row(i), rows.data() + got[i] * d, d) < ceiling[i];
        }
      }
      EXPECT_EQ(wrong_below, 0u) << "with a ceiling: a row that beats it, but not the first nearest";
      EXPECT_EQ(wrong_above, 0u) << "with a ceiling: a label nearer than the ceiling where none is";
      // The wgmma kernel (sm_90, 32 < d <= 128, d a multiple of 4) leaves such objects at -1.
      if (km::gpu_info().compute_capability == 90 && d > 32 && d <= 128 && d % 4 == 0) {
        EXPECT_GT(none, n / 10) << "with a ceiling: the objects no row beats should be -1";
      }
    }
  EXPECT_GT(listed_all, 0u) << "no object was re-checked against its listed candidates";
  EXPECT_GT(everyone_all, 0u) << "no object was re-checked against every row";
}
TEST(GpuTensorNearest, Double) { check_tensor_nearest<double>(); }
TEST(GpuTensorNearest, Float) { check_tensor_nearest<float>(); }

// Engine::stage: fused's tensor path (row-major) puts the data on the device before a GPU
// initialisation, which reads that copy: the CPU's centres; and the fit through that engine is
// the fit from those centres given (setup takes the staged copy as its upload). The one-pass
// path (coordinate-major) and a part of a larger problem stage nothing.
template <class T>
void check_staged_init() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  const LabelShape s{6000, 64, 300};
  for (int kind = 0; kind < 3; ++kind)
    for (km::Init init : {km::Init::kmeanspp, km::Init::kmeans_parallel}) {
      SCOPED_TRACE(std::string(km::to_string(init)) + " data kind " + std::to_string(kind));
      const auto data = label_data<T>(kind, s);
      km::Params p;
      p.k = s.k;
      p.init = init;
      p.seed = 5;
      p.loops = 4;
      const auto cpu = km::initial_centroids(data, p, false);
      auto engine = fused.make<T>(p);
      // km::run hands the engine the data's range first when the initialisation reads the data
      // (it is checked on the host before); with or without, the engine stages.
      if (kind != 0) engine->set_whole({data.n, km::max_abs_value(data)});
      const T* rows = engine->stage(data, static_cast<std::size_t>(s.k));
      ASSERT_NE(rows, nullptr) << "the tensor path holds the data row-major";
      const auto gpu = km::initial_centroids(data, p, true, rows);
      EXPECT_EQ(std::memcmp(gpu.data(), cpu.data(), cpu.size() * sizeof(T)), 0) << "centres from the staged copy";
      const auto staged = km::fit(*engine, data, p);
      km::Params given = p;
      given.init = km::Init::given;
      given.given_d = s.d;
      given.given_centroids.assign(cpu.begin(), cpu.end());
      const auto ref = km::run(fused, data, given);
      EXPECT_EQ(staged.centroids, ref.centroids);
      EXPECT_EQ(staged.labels, ref.labels);
      EXPECT_EQ(staged.path.rfind("tensor", 0), 0u) << staged.path;
    }
  km::Params p;
  p.k = 8;
  const auto small = label_data<T>(0, {6000, 4, 8});
  EXPECT_EQ(fused.make<T>(p)->stage(small, 8), nullptr) << "the one-pass path is coordinate-major";
  const auto rows = label_data<T>(0, s);
  auto part = fused.make<T>(p);
  part->set_whole({2 * rows.n, km::max_abs_value(rows)});
  EXPECT_EQ(part->stage(rows, static_cast<std::size_t>(s.k)), nullptr) << "a part of a larger problem";
}
TEST(GpuInitStaged, Double) { check_staged_init<double>(); }
TEST(GpuInitStaged, Float) { check_staged_init<float>(); }

}  // namespace

// ------------------------------------------------------------ several GPUs, exact sums

namespace {

// The device-update rungs (offload, offload-block, fused) sum in 64-bit fixed point and
// update as omp does (kmeans/fixed_point.hpp), and their labels are seq's = omp's: so the
// whole run is omp's bit for bit, centroids and labels, on random, clustered and quantised data.
// And --gpus: the rows split over every GPU here (one GPU still goes through NCCL), the
// partials all-reduced: the one-GPU run bit for bit, per-iteration inertia and counts included.
struct SplitShape {
  std::size_t n, d;
  int k;
};
const std::vector<SplitShape> kSplitShapes = {{5003, 2, 16}, {4001, 16, 16}, {3001, 64, 100}, {2003, 33, 300}};

template <class T>
void check_split_and_omp(const char* name) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& impl = km::find_implementation(name);
  const int gpus = std::min(km::device_count(), 4);
  bool have_nccl = true;
  try {
    km::make_multi_gpu<T>(impl, [] { km::Params p; p.gpus = 1; return p; }());
  } catch (const km::DeviceError& e) {
    have_nccl = false;
    std::printf("[   INFO   ] no NCCL, the split is not checked: %s\n", e.what());
  }
  for (const SplitShape& s : kSplitShapes) {
    if (!km::supports(impl, static_cast<std::size_t>(s.k), s.d, sizeof(T)).ok) continue;
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data " +
                   (kind == 0 ? "uniform" : kind == 1 ? "blobs" : "quantised"));
      const auto data = label_data<T>(kind, {s.n, s.d, s.k});
      km::Params p;
      p.k = s.k;
      p.loops = 6;
      p.init = km::Init::kmeanspp;
      const auto one = km::run(impl, data, p);
      const auto omp = km::run(km::find_implementation("omp"), data, p);
      EXPECT_EQ(one.centroids, omp.centroids) << "the GPU's centroids are omp's";
      EXPECT_EQ(one.labels, omp.labels);
      EXPECT_EQ(one.iterations, omp.iterations);
      if (!have_nccl) continue;
      p.gpus = gpus;
      const auto engine = km::make_multi_gpu<T>(impl, p);
      const auto split = km::fit(*engine, data, p);
      EXPECT_EQ(split.gpus, gpus);
      EXPECT_EQ(split.centroids, one.centroids) << gpus << " GPUs";
      EXPECT_EQ(split.labels, one.labels);
      EXPECT_EQ(split.inertia, one.inertia);
      ASSERT_EQ(split.iterations, one.iterations);
      for (int it = 0; it < one.iterations; ++it) {
        EXPECT_EQ(split.per_iteration[it].changed, one.per_iteration[it].changed);
        // One GPU takes Hamerly's bounds (the whole problem in memory), whose iteration inertia
        // is the clusters' algebraic sum in double: within 1e-11 of the per-object sum in
        // double; in float the per-object sum adds float distances, 1e-6.
        EXPECT_NEAR(split.per_iteration[it].inertia, one.per_iteration[it].inertia,
                    (sizeof(T) == 4 ? 1e-6 : 1e-11) * one.per_iteration[it].inertia);
        EXPECT_EQ(split.per_iteration[it].shift, one.per_iteration[it].shift);
      }
    }
  }
}

}  // namespace

TEST(GpuSplit, FusedDouble) { check_split_and_omp<double>("fused"); }
TEST(GpuSplit, FusedFloat) { check_split_and_omp<float>("fused"); }
TEST(GpuSplit, OffloadDouble) { check_split_and_omp<double>("offload"); }
TEST(GpuSplit, OffloadBlockFloat) { check_split_and_omp<float>("offload-block"); }

TEST(GpuSplit, RefusedWhereItCannotRun) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  auto data = km::generate_uniform<float>(1000, 4, 3);
  km::Params p;
  p.k = 4;
  p.gpus = 1;
  try {  // a rung whose update is on the host has no parts
    km::make_multi_gpu<float>(km::find_implementation("shared"), p);
    ADD_FAILURE() << "shared accepted --gpus";
  } catch (const km::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("needs fused, offload or offload-block"), std::string::npos) << e.what();
  }
  p.gpus = km::device_count() + 1;
  try {
    km::run(km::find_implementation("fused"), data, p);
    ADD_FAILURE() << "more GPUs than the machine has";
  } catch (const km::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("usable GPU"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------ fused's one-pass kernels

namespace {

// Each shape with each of label_data's kinds (uniform, clustered, quantised), traced, with
// the one-pass tests' parameters (K, 20 iterations, fused's `config`): body(shape, data, params).
template <class T, class F>
void each_one_pass_case(const std::vector<SplitShape>& shapes, const km::FusedConfig& config, F&& body) {
  for (const SplitShape& s : shapes) {
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data " + std::to_string(kind));
      const auto data = label_data<T>(kind, {s.n, s.d, s.k});
      km::Params p;
      p.k = s.k;
      p.loops = 20;
      p.fused = config;
      body(s, data, p);
    }
  }
}

// The delta kernel (only movers accumulated, float filter, the update in its last block)
// against the classic one-pass kernel (FusedConfig::classic): the same labels, centroids and
// change counts bit for bit over 20 iterations (both sum the same fixed-point integers), the
// shift bit for bit (one fixed order: update.cuh, total_shift), the inertia to 1e-11 (in float
// 1e-6 + 2^-15: once the bounds start, the delta kernel's is the clusters' algebraic sum in
// double, the classic kernel's a sum of per-object distances in T; and at widths 16 and 32 the delta
// kernel takes most addends from its scores, each within 2^-15: margin.hpp, approx_dist_bound),
// and omp's centroids and labels bit for bit.
// Shapes with the index in the score's bits (K <= 64) and without (K = 100, 128, 256), d = 1 ... 32,
// the largest K*d the dispatch gives one pass (4096), and with Elkan's test before the scores
// (d = 2, K = 64; ball=1 runs it on every d <= 2). Above d = 4 the close calls are
// re-checked by the whole warp (K = 64, 128, 256: several centroids per lane); some must occur.
template <class T>
void check_delta_as_classic() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  km::FusedConfig one_pass;
  one_pass.path = km::FusedConfig::Path::one_pass;
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{3001, 2, 16}, {2001, 3, 100}, {2001, 24, 64}}
              : std::vector<SplitShape>{{20011, 1, 2},  {20011, 2, 16}, {20011, 2, 64}, {9001, 3, 100},
                                        {9001, 8, 64},  {9001, 16, 16}, {5003, 32, 16}, {5003, 24, 64},
                                        {9001, 16, 256}, {5003, 32, 128}};
  std::int64_t warp_rechecks = 0;  // above d = 4 the warp re-checks together (nearest_warp)
  each_one_pass_case<T>(shapes, one_pass, [&](const SplitShape& s, const km::Dataset<T>& data, const km::Params& p) {
    const auto delta = km::run(fused, data, p);
    for (const auto& it : delta.per_iteration)
      if (s.d > 4) warp_rechecks += it.rechecked;
    km::Params classic_p = p;
    classic_p.fused.classic = true;
    const auto classic = km::run(fused, data, classic_p);
    const auto omp = km::run(km::find_implementation("omp"), data, p);
    EXPECT_TRUE(delta.path.starts_with("one-pass")) << delta.path;
    EXPECT_EQ(delta.centroids, classic.centroids);
    EXPECT_EQ(delta.labels, classic.labels);
    ASSERT_EQ(delta.iterations, classic.iterations);
    for (int it = 0; it < delta.iterations; ++it) {
      EXPECT_EQ(delta.per_iteration[it].changed, classic.per_iteration[it].changed) << "iteration " << it + 1;
      EXPECT_EQ(delta.per_iteration[it].shift, classic.per_iteration[it].shift) << "iteration " << it + 1;
      // The delta kernel's bounds (on by default) give the algebraic inertia (see GpuSplit).
      EXPECT_NEAR(delta.per_iteration[it].inertia, classic.per_iteration[it].inertia,
                  (sizeof(T) == 4 ? 1e-6 + 0x1p-15 : 1e-11) * classic.per_iteration[it].inertia);
      EXPECT_GE(delta.per_iteration[it].rechecked, 0);
    }
    EXPECT_EQ(delta.centroids, omp.centroids) << "omp's run, bit for bit (the split test's claim)";
    EXPECT_EQ(delta.labels, omp.labels);
  });
  EXPECT_GT(warp_rechecks, 0) << "no close call above d = 4: the warp's re-check went untested";
}

}  // namespace

TEST(GpuFusedDelta, DoubleAsClassic) { check_delta_as_classic<double>(); }
TEST(GpuFusedDelta, FloatAsClassic) { check_delta_as_classic<float>(); }

namespace {

// A variant of the delta kernel (`on`) against the kernel without it (`off`) and omp over the same
// fit: one-pass path, labels and centroids bit for bit, omp's labels, and per iteration the change
// counts and shifts bit for bit and the inertia within 1e-11 (1e-6 + 2^-15 in float: not bit for
// bit, since an object re-checked in seq's arithmetic adds seq's unfused distance, the others the
// fused one, two kernels may re-check different objects, and the FMA-scored kernels take most
// addends from their scores, within 2^-15: margin.hpp, approx_dist_bound). False where the
// iteration counts differ.
template <class T, class R>
bool expect_same_fit(const R& on, const R& off, const R& omp, double inertia_slack = 0) {
  EXPECT_TRUE(on.path.starts_with("one-pass")) << on.path;
  EXPECT_EQ(on.labels, off.labels);
  EXPECT_EQ(on.labels, omp.labels);
  EXPECT_EQ(on.centroids, off.centroids);
  EXPECT_EQ(on.iterations, off.iterations);
  if (on.iterations != off.iterations) return false;
  for (int it = 0; it < on.iterations; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it + 1));
    const auto &a = on.per_iteration[it], &b = off.per_iteration[it];
    EXPECT_EQ(a.changed, b.changed);
    EXPECT_EQ(a.shift, b.shift);
    EXPECT_NEAR(a.inertia, b.inertia, (sizeof(T) == 4 ? 1e-6 + 0x1p-15 : 1e-11) * b.inertia + inertia_slack);
  }
  return true;
}

// A one-pass kernel variant switched by the FusedConfig field `field` (each of `settings` in
// turn) against the same kernel with field = `off` ("0" unless given; the bounds kept off; `also`:
// more fields, "name=value,...", for both): for each shape and data kind (each_one_pass_case's
// uniform, blobs, quantised), the fit without the variant and omp's, then with each setting:
// expect_same_fit, then check(shape, on, off, uniform data?, setting).
template <class T, class Check>
void check_variant_against_off(const std::string& field, const std::vector<SplitShape>& shapes,
                               const std::vector<std::string>& settings, Check&& check,
                               const std::string& off_value = "0", const std::string& also = "") {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  // (the float copy in double, whose inertia is the clusters' algebraic sum, off unless it is the
  // variant: the others are compared bit for bit, inertia included)
  km::FusedConfig base;
  km::apply_fused_config(base, "path=one-pass,bounds_after=0,float_copy=0," + also);
  int call = 0;
  each_one_pass_case<T>(shapes, base, [&](const SplitShape& s, const km::Dataset<T>& data, const km::Params& p) {
    const bool uniform = call++ % 3 == 0;
    km::Params variant = p;
    km::apply_fused_config(variant.fused, field + "=" + off_value);
    const auto off = km::run(fused, data, variant);
    const auto omp = km::run(km::find_implementation("omp"), data, p);
    for (const std::string& setting : settings) {
      SCOPED_TRACE(field + "=" + setting);
      variant.fused = p.fused;
      km::apply_fused_config(variant.fused, field + "=" + setting);
      const auto on = km::run(fused, data, variant);
      if (expect_same_fit<T>(on, off, omp)) check(s, on, off, uniform, setting);
    }
  });
}

// The cell table at d = 2 (6_fused_delta.cuh, CELLS; cells.hpp) against the same kernel without
// it (cells=0: the scores, or Elkan's test at K > 32): labels, centroids, change
// counts and shifts bit for bit over 20 iterations (the bounds kept off), the inertia within
// 1e-11 (1e-6 in float; see below), omp's labels; at 4 x 4 (the grid's coarsest, few
// cells labelled), 128 x 128 (the default) and 256 x 256 cells (the most), and K = 1 (every cell one
// label), 5, 16, 64. The table must label objects (JSON looked_up), most of them at 128 x 128
// on uniform data once the centroids spread (so a table never consulted fails).
template <class T>
void check_cells() {
  const std::vector<SplitShape> shapes = quick() ? std::vector<SplitShape>{{30011, 2, 16}}
                                                 : std::vector<SplitShape>{{30011, 2, 1}, {30011, 2, 5},
                                                                           {30011, 2, 16}, {20011, 2, 64}};
  check_variant_against_off<T>(
      "cells", shapes, {"4", "128", "256"},
      [](const SplitShape& s, const auto& on, const auto& off, bool uniform, const std::string& side) {
        std::int64_t looked_up = 0;
        for (int it = 0; it < on.iterations; ++it) {
          SCOPED_TRACE("iteration " + std::to_string(it + 1));
          EXPECT_EQ(off.per_iteration[it].looked_up, -1);
          ASSERT_GE(on.per_iteration[it].looked_up, 0) << "the table's count is reported";
          EXPECT_LE(on.per_iteration[it].looked_up, static_cast<std::int64_t>(s.n));
          looked_up += on.per_iteration[it].looked_up;
        }
        if (side != "4" || s.k <= 16) {  // 64 centroids over 16 cells: none need be one's
          EXPECT_GT(looked_up, 0) << "no object took a cell's label";
        }
        if (side == "128" && s.k <= 16 && uniform) {
          EXPECT_GT(on.per_iteration.back().looked_up, static_cast<std::int64_t>(s.n / 2));
        }
      });
}

// The cell table's lean passes (6_fused_delta.cuh: a lane's objects in 16-byte loads, one ballot
// an object; p.vector_cells) against the general loop alone (lean_cells=0): the same
// labels, centroids, change counts and shifts (expect_same_fit), and per iteration the same
// inertia bit for bit (the same per-object arithmetic and fixed-point sums), at least as many
// lookups and at most as many re-checks (within n / 1000). The lean passes run every block's
// whole passes (one each at ~30,000 and ~20,000 objects, several at 2^20 + 12), the rest in the
// general loop; n % 4 == 0 loads the second coordinate 16 bytes at a time, n % 4 == 1 or 2 (in
// double n % 2 == 1) one value at a time. Up to K = 16 a mixed cell's candidates come from
// shared memory, above from L2.
template <class T>
void check_cells_lean() {
  const std::vector<SplitShape> shapes = quick() ? std::vector<SplitShape>{{30012, 2, 16}, {30013, 2, 16}}
                                                 : std::vector<SplitShape>{{30012, 2, 16},
                                                                           {30013, 2, 16},
                                                                           {30014, 2, 16},
                                                                           {20012, 2, 64},
                                                                           {20013, 2, 64},
                                                                           {(1u << 20) + 12, 2, 16},
                                                                           {(1u << 20) + 14, 2, 16}};
  check_variant_against_off<T>(
      "lean_cells", shapes, {"1"}, [](const SplitShape& s, const auto& on, const auto& off, bool, const std::string&) {
        EXPECT_NE(on.path.find("cells, lean"), std::string::npos) << on.path;
        EXPECT_EQ(off.path.find("lean"), std::string::npos) << off.path;
        std::int64_t looked_up = 0;
        for (int it = 0; it < on.iterations; ++it) {
          SCOPED_TRACE("iteration " + std::to_string(it + 1));
          const auto &a = on.per_iteration[it], &b = off.per_iteration[it];
          EXPECT_EQ(a.inertia, b.inertia);
          // The lean lookup's cell index is the exact product's floor (cells.hpp: cell_in_range),
          // the general loop's a rounded float product's: an object within rounding of a cell's
          // edge may fall in the cell beside, labelled where the other is mixed. An object at the
          // grid's far edge the general loop scores (its index rounded to side), the lean lookup
          // labels (clamped); an object of a mixed cell it scores against the cell's candidates
          // alone, with fewer close calls. The labels are seq's either way.
          const std::int64_t slack = static_cast<std::int64_t>(s.n / 1000);
          EXPECT_GE(a.looked_up + slack, b.looked_up);
          EXPECT_LE(a.looked_up, static_cast<std::int64_t>(s.n));
          EXPECT_LE(a.rechecked, b.rechecked + slack);
          looked_up += a.looked_up;
        }
        EXPECT_GT(looked_up, 0) << "no object took a cell's label";
      },
      // (In the objects' own order: the sorted order's held cells take an inertia by algebra.)
      "0", "sorted=0");
}

// The cells' sorted order (fused.cu: start_sorted; cell_order.cuh; forced, sorted=1:
// by default only from 1024 objects a cell): the objects sorted by cell once per fit, each
// iteration the chunks of the cells whose label held left unread, against the objects' own order
// (sorted=0): labels (back in the objects' order), centroids,
// change counts and shifts bit for bit, omp's labels, and the inertia within expect_same_fit's
// tolerance plus the fixed-point tally's roundings (fixed_point.hpp: a unit of 2^-E): a held cell
// adds its objects' inertia by algebra (within 2^-40 of it, its error bound, cell_order.cuh)
// rounded to the unit once, where the objects' order rounds each object's addend, half a unit
// each at most: n / 2 + cells units. (On quantised data, 36 distinct points, ~29,000 objects a
// point, each point's objects round alike, so the objects' order's sum is off by up to ~1.3e-11 a
// point, 2.8e-10 in all against an inertia of ~14; the algebra rounds once.)
// At 2^20 + 13 objects (n % 128 != 0: a tail for the general loop) and 2^21 + 128 (whole chunks
// only), K = 16 (64 x 64 cells, ~256 or ~512 objects a cell) and at 2^21 + 7, K = 64 (128 x 128:
// ~128 a cell, few single chunks). Per iteration the skipped objects are reported (none in the
// first: no table before), at most n; on uniform data at K = 16 the later iterations must skip
// over a quarter of the objects (so a list that skipped nothing fails; at 2^20 objects a cell
// holds ~256, and its single chunks about half of them: 44-50% skipped, H200), and without the
// order none are reported.
template <class T>
void check_cells_sorted() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  km::FusedConfig base;
  base.path = km::FusedConfig::Path::one_pass;
  base.bounds_after = 0;
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{(1u << 20) + 13, 2, 16}}
              : std::vector<SplitShape>{{(1u << 20) + 13, 2, 16}, {(1u << 21) + 128, 2, 16}, {(1u << 21) + 7, 2, 64}};
  int call = 0;
  each_one_pass_case<T>(shapes, base, [&](const SplitShape& s, const km::Dataset<T>& data, const km::Params& p) {
    const bool uniform = call++ % 3 == 0;
    km::Params unsorted = p, sorted = p;
    unsorted.fused.sorted = false;
    sorted.fused.sorted = true;
    const auto off = km::run(fused, data, unsorted);
    const auto omp = km::run(km::find_implementation("omp"), data, p);
    const auto on = km::run(fused, data, sorted);
    double largest = 0;
    for (std::size_t i = 0; i < data.n * data.d; ++i)
      largest = std::max(largest, std::fabs(static_cast<double>(data.values.data()[i])));
    const double cells = s.k <= 16 ? 64.0 * 64.0 : 128.0 * 128.0;  // (cells.hpp: cell_side_for, at most)
    const double slack = (static_cast<double>(s.n) / 2 + cells) * km::fixed_scales(largest, s.n, s.d).inv_inertia;
    if (!expect_same_fit<T>(on, off, omp, slack)) return;
    EXPECT_NE(on.path.find("cells, lean, sorted"), std::string::npos) << on.path;
    EXPECT_EQ(off.path.find("sorted"), std::string::npos) << off.path;
    ASSERT_GE(on.iterations, 3);
    for (int it = 0; it < on.iterations; ++it) {
      SCOPED_TRACE("iteration " + std::to_string(it + 1));
      const auto &a = on.per_iteration[it], &b = off.per_iteration[it];
      EXPECT_EQ(b.skipped, -1) << "the objects' own order skips none";
      ASSERT_GE(a.skipped, 0) << "the skipped objects are reported";
      EXPECT_LE(a.skipped, static_cast<std::int64_t>(s.n));
      if (it == 0) {
        EXPECT_EQ(a.skipped, 0) << "no table before the first";
      }
      if (uniform && s.k == 16 && it >= 3) {
        EXPECT_GT(a.skipped, static_cast<std::int64_t>(s.n / 4)) << "held cells' objects read";
      }
    }
  });
}

}  // namespace

TEST(GpuFusedDelta, DoubleCellsAsWithout) { check_cells<double>(); }
TEST(GpuFusedDelta, FloatCellsAsWithout) { check_cells<float>(); }
TEST(GpuFusedDelta, DoubleCellsLeanAsGeneral) { check_cells_lean<double>(); }
TEST(GpuFusedDelta, FloatCellsLeanAsGeneral) { check_cells_lean<float>(); }
// The sorted order where the stop rule ends the fit (threshold 0.2%): the kernel launched ahead
// finds the gate shut after its table's kernel listed chunks and counted held cells, so the final
// E-step reads every chunk and the labels go back to the objects' order from there: the same fit
// as the objects' order and omp's labels, stopped before the loop limit.
template <class T>
void check_cells_sorted_stop() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  const auto data = label_data<T>(0, {(1u << 20) + 13, 2, 16});
  km::Params p;
  p.k = 16;
  p.loops = 60;
  p.threshold = 0.002;
  p.fused.path = km::FusedConfig::Path::one_pass;
  p.fused.bounds_after = 0;
  p.fused.sorted = false;
  const auto off = km::run(fused, data, p);
  const auto omp = km::run(km::find_implementation("omp"), data, p);
  p.fused.sorted = true;
  const auto on = km::run(fused, data, p);
  EXPECT_LT(on.iterations, p.loops) << "the stop rule ended the fit";
  expect_same_fit<T>(on, off, omp);
  EXPECT_GT(on.per_iteration.back().skipped, 0);
}

TEST(GpuFusedDelta, DoubleCellsSortedAsObjectOrder) { check_cells_sorted<double>(); }
TEST(GpuFusedDelta, DoubleCellsSortedStopRule) { check_cells_sorted_stop<double>(); }
TEST(GpuFusedDelta, FloatCellsSortedStopRule) { check_cells_sorted_stop<float>(); }
TEST(GpuFusedDelta, FloatCellsSortedAsObjectOrder) { check_cells_sorted<float>(); }

namespace {

// The delta kernel's scores on the tensor cores (6_fused_delta.cuh, MMA: TF32 mma, the filter's
// margin widened for it, the objects it cannot call scored again with FMAs) against the same
// kernel with FMA scores (mma=0): labels, centroids, change counts and shifts bit for
// bit over 20 iterations (bounds off), the inertia within 1e-11 (1e-6 + 2^-15 in float: an object
// re-checked in seq's arithmetic adds its unfused distance, and the FMA scores' kernel takes most
// addends from its scores), omp's labels; K = 1 (every column but one past
// K), 5 and 33 (n-tiles partly past K), 16, 64; d = 12, 16 (float's unroll of 2: four m-tiles),
// 20, 32. The FMA re-score is the FMA kernel's arithmetic, so the same objects reach seq's
// (rechecked equal each iteration), all of them among the re-scored; on uniform data the wider
// margin must re-score more objects than that (else the tensor cores called nothing), yet not most.
template <class T>
void check_mma() {
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{10007, 32, 64}, {10007, 16, 5}}
              : std::vector<SplitShape>{{20011, 32, 64}, {20011, 32, 1}, {20011, 24, 33}, {20011, 16, 16},
                                        {20011, 12, 5},  {20011, 20, 64}, {20011, 32, 16}};
  check_variant_against_off<T>(
      "mma", shapes, {"1"},
      [](const SplitShape& s, const auto& on, const auto& off, bool uniform, const std::string&) {
        std::int64_t rescored = 0, rechecked = 0;
        for (int it = 0; it < on.iterations; ++it) {
          SCOPED_TRACE("iteration " + std::to_string(it + 1));
          const auto &a = on.per_iteration[it], &b = off.per_iteration[it];
          EXPECT_EQ(a.rechecked, b.rechecked);
          EXPECT_EQ(b.rescored, -1);
          ASSERT_GE(a.rescored, a.rechecked) << "the re-scored are reported, the re-checked among them";
          EXPECT_NE(on.path.find("mma"), std::string::npos) << on.path;
          EXPECT_EQ(off.path.find("mma"), std::string::npos) << off.path;
          rescored += a.rescored;
          rechecked += a.rechecked;
        }
        if (uniform && s.k > 1) {
          EXPECT_GT(rescored, rechecked) << "the TF32 margin sent no more objects on than the FMA filter's";
          EXPECT_LT(rescored, static_cast<std::int64_t>(s.n) * on.iterations / 2) << "most objects re-scored";
        }
      });
}

}  // namespace

TEST(GpuFusedDelta, DoubleMmaAsFma) { check_mma<double>(); }
TEST(GpuFusedDelta, FloatMmaAsFma) { check_mma<float>(); }

namespace {

// Two runs of the same arithmetic: every iteration's inertia, re-checked and re-scored objects
// the same (expect_same_fit has compared labels, centroids, change counts and shifts).
template <class R>
void expect_same_counts(const R& on, const R& off) {
  for (int it = 0; it < on.iterations; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it + 1));
    const auto &a = on.per_iteration[it], &b = off.per_iteration[it];
    EXPECT_EQ(a.inertia, b.inertia);
    EXPECT_EQ(a.rechecked, b.rechecked);
    EXPECT_EQ(a.rescored, b.rescored);
  }
}

// The delta kernel with d a constant where d fills its register width (EXACT: d = 4, 8, 16, 32;
// the FMA scores, the index packed or not (K > 64), and the tensor-core scores at d = 16 and 32)
// against the same kernel with d at run time (fixed_width=0): the same arithmetic, so
// labels, centroids, change counts, shifts, the objects re-checked and re-scored, and the inertia
// all bit for bit, omp's labels; the report's path names the variant that ran ("d fixed"), so a
// run where the engine did not take it fails. d = 12 (width 16, not filled) must not take it.
template <class T>
void check_exact() {
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{10007, 16, 16}, {10007, 32, 64}}
              : std::vector<SplitShape>{{20011, 4, 16}, {20011, 8, 5},  {20011, 16, 16}, {20011, 16, 33},
                                        {20011, 32, 64}, {20011, 16, 70}, {20011, 12, 16}};
  check_variant_against_off<T>(
      "fixed_width", shapes, {"1"},
      [](const SplitShape& s, const auto& on, const auto& off, bool, const std::string&) {
        EXPECT_EQ(off.path.find("d fixed"), std::string::npos) << off.path;
        if (s.d == 12) EXPECT_EQ(on.path.find("d fixed"), std::string::npos) << on.path;
        else EXPECT_NE(on.path.find("d fixed"), std::string::npos) << on.path;
        expect_same_counts(on, off);
      });
}

}  // namespace

TEST(GpuFusedDelta, DoubleExactAsRuntimeD) { check_exact<double>(); }
TEST(GpuFusedDelta, FloatExactAsRuntimeD) { check_exact<float>(); }

namespace {

// The staged loads (TILE: each warp's next pass by cp.async into shared memory, its objects 32 U
// consecutive ones) against the loads into registers (staged=0): the same arithmetic
// on the same objects, so labels, centroids, change counts, shifts, the objects re-checked and
// re-scored and the inertia bit for bit, omp's labels; with the FMA and the tensor-core scores. n a multiple of 4 but not of a pass (the last pass's
// chunks partly past n, zero-filled), the index packed (K <= 64) and not (K = 70), d = 16 and 32
// (with the tensor-core scores also d = 16, K = 40: staged by default at d = 16 in float from K = 24),
// and d = 2 with the cell table (the buffers after it; the table's lookups read them);
// the report's path must say "staged" there, and must not at n % 4 != 0 (20011), where the
// chunks would cross n.
template <class T>
void check_tile(bool mma) {
  const std::vector<SplitShape> shapes =
      quick() ? (mma ? std::vector<SplitShape>{{20012, 16, 16}} : std::vector<SplitShape>{{20012, 16, 16}, {30012, 2, 16}})
      : mma   ? std::vector<SplitShape>{{20012, 16, 16}, {20012, 32, 64}, {4004, 32, 5}, {20012, 16, 40}}
              : std::vector<SplitShape>{{20012, 16, 16}, {20012, 32, 16}, {20012, 16, 70}, {4004, 32, 5},
                                        {20011, 16, 16}, {30012, 2, 16}, {20012, 2, 64}};
  check_variant_against_off<T>(
      "staged", shapes, {"1"},
      [mma](const SplitShape& s, const auto& on, const auto& off, bool, const std::string&) {
        if (s.k <= 64) {
          EXPECT_EQ(on.path.find("mma") != std::string::npos, mma) << on.path;
        }
        EXPECT_EQ(off.path.find("staged"), std::string::npos) << off.path;
        if (s.n % 4) {
          EXPECT_EQ(on.path.find("staged"), std::string::npos) << on.path;
        } else {
          EXPECT_NE(on.path.find("staged"), std::string::npos) << on.path;
        }
        expect_same_counts(on, off);
      },
      // (mma: the tensor-core scores forced on, d = 16 and 32, K <= 64; they write their rows of
      // x'' into the pass's buffer once its data are in registers. At d = 2 in the objects' order:
      // the staged kernel reads x in place, and the cells' sorted order's held cells take their
      // inertia by algebra; check_cells_sorted.)
      "0", mma ? "mma=1,sorted=0" : "mma=0,sorted=0");
}

// The staged kernel's warps taking their passes as they come to them (DeltaPass::chunks, 16
// counters; the default; in float since session 28) against a fixed share a warp
// (dynamic_chunks=0): which warp sums
// an object must not show, so labels, centroids, change counts, shifts, re-checks and the inertia
// bit for bit, omp's labels. n large enough that most passes come from the counters (beyond the
// grid's first two passes: ~2 x 3168 warps of 32 objects a pass on an H100), n a multiple of 4
// but not of a pass (the last chunks partly past n), K packed and not (70), d = 16 and 32; and a
// small n, where no warp gets a third pass. A lost or repeated chunk changes the sums.
template <class T>
void check_dynamic_chunks() {
  // (In float the staged kernel takes the counters at register width 32 only: d 17-32.)
  const std::vector<SplitShape> shapes =
      sizeof(T) == 8 ? (quick() ? std::vector<SplitShape>{{(1 << 20) + 12, 16, 16}}
                                : std::vector<SplitShape>{{(1 << 20) + 12, 16, 16},
                                                          {(1 << 19) + 4, 32, 16},
                                                          {(1 << 19) + 4, 16, 70},
                                                          {20012, 16, 16}})
                     : (quick() ? std::vector<SplitShape>{{(1 << 19) + 4, 32, 16}}
                                : std::vector<SplitShape>{{(1 << 19) + 4, 32, 16},
                                                          {(1 << 20) + 12, 32, 12},
                                                          {(1 << 19) + 4, 32, 70},
                                                          {20012, 32, 16}});
  check_variant_against_off<T>(
      "dynamic_chunks", shapes, {"1"},
      [](const SplitShape&, const auto& on, const auto& off, bool, const std::string&) {
        EXPECT_NE(on.path.find("staged"), std::string::npos) << on.path;
        EXPECT_EQ(on.path, off.path);
        expect_same_counts(on, off);
      },
      "0", "staged=1");
}

// The cell table's lean passes taking their warps' chunks as they come to them (the
// default) against a fixed share (dynamic_chunks=0), as above: the same labels, centroids,
// counts, shifts and inertia bit for bit. The lookups may differ, by at most the objects the
// general loop takes in either (it looks an object within rounding of a cell's edge up in the cell
// beside, where the lean passes may find it mixed: check_cells_lean): past the whole chunks, under
// 32 U = 128, against past the last whole block pass, under a block's 1024 (quantised data at
// 30,012 objects: 53-69 of 16,000-28,000). 2^22 objects (most chunks from the
// counters: 2^15 chunks of 128 against ~2 x 3168 warps on an H100), n % 4 != 0 (the second
// coordinate a value at a time, a remainder past the whole chunks for the general loop), K = 64
// (the candidates from L2) and a small n (no warp gets a third chunk).
template <class T>
void check_lean_dynamic_chunks() {
  const std::vector<SplitShape> shapes = quick() ? std::vector<SplitShape>{{(1 << 22) + 12, 2, 16}}
                                                 : std::vector<SplitShape>{{(1 << 22) + 12, 2, 16},
                                                                           {(1 << 21) + 13, 2, 16},
                                                                           {(1 << 21) + 12, 2, 64},
                                                                           {30012, 2, 16}};
  check_variant_against_off<T>(
      "dynamic_chunks", shapes, {"1"},
      [](const SplitShape& s, const auto& on, const auto& off, bool, const std::string&) {
        EXPECT_NE(on.path.find("cells, lean"), std::string::npos) << on.path;
        EXPECT_EQ(on.path, off.path);
        expect_same_counts(on, off);
        const std::int64_t slack = 1024 + 128;
        for (int it = 0; it < on.iterations; ++it) {
          SCOPED_TRACE("iteration " + std::to_string(it + 1));
          const std::int64_t a = on.per_iteration[it].looked_up, b = off.per_iteration[it].looked_up;
          EXPECT_LE(a > b ? a - b : b - a, slack);
          EXPECT_LE(a, static_cast<std::int64_t>(s.n));
        }
      },
      // (In the objects' order: the cells' sorted order needs the chunks as they come, and its
      // held cells' inertia by algebra is not the objects' addends bit for bit; check_cells_sorted.)
      "0", "staged=0,sorted=0");
}

// The tensor-core scores' kernel (not staged) at register width 32, its warps taking their passes
// of 32 objects as they come to them (the default) against a fixed share a warp
// (dynamic_chunks=0), as above: the same labels, centroids, counts, shifts, re-scores,
// re-checks and inertia bit for bit, omp's labels. 2^19 objects and more (2^14 chunks and more
// against ~2 x 2112 warps on an H100: most from the counters), n not a multiple of 32 (the last
// chunk partly past n), d = 32 and 24 (the width's loads tested against d), K = 64 and 5, and a
// small n (no warp gets a third pass).
template <class T>
void check_mma_dynamic_chunks() {
  const std::vector<SplitShape> shapes = quick() ? std::vector<SplitShape>{{(1 << 19) + 13, 32, 64}}
                                                 : std::vector<SplitShape>{{(1 << 19) + 13, 32, 64},
                                                                           {(1 << 20) + 7, 24, 64},
                                                                           {(1 << 19) + 4, 32, 5},
                                                                           {20011, 32, 16}};
  check_variant_against_off<T>(
      "dynamic_chunks", shapes, {"1"},
      [](const SplitShape&, const auto& on, const auto& off, bool, const std::string&) {
        EXPECT_NE(on.path.find("mma"), std::string::npos) << on.path;
        EXPECT_EQ(on.path.find("staged"), std::string::npos) << on.path;
        EXPECT_EQ(on.path, off.path);
        expect_same_counts(on, off);
      },
      "0", "staged=0,mma=1");
}

}  // namespace

TEST(GpuFusedDelta, FloatMmaPassesAsFixedShares) { check_mma_dynamic_chunks<float>(); }
TEST(GpuFusedDelta, DoubleMmaPassesAsFixedShares) { check_mma_dynamic_chunks<double>(); }
TEST(GpuFusedDelta, DoubleStagedPassesAsFixedShares) { check_dynamic_chunks<double>(); }
TEST(GpuFusedDelta, FloatStagedPassesAsFixedShares) { check_dynamic_chunks<float>(); }
TEST(GpuFusedDelta, DoubleLeanCellPassesAsFixedShares) { check_lean_dynamic_chunks<double>(); }
TEST(GpuFusedDelta, FloatLeanCellPassesAsFixedShares) { check_lean_dynamic_chunks<float>(); }

// The next pass's lines prefetched before the scores (prefetch: by default into L1
// in float at d 9-16 with the FMA scores and with the tensor-core scores at d 17-32) against none
// and against L2: whole fits bit for bit (labels, centroids, change and re-check counts); the
// prefetch's addresses past n (the last pass) are skipped, never read.
TEST(GpuFusedDelta, PrefetchAsWithout) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const auto same_path = [](const std::string& a, const std::string& b) { EXPECT_EQ(a, b); };
  // (the staged loads, which have no prefetch, off: odd n never takes them anyway)
  km::FusedConfig base;
  base.path = km::FusedConfig::Path::one_pass;
  base.staged = false;
  const std::vector<LabelShape> shapes = quick() ? std::vector<LabelShape>{{20011, 16, 16}}
                                                 : std::vector<LabelShape>{{20011, 16, 16}, {20011, 12, 8},
                                                                           {10007, 32, 64}, {30011, 2, 16}};
  for (const char* value : {"0", "2"}) {
    SCOPED_TRACE(std::string("prefetch=") + value);
    check_same_fits_without<float>(base, "prefetch", shapes, same_path, value);
  }
  // (double: off by default)
  check_same_fits_without<double>(base, "prefetch", shapes, same_path, "1");
}

// Each iteration's kernel queued behind the last one before the last one's counters are read,
// gated by the stop rule its last block evaluates (fused.cu: iterate), against one launch at a
// time (launch_ahead=0): the same fits bit for bit (labels, centroids, the iteration
// count, each iteration's changes, shift, inertia and re-checks) where the fit stops on the lab
// rule (changed <= 1%), on scikit-learn's (a shift no larger than one seen mid-fit, while objects
// still move: a kernel run past the stop would move the centroids again), at --loops (3: a
// fourth kernel would do the same) and, with Hamerly's bounds allowed, where they start (no
// kernel is launched ahead while they run or start); d = 16, the cell table (d = 2) and the
// tensor-core scores (d = 32, K = 64). Launched ahead as programmatic dependents timed by the
// device's stamps, released early by the last block's flag (the default) or at the kernel's end,
// and as plain launches between events; each iteration's kernel phase positive and all of them
// within the iterations' wall time.
template <class T>
void check_launch_ahead() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  const std::vector<LabelShape> shapes = quick() ? std::vector<LabelShape>{{20011, 16, 16}}
                                                 : std::vector<LabelShape>{{20011, 16, 16}, {30011, 2, 16},
                                                                           {10007, 32, 64}};
  each_label_case<T>(shapes, [&](const LabelShape& s, const km::Dataset<T>& data) {
    km::Params base;
    base.k = s.k;
    base.loops = 30;
    base.fused.path = km::FusedConfig::Path::one_pass;
    base.fused.launch_ahead = false;
    const auto probe = km::run(fused, data, base);
    std::vector<km::Params> rules(4, base);
    rules[0].threshold = 0.01;
    if (probe.iterations > 6) rules[1].tol = probe.per_iteration[4].shift;
    rules[2].loops = 3;
    rules[3].threshold = 0.001;  // (the bounds, by default in double and at d <= 8, may start)
    for (std::size_t r = 0; r < rules.size(); ++r) {
      SCOPED_TRACE("rule " + std::to_string(r));
      const auto off = km::run(fused, data, rules[r]);
      // Launched ahead as the defaults have it (programmatic dependent launches released early
      // by the last block's flag, the first pass prefetched, the kernel phase from the device's
      // stamps), then as dependents waiting for the kernel before to end, then with plain
      // launches and events around each kernel.
      for (const int mode : {0, 1, 2}) {
        const bool plain = mode == 2;
        SCOPED_TRACE(mode == 0 ? "dependent launches released early, stamps"
                               : mode == 1 ? "dependent launches, griddepcontrol.wait" : "plain launches, events");
        km::Params ahead = rules[r];
        ahead.fused.launch_ahead = true;
        ahead.fused.dependent_launch = !plain;
        ahead.fused.iteration_events = plain;
        ahead.fused.early_release = mode == 0;
        const auto on = km::run(fused, data, ahead);
        ASSERT_EQ(on.iterations, off.iterations);
        EXPECT_EQ(on.inertia, off.inertia);
        expect_same_fit(on, off);     // labels, centroids, each iteration's changes and re-checks
        expect_same_counts(on, off);  // each iteration's inertia, re-checks and re-scores
        double kernel = 0, total = 0;
        for (int it = 0; it < on.iterations; ++it) {
          SCOPED_TRACE("iteration " + std::to_string(it + 1));
          EXPECT_EQ(on.per_iteration[it].shift, off.per_iteration[it].shift);
          EXPECT_EQ(on.per_iteration[it].skipped, off.per_iteration[it].skipped);
          // Either clock: a positive kernel phase (stamps out of order would wrap to ~1e10 s).
          EXPECT_GT(on.per_iteration[it].kernel, 0.0);
          EXPECT_LT(on.per_iteration[it].kernel, 1.0);
          kernel += on.per_iteration[it].kernel;
          total += on.per_iteration[it].total;
        }
        // The kernel phases tile the device's time from the first kernel's start to the last
        // one's end, within the host's wall time of the iterations (its lag on the last, and the
        // clocks' granularity, allowed).
        EXPECT_LE(kernel, 1.05 * total + 1e-4);
        if (r == 1 && rules[1].tol) {
          EXPECT_LT(on.iterations, base.loops) << "the tol rule stopped the fit";
          EXPECT_GT(on.per_iteration.back().changed, 0) << "objects still moving when it stopped";
        }
        if (r == 2) {
          EXPECT_EQ(on.iterations, 3);
        }
      }
    }
  });
}

TEST(GpuFusedDelta, FloatLaunchAheadAsOneAtATime) { check_launch_ahead<float>(); }
TEST(GpuFusedDelta, DoubleLaunchAheadAsOneAtATime) { check_launch_ahead<double>(); }

TEST(GpuFusedDelta, DoubleStagedAsRegisterLoads) { check_tile<double>(false); }
TEST(GpuFusedDelta, FloatStagedAsRegisterLoads) { check_tile<float>(false); }
TEST(GpuFusedDelta, DoubleStagedMmaAsRegisterLoads) { check_tile<double>(true); }
TEST(GpuFusedDelta, FloatStagedMmaAsRegisterLoads) { check_tile<float>(true); }

// Where the grid cannot be proved (a coordinate without extent; a range too narrow for its
// magnitude) the engine runs the kernel without the table (looked_up absent), with omp's labels;
// also where the table's launch needed more than 48 KB of shared memory (128 x 128 cells, K = 64,
// 256 threads: the fallback must be opted in too).
template <class T>
void check_cells_refused() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  for (int kind = 0; kind < 2; ++kind)
    for (const int k : {16, 64})
      for (const int block : {128, 256}) {
        SCOPED_TRACE(std::string(kind == 0 ? "flat second coordinate" : "narrow range far from the origin") +
                     " k=" + std::to_string(k) + " block=" + std::to_string(block));
        auto data = kmtest::make_data<T>(false, 20011, 2, static_cast<std::size_t>(k), 31);
        for (std::size_t i = 0; i < data.n; ++i) {
          if (kind == 0) data.row(i)[1] = T(0.25);
          else data.row(i)[0] = static_cast<T>(0x1p40 + static_cast<double>(data.row(i)[0]) * 0x1p-12);
        }
        km::Params p;
        p.k = k;
        p.loops = 10;
        p.block = block;
        p.fused.path = km::FusedConfig::Path::one_pass;
        p.fused.bounds_after = 0;
        const auto got = km::run(fused, data, p);
        const auto omp = km::run(km::find_implementation("omp"), data, p);
        EXPECT_EQ(got.path, "one-pass");
        EXPECT_EQ(got.labels, omp.labels);
        EXPECT_EQ(got.centroids, omp.centroids);
        for (const auto& it : got.per_iteration) EXPECT_EQ(it.looked_up, -1) << "the table ran on an unproved grid";
      }
}

TEST(GpuFusedDelta, DoubleCellsRefusedFallBack) { check_cells_refused<double>(); }
TEST(GpuFusedDelta, FloatCellsRefusedFallBack) { check_cells_refused<float>(); }

namespace {

// --list's path for a shape (fused_plan.cpp, the plan the engine takes too) is the path a run of
// that shape reports, on data the staged loads and the cell table take (n % 4 == 0, spread
// points): the lab's variants (cells, d fixed, staged, mma) and K > 64 (nothing but d fixed),
// with and without an override.
template <class T>
void check_list_path() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  for (const char* mma : {"", "0", "1"}) {
    for (const SplitShape& s : std::vector<SplitShape>{{20012, 2, 16}, {20012, 16, 16}, {20012, 32, 16},
                                                       {20012, 32, 64}, {20012, 16, 70}, {20012, 12, 33}}) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " mma=" + mma);
      const auto data = label_data<T>(0, {s.n, s.d, s.k});
      km::Params p;
      p.k = s.k;
      p.loops = 2;
      p.fused.bounds_after = 0;
      if (*mma) p.fused.mma = *mma == '1';
      const auto got = km::run(fused, data, p);
      // (", lean": the cell table's lean passes, which the run takes where its buffers are 16-byte
      // aligned and, in float, the inertia's scale below 2^126, facts of the run `--list` does
      // not know; these runs take them.)
      std::string taken = got.path;
      if (const auto at = taken.find(", lean"); at != std::string::npos) taken.erase(at, 6);
      // (", sorted", the cells' sorted order, likewise: it takes the lean dynamic passes and room
      // for its copies beside the data; ", float copy" too, which starts once few objects move,
      // not within these two iterations.)
      if (const auto at = taken.find(", sorted"); at != std::string::npos) taken.erase(at, 8);
      if (const auto at = taken.find(", float copy"); at != std::string::npos) taken.erase(at, 12);
      const std::string listed = fused.path(static_cast<std::size_t>(s.k), s.d, sizeof(T), p.fused);
      if (sizeof(T) == 8 && s.d == 16 && s.k == 16 && *mma != '1') {
        EXPECT_NE(listed.find(", float copy"), std::string::npos) << listed;
      }
      std::string plan_words = listed;
      if (const auto at = plan_words.find(", float copy"); at != std::string::npos) plan_words.erase(at, 12);
      EXPECT_EQ(taken, plan_words);
      if (s.d == 2) {
        EXPECT_NE(got.path.find("cells, lean"), std::string::npos) << got.path;
      }
      // Without --block the plan's threads per block, reported; with it, --block; the same fit
      // bit for bit either way (fixed-point sums: no order of addition shows).
      const km::gpu::DeltaPlan plan =
          km::gpu::plan_delta({data.n, s.d, static_cast<std::size_t>(s.k), sizeof(T), 1.0, p.block, false,
                               km::gpu_info().shared_optin},
                              p.fused);
      EXPECT_EQ(got.block, plan.block);
      km::Params given = p;
      given.block = 64;
      given.block_given = true;
      const auto at64 = km::run(fused, data, given);
      EXPECT_EQ(at64.block, 64);
      EXPECT_EQ(at64.labels, got.labels);
      EXPECT_EQ(at64.centroids, got.centroids);
      EXPECT_EQ(at64.inertia, got.inertia);
    }
  }
}

}  // namespace

TEST(GpuFusedDelta, DoubleListNamesThePathTaken) { check_list_path<double>(); }
TEST(GpuFusedDelta, FloatListNamesThePathTaken) { check_list_path<float>(); }

namespace {

// Hamerly's bounds in the delta kernel (bounds_after=1: from the first iteration) against the
// same kernel without them (=0): labels, centroids, change counts and shifts bit for bit over 20 iterations (an
// object the bounds keep is one seq keeps), omp's labels, the algebraic inertia within 1e-11
// (1e-6 in float, whose per-object sum adds float distances), and the bounds must keep some
// objects unread once the centroids settle (so a test that never exercised them fails). With
// guard=0 every inertia bound "fails": the host sums the first iteration's inertia from the
// objects and the bounds go off. With bounds_after=0.05 they start mid-fit (the default's path, at 1%): the second
// iteration after the first with at most 5% moved scores every object and rebuilds the q sums.
template <class T>
void check_bounds() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  km::FusedConfig base;
  base.path = km::FusedConfig::Path::one_pass;
  base.ball = false;  // Elkan's test (d <= 2, K > 32) and the bounds exclude each other
  // (and at d = 2 the cells' sorted order, which keeps unread what the bounds would)
  base.sorted = false;
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{30011, 2, 16}, {20011, 16, 16}}
              : std::vector<SplitShape>{{30011, 1, 2},  {30011, 2, 16}, {30011, 2, 64}, {20011, 3, 100},
                                        {20011, 8, 64}, {20011, 16, 16}, {10007, 32, 16}};
  each_one_pass_case<T>(shapes, base, [&](const SplitShape& s, const km::Dataset<T>& data, const km::Params& p) {
    km::Params q = p;
    q.fused.bounds_after = 1.0;  // from the first iteration
    const auto on = km::run(fused, data, q);
    q.fused.guard = 0;
    const auto fallback = km::run(fused, data, q);
    q.fused.guard = p.fused.guard;
    q.fused.bounds_after = 0.05;  // from the second iteration after one with <= 5% moved
    const auto later = km::run(fused, data, q);
    q.fused.bounds_after = 0;
    const auto off = km::run(fused, data, q);
    const auto omp = km::run(km::find_implementation("omp"), data, p);
    EXPECT_EQ(on.centroids, off.centroids);
    EXPECT_EQ(on.labels, off.labels);
    EXPECT_EQ(on.labels, omp.labels);
    EXPECT_EQ(fallback.labels, off.labels);
    EXPECT_EQ(fallback.centroids, off.centroids);
    EXPECT_EQ(later.labels, off.labels);
    EXPECT_EQ(later.centroids, off.centroids);
    ASSERT_EQ(on.iterations, off.iterations);
    ASSERT_EQ(fallback.iterations, off.iterations);
    ASSERT_EQ(later.iterations, off.iterations);
    std::int64_t skipped = 0;
    // Whether `later` has started its bounds (and rebuilt its q sums): from the iteration after
    // the next once an iteration moved at most 5% (decided from the iteration before last, so
    // that the next kernel can be launched ahead: fused.cu, bounds_start).
    bool live = false, live_next = false;
    for (int it = 0; it < on.iterations; ++it) {
      SCOPED_TRACE("iteration " + std::to_string(it + 1));
      EXPECT_EQ(on.per_iteration[it].changed, off.per_iteration[it].changed);
      EXPECT_EQ(on.per_iteration[it].shift, off.per_iteration[it].shift);
      EXPECT_EQ(later.per_iteration[it].changed, off.per_iteration[it].changed);
      EXPECT_EQ(later.per_iteration[it].shift, off.per_iteration[it].shift);
      EXPECT_EQ(later.per_iteration[it].skipped >= 0, live) << "bounds start after <= 5% moved";
      if (live) {
        EXPECT_NEAR(later.per_iteration[it].inertia, off.per_iteration[it].inertia,
                    (sizeof(T) == 4 ? 1e-6 : 1e-11) * off.per_iteration[it].inertia);
      }
      live = live || live_next;
      live_next = live_next || off.per_iteration[it].changed <= static_cast<std::int64_t>(0.05 * static_cast<double>(s.n));
      // The algebraic inertia and the host's sum, both in double, against the per-object sum
      // of distances in T (see GpuSplit).
      const double tol = sizeof(T) == 4 ? 1e-6 : 1e-11;
      EXPECT_NEAR(on.per_iteration[it].inertia, off.per_iteration[it].inertia, tol * off.per_iteration[it].inertia);
      EXPECT_NEAR(fallback.per_iteration[it].inertia, off.per_iteration[it].inertia,
                  tol * off.per_iteration[it].inertia);
      EXPECT_GE(on.per_iteration[it].skipped, 0) << "the bounds kernel reports what it kept";
      EXPECT_LE(on.per_iteration[it].skipped, static_cast<std::int64_t>(s.n) - on.per_iteration[it].changed);
      if (it > 0) {
        EXPECT_EQ(fallback.per_iteration[it].skipped, -1) << "bounds off after the failed guard";
      }
      skipped += std::max<std::int64_t>(on.per_iteration[it].skipped, 0);
    }
    EXPECT_EQ(on.per_iteration.at(0).skipped, 0) << "no bounds yet in the first iteration";
    if (on.iterations >= 5) {
      EXPECT_GT(skipped, 0) << "the bounds never kept an object";
    }
  });
}

}  // namespace

TEST(GpuFusedBounds, DoubleAsWithout) { check_bounds<double>(); }
TEST(GpuFusedBounds, FloatAsWithout) { check_bounds<float>(); }

namespace {

// The inertia's addends from the float scores (margin.hpp: approx_dist_bound; in float with the
// FMA scores at widths 16 and 32) against every addend a distance in T (exact_addends=1), the
// bounds off: labels, centroids, change counts, shifts and re-checks bit for bit (the assignment is
// the same), omp's labels, each iteration's inertia within 2^-15 (the addends' proved bound) plus
// 1e-6 (the per-object sum's own float roundings), and on uniform data some iteration's inertia in
// other bits (so a run that never took an addend from the scores fails). The staged kernels (n % 4
// == 0: d = 16 and 32), register loads (n odd), d = 12 (width 16, d at run time), K = 100 (index not
// packed); d = 8 and double (never) the same bits.
template <class T>
void check_approx_inertia() {
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{20000, 16, 16}, {10007, 32, 16}}
              : std::vector<SplitShape>{{20000, 16, 16}, {20011, 16, 16}, {10000, 32, 16},
                                        {20011, 8, 16},  {20011, 12, 5},  {10007, 16, 100}};
  // (exact_addends=0: the default)
  check_variant_against_off<T>(
      "exact_addends", shapes, {"0"},
      [](const SplitShape& s, const auto& from_scores, const auto& exact, bool uniform, const std::string&) {
        expect_same_fit(from_scores, exact);  // (the re-checks too)
        bool differs = false;
        for (int it = 0; it < exact.iterations; ++it) {
          SCOPED_TRACE("iteration " + std::to_string(it + 1));
          const double a = from_scores.per_iteration[it].inertia, b = exact.per_iteration[it].inertia;
          EXPECT_NEAR(a, b, (0x1p-15 + 1e-6) * b);
          differs = differs || a != b;
        }
        if (sizeof(T) == 8 || s.d <= 8) {
          EXPECT_FALSE(differs) << "no addend from the scores in double or at width 8";
        } else if (uniform) {
          EXPECT_TRUE(differs) << "every iteration's inertia in the exact addends' bits: none came from the scores";
        }
      },
      "1");
}

}  // namespace

TEST(GpuFusedDelta, FloatInertiaFromScoresAsExact) { check_approx_inertia<float>(); }
TEST(GpuFusedDelta, DoubleInertiaFromScoresAsExact) { check_approx_inertia<double>(); }

namespace {

// The staged kernel in double from the float copy of x - z (float_copy=1, the default
// where it fits) against the same kernel reading x (=0), the bounds off: labels (omp's too),
// centroids, change counts and shifts bit for bit over 20 iterations; each iteration's inertia
// (the clusters' algebraic sum in double against the objects' sum) within 1e-11, the final one
// (the final E-step reads x either way) the same bits, and a second run the same bits throughout;
// the report names the copy where it ran and not where it did not. With guard=0 every
// algebraic inertia "fails": the copy's first iteration's is summed from the objects by the host
// (within 1e-11: another order of addition) and the kernel reads x from the next on, the same fit.
// The copy written by the second iteration and read from the third (float_copy_after=1;
// by default written by the third and read once the iteration before last moved at most 25%, as
// the uniform data's repeat takes it): a wrong value in it would move the float filter's calls, a wrong Q the inertia. d = 16, K 9-16 (the staged
// kernel), on uniform, blob and quantised (tie-heavy) data; the close calls and the movers read x's
// own rows.
void check_shadow() {
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{20000, 16, 16}, {20004, 16, 12}}
              : std::vector<SplitShape>{{20000, 16, 16}, {20004, 16, 12}, {20000, 16, 9}, {40000, 16, 16}};
  check_variant_against_off<double>(
      "float_copy", shapes, {"1"},
      [](const SplitShape& s, const auto& on, const auto& off, bool uniform, const std::string&) {
        EXPECT_NE(on.path.find("staged, float copy"), std::string::npos) << on.path;
        EXPECT_EQ(off.path.find("float copy"), std::string::npos) << off.path;
        EXPECT_EQ(on.inertia, off.inertia) << "the final E-step reads x in both";
        if (!uniform) return;  // (the repeat and the guard's fallback on the uniform data)
        const km::Implementation& fused = km::find_implementation("fused");
        km::Params p;
        p.k = s.k;
        p.loops = 20;
        km::apply_fused_config(p.fused, "path=one-pass,bounds_after=0,float_copy=1,float_copy_after=0.25");
        const auto data = label_data<double>(0, {s.n, s.d, s.k});
        const auto first = km::run(fused, data, p), again = km::run(fused, data, p);
        {
          // By default (float_copy_after not given) written by the third iteration where 3
          // iterations are left after it, and read once the iteration before last moved <= 25%:
          // in a fit of 12 iterations, not in one of 5.
          km::Params longer = p, shorter = p;
          longer.fused.float_copy_after.reset();
          shorter.fused.float_copy_after.reset();
          longer.loops = 12;
          shorter.loops = 5;
          const auto in_long = km::run(fused, data, longer), in_short = km::run(fused, data, shorter);
          EXPECT_NE(in_long.path.find("float copy"), std::string::npos) << in_long.path;
          EXPECT_EQ(in_short.path.find("float copy"), std::string::npos) << in_short.path;
        }
        p.fused.guard = 0;
        const auto fallback = km::run(fused, data, p);
        p.fused.float_copy = false;
        const auto base = km::run(fused, data, p);
        expect_same_fit(first, again);
        expect_same_fit(fallback, base, false);  // (the copy's close calls are its own: centred at z)
        ASSERT_EQ(first.iterations, base.iterations);
        EXPECT_NE(fallback.path.find("float copy"), std::string::npos) << "the copy ran its first iteration";
        for (int it = 0; it < first.iterations; ++it) {
          SCOPED_TRACE("iteration " + std::to_string(it + 1));
          EXPECT_EQ(first.per_iteration[it].inertia, again.per_iteration[it].inertia) << "bit-reproducible";
          EXPECT_NEAR(fallback.per_iteration[it].inertia, base.per_iteration[it].inertia,
                      1e-11 * base.per_iteration[it].inertia);
        }
      },
      "0", "float_copy_after=1");
}

// With the copy live when Hamerly's bounds start (bounds_after=0.05: from the second
// iteration after one where at most 5% moved), the bounds' kernel (reading x, its own q sums and
// z) takes over: the same fit as neither, bit for bit, the inertia within 1e-11.
void check_shadow_then_bounds() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  km::FusedConfig one_pass;
  one_pass.path = km::FusedConfig::Path::one_pass;
  each_one_pass_case<double>({{20000, 16, 16}}, one_pass, [&](const SplitShape&, const km::Dataset<double>& data,
                                                              const km::Params& p) {
    km::Params q = p;
    km::apply_fused_config(q.fused, "bounds_after=0.05,float_copy=1,float_copy_after=1");
    const auto both = km::run(fused, data, q);
    km::apply_fused_config(q.fused, "bounds_after=0,float_copy=0");
    const auto neither = km::run(fused, data, q);
    EXPECT_NE(both.path.find("float copy"), std::string::npos) << both.path;
    EXPECT_EQ(both.labels, neither.labels);
    EXPECT_EQ(both.centroids, neither.centroids);
    ASSERT_EQ(both.iterations, neither.iterations);
    bool bounded = false;
    for (int it = 0; it < both.iterations; ++it) {
      SCOPED_TRACE("iteration " + std::to_string(it + 1));
      EXPECT_EQ(both.per_iteration[it].changed, neither.per_iteration[it].changed);
      EXPECT_EQ(both.per_iteration[it].shift, neither.per_iteration[it].shift);
      EXPECT_NEAR(both.per_iteration[it].inertia, neither.per_iteration[it].inertia,
                  1e-11 * neither.per_iteration[it].inertia);
      bounded = bounded || both.per_iteration[it].skipped >= 0;
    }
    EXPECT_TRUE(bounded) << "the bounds never started";
  });
}

// The float copy's kernel with its movers' and close calls' rows from the kept row-major upload
// (the default) against the same rows read from x [d][n] (copy_rows=0): the same values,
// so the same fit bit for bit, the iteration's inertia included, on uniform, clustered and
// quantised data. The reports must name the rows, and only where they were read.
void check_shadow_rows() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  km::FusedConfig copy;
  km::apply_fused_config(copy, "path=one-pass,bounds_after=0,float_copy=1,float_copy_after=1");
  each_one_pass_case<double>({{20000, 16, 16}, {20004, 16, 12}}, copy,
                             [&](const SplitShape&, const km::Dataset<double>& data, const km::Params& p) {
    km::Params q = p;
    q.fused.copy_rows = true;
    const auto with = km::run(fused, data, q);
    q.fused.copy_rows = false;
    const auto without = km::run(fused, data, q);
    EXPECT_NE(with.path.find("float copy, x rows"), std::string::npos) << with.path;
    EXPECT_NE(without.path.find("float copy"), std::string::npos) << without.path;
    EXPECT_EQ(without.path.find("x rows"), std::string::npos) << without.path;
    expect_same_fit(with, without);
    EXPECT_EQ(with.inertia, without.inertia);
    std::int64_t moved = 0;
    for (int it = 0; it < with.iterations && it < without.iterations; ++it) {
      SCOPED_TRACE("iteration " + std::to_string(it + 1));
      EXPECT_EQ(with.per_iteration[it].inertia, without.per_iteration[it].inertia);
      EXPECT_EQ(with.per_iteration[it].shift, without.per_iteration[it].shift);
      if (it >= 2) moved += with.per_iteration[it].changed;
    }
    EXPECT_GT(moved, 0) << "no mover while the copy ran: the rows were never read";
  });
}

}  // namespace

TEST(GpuFusedDelta, DoubleFloatCopyAsX) { check_shadow(); }
TEST(GpuFusedDelta, DoubleFloatCopyThenBounds) { check_shadow_then_bounds(); }
TEST(GpuFusedDelta, DoubleFloatCopyRowsAsX) { check_shadow_rows(); }

namespace {

// The tensor path's movers scheme (movers_after=1: from the second iteration, the
// kept sums and only the movers through them) against every object summed afresh (=0):
// labels, centroids, change counts and shifts bit for bit (integer sums), and omp's labels;
// the iteration's inertia (the clusters' algebraic sum against the per-object sum, both in
// double) within 1e-11. `summed` says which scheme ran: every object, or the movers only, and
// the movers must be fewer than the objects somewhere (else the test exercised nothing).
// With guard=0 the second iteration's bound "fails": the host sums that inertia
// from the objects, and every later iteration sums every object. The default (0.2) starts
// mid-fit. Shapes: mma.sync's short slices (d = 16), wgmma's range on Hopper (d = 64; double:
// TF32 candidates), d not a multiple of 4 with K past a tile, and d past a warp (d = 100).
template <class T>
void check_tensor_movers() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  km::FusedConfig tensor;
  tensor.path = km::FusedConfig::Path::tensor;
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{4001, 16, 16}, {3001, 64, 100}}
              : std::vector<SplitShape>{{4001, 16, 16}, {3001, 64, 100}, {2003, 33, 300}, {3001, 100, 20}};
  each_one_pass_case<T>(shapes, tensor, [&](const SplitShape& s, const km::Dataset<T>& data, const km::Params& p) {
    km::Params q = p;
    q.fused.movers_after = 1.0;  // from the second iteration
    const auto on = km::run(fused, data, q);
    q.fused.guard = 0;
    const auto fallback = km::run(fused, data, q);
    q.fused.guard = p.fused.guard;
    q.fused.movers_after = 0;  // never
    const auto off = km::run(fused, data, q);
    const auto by_default = km::run(fused, data, p);
    const auto omp = km::run(km::find_implementation("omp"), data, p);
    const auto n = static_cast<std::int64_t>(s.n);
    for (const auto* r : {&on, &fallback, &by_default}) {
      EXPECT_EQ(r->centroids, off.centroids);
      EXPECT_EQ(r->labels, off.labels);
      ASSERT_EQ(r->iterations, off.iterations);
    }
    EXPECT_EQ(off.labels, omp.labels);
    bool fewer = false;
    for (int it = 0; it < off.iterations; ++it) {
      SCOPED_TRACE("iteration " + std::to_string(it + 1));
      const double tol = 1e-11 * off.per_iteration[it].inertia;
      for (const auto* r : {&on, &fallback, &by_default}) {
        EXPECT_EQ(r->per_iteration[it].changed, off.per_iteration[it].changed);
        EXPECT_EQ(r->per_iteration[it].shift, off.per_iteration[it].shift);
        EXPECT_NEAR(r->per_iteration[it].inertia, off.per_iteration[it].inertia, tol);
      }
      EXPECT_EQ(off.per_iteration[it].summed, n) << "every object summed";
      EXPECT_EQ(on.per_iteration[it].summed, it == 0 ? n : on.per_iteration[it].changed);
      EXPECT_EQ(fallback.per_iteration[it].summed, it == 1 ? fallback.per_iteration[it].changed : n)
          << "after the failed guard every object is summed";
      const std::int64_t got = by_default.per_iteration[it].summed;
      EXPECT_TRUE(got == n || got == by_default.per_iteration[it].changed) << got;
      fewer = fewer || on.per_iteration[it].summed < n;
    }
    EXPECT_TRUE(fewer) << "the movers never went alone";
  });
}

}  // namespace

TEST(GpuTensorMovers, DoubleAsAfresh) { check_tensor_movers<double>(); }
TEST(GpuTensorMovers, FloatAsAfresh) { check_tensor_movers<float>(); }

// ------------------------------------------------------------ out of core

namespace {

// Streamed (rows from pinned host memory in chunks, the sums carried across chunks) against
// in memory: the same bits, for fused's two paths, offload-block and offload, in chunks of
// 4,096 rows and of an odd 5,003 (Params::stream_rows), on random, clustered and quantised data.
template <class T>
void check_streamed(const char* name) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& impl = km::find_implementation(name);
  for (const SplitShape& s : {SplitShape{20011, 2, 16}, SplitShape{20011, 16, 16}, SplitShape{15013, 64, 100}}) {
    if (!km::supports(impl, static_cast<std::size_t>(s.k), s.d, sizeof(T)).ok) continue;
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data " + std::to_string(kind));
      const auto data = label_data<T>(kind, {s.n, s.d, s.k});
      km::Params p;
      p.k = s.k;
      p.loops = 5;
      p.init = km::Init::kmeanspp;
      const auto in_memory = km::run(impl, data, p);
      for (const std::size_t rows : {4096, 5003}) {
        km::Params chunked = p;
        chunked.stream_rows = rows;
        const auto streamed = km::run(impl, data, chunked);
        EXPECT_NE(streamed.path.find("streamed"), std::string::npos) << streamed.path;
        EXPECT_EQ(streamed.centroids, in_memory.centroids) << "chunks of " << rows;
        EXPECT_EQ(streamed.labels, in_memory.labels);
        EXPECT_EQ(streamed.inertia, in_memory.inertia);
        ASSERT_EQ(streamed.iterations, in_memory.iterations);
        for (int it = 0; it < in_memory.iterations; ++it) {
          EXPECT_EQ(streamed.per_iteration[it].changed, in_memory.per_iteration[it].changed);
          // In memory, fused takes Hamerly's bounds: the algebraic inertia (see GpuSplit).
          EXPECT_NEAR(streamed.per_iteration[it].inertia, in_memory.per_iteration[it].inertia,
                      (sizeof(T) == 4 ? 1e-6 : 1e-11) * in_memory.per_iteration[it].inertia);
          EXPECT_GT(streamed.per_iteration[it].h2d, 0) << "the copies are the h2d phase";
        }
      }
    }
  }
}

}  // namespace

TEST(GpuStreamed, FusedDouble) { check_streamed<double>("fused"); }
TEST(GpuStreamed, FusedFloat) { check_streamed<float>("fused"); }
TEST(GpuStreamed, OffloadBlockDouble) { check_streamed<double>("offload-block"); }
TEST(GpuStreamed, OffloadFloat) { check_streamed<float>("offload"); }

// --device-memory below the data's size streams it (and says so); below what one chunk needs,
// one clear error.
TEST(GpuStreamed, DeviceMemoryCapStreamsOrRefuses) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const auto data = km::generate_uniform<float>(500000, 32, 5);  // 64 MB
  km::Params p;
  p.k = 64;
  p.loops = 3;
  const auto in_memory = km::run(km::find_implementation("fused"), data, p);
  p.device_memory = 40ull << 20;
  const auto capped = km::run(km::find_implementation("fused"), data, p);
  EXPECT_NE(capped.path.find("streamed"), std::string::npos) << capped.path;
  EXPECT_EQ(capped.centroids, in_memory.centroids);
  EXPECT_EQ(capped.labels, in_memory.labels);
  p.device_memory = 4ull << 20;
  try {
    km::run(km::find_implementation("fused"), data, p);
    ADD_FAILURE() << "4 MiB streamed 64 MB";
  } catch (const km::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot stream"), std::string::npos) << e.what();
  }
}

namespace {

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

}  // namespace

TEST(GpuRangeCheck, FusedDouble) { check_device_range<double>("fused"); }
TEST(GpuRangeCheck, FusedFloat) { check_device_range<float>("fused"); }
TEST(GpuRangeCheck, OffloadDouble) { check_device_range<double>("offload"); }
TEST(GpuRangeCheck, OffloadBlockFloat) { check_device_range<float>("offload-block"); }
