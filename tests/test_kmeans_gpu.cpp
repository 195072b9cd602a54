// Every GPU implementation of the registry against seq, over a table of shapes, both
// precisions, several block sizes, uniform and blob data. Skipped (with the reason)
// where no GPU is usable, as in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>

#include "common/errors.hpp"
#include "device/device.hpp"
#include "io/generate.hpp"
#include "kmeans/registry.hpp"

namespace {

std::vector<std::string> gpu_implementations() {
  std::vector<std::string> names;
  for (const auto& impl : km::implementations())
    if (impl.needs_gpu) names.push_back(impl.name);
  return names;
}

struct Shape {
  std::size_t d;
  int k;
};

const std::vector<Shape> kShapes = {{1, 1},   {2, 2},    {3, 16},  {16, 16}, {33, 16},  {128, 16},
                                    {1, 257}, {16, 257}, {33, 2},  {128, 257}, {64, 2000}};
// KMEANS_TEST_QUICK=1 (for the sanitizers, which slow kernels down a hundredfold): a few
// shapes that still reach every kernel path, one block size.
const std::vector<Shape> kQuickShapes = {{3, 16}, {33, 2}, {16, 257}, {64, 2000}};

bool quick() {
  const char* v = std::getenv("KMEANS_TEST_QUICK");
  return v && std::string(v) == "1";
}

template <class T>
km::Dataset<T> make_data(bool blobs, std::size_t n, std::size_t d, int k) {
  if (!blobs) return km::generate_uniform<T>(n, d, 17);
  km::BlobOptions o;
  o.n = n;
  o.d = d;
  o.k = static_cast<std::size_t>(k);
  o.seed = 17;
  return std::move(km::generate_blobs<T>(o).data);
}

template <class T>
double dist2(const T* x, const T* c, std::size_t d) {
  double s = 0;
  for (std::size_t j = 0; j < d; ++j) s += (double(x[j]) - double(c[j])) * (double(x[j]) - double(c[j]));
  return s;
}

// True when the implementation must refuse this shape (its shared memory cannot hold it).
bool must_refuse(const std::string& impl, std::size_t d, int k, std::size_t elem) {
  const std::size_t kd = d * static_cast<std::size_t>(k);
  const std::size_t limit = 227 * 1024;  // sm_90's opt-in limit; the engines query the device
  if (impl == "shared" || impl == "offload") return kd * elem > limit;
  if (impl == "offload-block") return kd * (elem + 8) + (static_cast<std::size_t>(k) + 1) * 4 > limit;
  return false;
}

template <class T>
void check_against_seq(const std::string& impl_name) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& impl = km::find_implementation(impl_name);
  const km::Implementation& seq = km::find_implementation("seq");
  const bool is_float = std::is_same_v<T, float>;
  // Double: both sides compute the same sums of squares in double (the GPU with fused
  // multiply-adds), so centroids agree to ~1e-15 and the inertia to far better than 1e-9;
  // a label may differ only at a near-tie. Float: rounding differs by ~1e-7 per
  // distance and a near-tie flip can move a centroid, hence 1e-4 on the inertia.
  const double tol = is_float ? 1e-4 : 1e-9;
  const std::size_t n = 3001;  // not a multiple of any block size
  for (bool blobs : {false, true}) {
    for (const Shape& s : quick() ? kQuickShapes : kShapes) {
      km::Params p;
      p.k = s.k;
      p.loops = 5;
      auto data = make_data<T>(blobs, n, s.d, s.k);
      auto ref = km::run(seq, data, p);
      for (int block : quick() ? std::vector<int>{128} : std::vector<int>{32, 128, 1024}) {
        SCOPED_TRACE(impl_name + " d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) +
                     " block=" + std::to_string(block) + (blobs ? " blobs" : " uniform"));
        p.block = block;
        if (must_refuse(impl_name, s.d, s.k, sizeof(T))) {
          try {
            km::run(impl, data, p);
            ADD_FAILURE() << "accepted a shape beyond shared memory";
          } catch (const km::UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("fused"), std::string::npos) << e.what();
          }
          continue;
        }
        auto got = km::run(impl, data, p);
        ASSERT_EQ(got.labels.size(), n);
        EXPECT_EQ(got.iterations, ref.iterations);
        EXPECT_EQ(got.per_iteration.at(0).changed, static_cast<std::int64_t>(n));
        EXPECT_NEAR(got.inertia, ref.inertia, tol * ref.inertia);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < n; ++i) {
          if (got.labels[i] == ref.labels[i]) continue;
          ++differ;
          if (!is_float) {
            const double a = dist2(data.row(i), &ref.centroids[ref.labels[i] * s.d], s.d);
            const double b = dist2(data.row(i), &ref.centroids[got.labels[i] * s.d], s.d);
            EXPECT_NEAR(a, b, 1e-9 * a + 1e-300) << "object " << i << " moved without a near-tie";
          }
        }
        EXPECT_LE(differ, is_float ? n / 100 : n / 1000);
        for (std::size_t i = 0; i < ref.centroids.size(); ++i)
          ASSERT_NEAR(got.centroids[i], ref.centroids[i], (is_float ? 1e-3 : 1e-9) * (1 + std::abs(ref.centroids[i])))
              << "centroid value " << i;
      }
    }
  }
}

template <class T>
void check_empty_cluster(const std::string& impl_name) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  // Objects 0 and 1 are equal, so centroids 0 and 1 start equal; every tie goes to the
  // lowest index and cluster 1 is empty in the first iteration: it must keep its centroid.
  auto data = km::generate_uniform<T>(1000, 4, 5);
  std::copy(data.row(0), data.row(0) + 4, data.row(1));
  km::Params p;
  p.k = 6;
  p.loops = 1;
  auto ref = km::run(km::find_implementation("seq"), data, p);
  auto got = km::run(km::find_implementation(impl_name), data, p);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(got.centroids[4 + j], data.row(1)[j]) << "empty cluster moved";
  for (std::size_t i = 0; i < ref.centroids.size(); ++i)
    EXPECT_NEAR(got.centroids[i], ref.centroids[i], 1e-5 * (1 + std::abs(ref.centroids[i])));
}

class GpuMatchesSeq : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuMatchesSeq, Double) { check_against_seq<double>(GetParam()); }
TEST_P(GpuMatchesSeq, Float) { check_against_seq<float>(GetParam()); }
TEST_P(GpuMatchesSeq, EmptyClusterDouble) { check_empty_cluster<double>(GetParam()); }
TEST_P(GpuMatchesSeq, EmptyClusterFloat) { check_empty_cluster<float>(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Registry, GpuMatchesSeq, ::testing::ValuesIn(gpu_implementations()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
