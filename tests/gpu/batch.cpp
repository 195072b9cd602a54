// Batches on the GPU (kmeans/batch.hpp): fused runs a batch's iterations together, each one CUDA
// graph of every problem still running, and each problem's result equals its separate fit bit for
// bit: centroids, labels, inertia, iterations, whether it converged, and every iteration's change
// count and shift. The problems differ in their data, so they stop at different iterations (a
// graph without the stopped ones). Both precisions, the three metrics, the four data kinds of the
// metric tests, the shapes of each of fused's paths for a separate fit, and every initialisation.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "fit_checks.hpp"
#include "kmeans/batch.hpp"
#include "kmeans/registry.hpp"
#include "metric_data.hpp"

namespace {

using namespace kmtest;

// B problems of n rows each, problem b from its own seed, one after another.
template <class T>
km::Dataset<T> batch_data(int kind, std::size_t batch, const SplitShape& s) {
  km::Dataset<T> all(batch * s.n, s.d, "batch");
  for (std::size_t b = 0; b < batch; ++b) {
    const auto one = metric_data<T>(kind, s.n, s.d, static_cast<std::size_t>(s.k), 40 + b);
    std::copy(one.values.data(), one.values.data() + s.n * s.d, all.row(b * s.n));
  }
  return all;
}

template <class T>
km::Dataset<T> problem(const km::Dataset<T>& all, std::size_t b, std::size_t n) {
  km::Dataset<T> one;
  one.n = n;
  one.d = all.d;
  one.values = km::HostBuffer<T>::borrow(all.row(b * n), n * all.d);
  return one;
}

// The batch of `ran` (all's rows, on the host or the device) against the separate fits of all's
// problems. same_schemes: each iteration also summed the same objects (fused's movers' scheme
// switched at the same iterations), as where the batch's switches cannot be put off.
template <class T>
void expect_separate_fits(const km::Dataset<T>& all, std::size_t batch, const std::vector<km::Params>& params,
                          const km::Dataset<T>* ran = nullptr, bool same_schemes = false) {
  const km::Implementation& fused = km::find_implementation("fused");
  const km::BatchResult<T> got = km::run_batch(fused, ran ? *ran : all, batch, params);
  EXPECT_TRUE(got.together);
  ASSERT_EQ(got.problems.size(), batch);
  const std::size_t n = all.n / batch;
  std::size_t longest = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    SCOPED_TRACE("problem " + std::to_string(b));
    const km::Result<T> want = km::run(fused, problem(all, b, n), params[b]);
    const km::Result<T>& r = got.problems[b];
    EXPECT_EQ(r.iterations, want.iterations);
    EXPECT_EQ(r.converged, want.converged);
    EXPECT_EQ(r.inertia, want.inertia);
    EXPECT_EQ(r.labels, want.labels);
    EXPECT_EQ(r.centroids, want.centroids);
    ASSERT_EQ(r.per_iteration.size(), want.per_iteration.size());
    for (std::size_t i = 0; i < r.per_iteration.size(); ++i) {
      EXPECT_EQ(r.per_iteration[i].changed, want.per_iteration[i].changed) << "iteration " << i + 1;
      EXPECT_EQ(r.per_iteration[i].shift, want.per_iteration[i].shift) << "iteration " << i + 1;
      if (same_schemes) {
        EXPECT_EQ(r.per_iteration[i].summed, want.per_iteration[i].summed) << "iteration " << i + 1;
        EXPECT_EQ(r.per_iteration[i].inertia, want.per_iteration[i].inertia) << "iteration " << i + 1;
      }
    }
    longest = std::max<std::size_t>(longest, static_cast<std::size_t>(r.iterations));
  }
  EXPECT_EQ(got.iteration_seconds.size(), longest);
}

// fused's one-pass shapes (d = 2, 16, K small), the tensor path's mma.sync (d = 16, 200) and wgmma
// (d = 128) shapes, K up to 300.
const std::vector<SplitShape> kBatchShapes = {{3001, 2, 16}, {2003, 16, 16}, {1501, 128, 100}, {1200, 200, 40},
                                              {4000, 128, 300}};

// on_device: the batch read from a device copy of its rows (as batch_kmeans reads a CUDA array).
template <class T>
void check_batches(km::Metric metric, bool from_device = false) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const SplitShape& s : kBatchShapes)
    for (int kind = 0; kind < 4; ++kind) {
      const std::size_t batch = 4;
      const auto all = batch_data<T>(kind, batch, s);
      km::cuda::DeviceBuffer<T> held;
      const km::Dataset<T> device = from_device ? on_device(all, held) : km::Dataset<T>();
      for (km::Init init : {km::Init::first, km::Init::kmeanspp, km::Init::random}) {
        SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " " + metric_data_name(kind) +
                     " init " + std::to_string(static_cast<int>(init)));
        km::Params p;
        p.k = s.k;
        p.loops = 25;
        p.init = init;
        p.seed = 9;
        p.metric = metric;
        if (kind == 1) p.tol = 1e-6;  // blobs: the shift rule stops them too
        expect_separate_fits(all, batch, std::vector<km::Params>(batch, p), from_device ? &device : nullptr);
      }
    }
}

TEST(GpuBatch, EqualsSeparateFitsFloat) { check_batches<float>(km::Metric::euclidean); }
TEST(GpuBatch, EqualsSeparateFitsDouble) { check_batches<double>(km::Metric::euclidean); }
TEST(GpuBatch, CosineEqualsSeparateFits) { check_batches<float>(km::Metric::cosine); }
TEST(GpuBatch, DotEqualsSeparateFits) { check_batches<double>(km::Metric::dot); }
TEST(GpuBatch, FromDeviceEqualsSeparateFits) {
  check_batches<float>(km::Metric::euclidean, true);
  check_batches<float>(km::Metric::cosine, true);
  check_batches<double>(km::Metric::dot, true);
}

// fused's movers' scheme inside a batch's graph (Requeue): problems 0-2 take it from the second
// iteration (movers_after = 1), problem 2 with guard 0, so that its algebraic inertia "fails" there
// and it sums every object from then on (a capture the batch cannot put off); problem 3 never
// takes it. With four problems one asking is a quarter, so the batch switches when the separate
// fits do: each iteration sums the same objects and has the same inertia as the separate fit's,
// and problem 0's movers went alone. Then five problems, one asking: its switch is put off.
template <class T>
void check_batch_movers() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const SplitShape& s : {SplitShape{3001, 64, 100}, SplitShape{2003, 128, 40}})
    for (int kind : {0, 2, 3}) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " " + metric_data_name(kind));
      const std::size_t batch = 4;
      const auto all = batch_data<T>(kind, batch, s);
      std::vector<km::Params> params(batch);
      for (std::size_t b = 0; b < batch; ++b) {
        params[b].k = s.k;
        params[b].loops = 25;
        params[b].fused.movers_after = b == 3 ? 0.0 : 1.0;
        if (b == 2) params[b].fused.guard = 0;
      }
      expect_separate_fits<T>(all, batch, params, nullptr, true);
      const km::BatchResult<T> got = km::run_batch(km::find_implementation("fused"), all, batch, params);
      ASSERT_EQ(got.problems.size(), batch);
      bool fewer = false;
      for (const auto& it : got.problems[0].per_iteration) fewer = fewer || it.summed < static_cast<std::int64_t>(s.n);
      EXPECT_TRUE(fewer) << "problem 0's movers never went alone";
      for (const auto& it : got.problems[3].per_iteration) EXPECT_EQ(it.summed, static_cast<std::int64_t>(s.n));
      // Five problems, one asking: its switch is put off (1 of 5 is under a quarter) until a
      // problem stops; the results are its separate fit's all the same.
      const auto five = batch_data<T>(kind, 5, s);
      std::vector<km::Params> one_asks(5, params[3]);
      one_asks[0] = params[0];
      expect_separate_fits<T>(five, 5, one_asks);
    }
}

TEST(GpuBatch, MoversSchemeFloat) { check_batch_movers<float>(); }
TEST(GpuBatch, MoversSchemeDouble) { check_batch_movers<double>(); }

// Given initial centroids, different for each problem, and a problem that stops at the second
// iteration (nothing moves: its objects are its 8 centroids repeated) beside ones that run on.
TEST(GpuBatch, GivenCentroidsAndEarlyStops) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const SplitShape s{2048, 64, 8};
  const std::size_t batch = 5;
  auto all = batch_data<float>(1, batch, s);
  // problem 2: 8 points repeated, K = 8 at them: nothing moves after the first iteration
  for (std::size_t i = 0; i < s.n; ++i)
    std::copy(all.row(2 * s.n + i % 8), all.row(2 * s.n + i % 8) + s.d, all.row(2 * s.n + i));
  std::vector<km::Params> params;
  for (std::size_t b = 0; b < batch; ++b) {
    km::Params p;
    p.k = s.k;
    p.loops = 40;
    p.init = km::Init::given;
    p.given_d = s.d;
    const std::size_t first = b == 2 ? 0 : 3 * b + 1;  // problem 2 starts at its 8 distinct points
    p.given_centroids.assign(all.row(b * s.n + first), all.row(b * s.n + first) + s.k * s.d);
    params.push_back(p);
  }
  expect_separate_fits(all, batch, params);
}

}  // namespace
