// The C++ library (include/kmeans_gpu/kmeans.hpp) with x in GPU memory (Memory::device): fit,
// batch_fit and predict of a cudaMalloc'd copy give the host data's results bit for bit, in both
// precisions and the three metrics; the library's own refusals (host memory handed over as device
// memory, sample weights, a CPU implementation) are InvalidInput with one line. Against the shipped
// shared library, not the core. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <kmeans_gpu/kmeans.hpp>

#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "fit_checks.hpp"
#include "metric_data.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;
using kmeans_gpu::Memory;

template <class T>
void expect_same(const kmeans_gpu::Result<T>& got, const kmeans_gpu::Result<T>& want) {
  EXPECT_EQ(got.n_iter, want.n_iter);
  EXPECT_EQ(got.converged, want.converged);
  EXPECT_EQ(got.inertia, want.inertia);
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_EQ(got.centroids, want.centroids);
  EXPECT_EQ(got.implementation, want.implementation);
}

template <class T>
void check_api(const std::string& metric) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const std::size_t batch = 3, n = 4001, d = 24;
  const int k = 20;
  km::Dataset<T> all(batch * n, d, "batch");
  for (std::size_t b = 0; b < batch; ++b) {
    const auto one = metric_data<T>(static_cast<int>(b) + 1, n, d, k, 60 + b);
    std::copy(one.values.data(), one.values.data() + n * d, all.row(b * n));
  }
  km::cuda::DeviceBuffer<T> held;
  const T* on_gpu = on_device(all, held).device_values;
  kmeans_gpu::Params p;
  p.n_clusters = k;
  p.max_iter = 20;
  p.seed = 3;
  p.metric = metric;
  for (const char* init : {"kmeans++", "first"}) {
    SCOPED_TRACE(metric + " " + init);
    p.init = init;
    p.memory = Memory::host;
    const auto want = kmeans_gpu::fit(all.values.data(), n, d, p);
    const auto want_batch = kmeans_gpu::batch_fit(all.values.data(), batch, n, d, p);
    p.memory = Memory::device;
    expect_same(kmeans_gpu::fit(on_gpu, n, d, p), want);
    const auto got_batch = kmeans_gpu::batch_fit(on_gpu, batch, n, d, p);
    ASSERT_EQ(got_batch.size(), batch);
    for (std::size_t b = 0; b < batch; ++b) expect_same(got_batch[b], want_batch[b]);
    const auto labels = kmeans_gpu::predict(on_gpu + n * d, n, d, want.centroids.data(), k, "", metric,
                                            Memory::device);
    EXPECT_EQ(labels, kmeans_gpu::predict(all.values.data() + n * d, n, d, want.centroids.data(), k, "", metric));
  }
}

TEST(GpuApiDevice, Float) { check_api<float>("euclidean"); }
TEST(GpuApiDevice, Double) { check_api<double>("euclidean"); }
TEST(GpuApiDevice, CosineFloat) { check_api<float>("cosine"); }
TEST(GpuApiDevice, DotDouble) { check_api<double>("dot"); }

TEST(GpuApiDevice, Refusals) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const std::vector<float> host(400 * 4, 1.0f);
  km::cuda::DeviceBuffer<float> held(host.size());
  kmeans_gpu::Params p;
  p.n_clusters = 3;
  p.memory = Memory::device;
  using Invalid = kmeans_gpu::InvalidInput;
  expect_error<Invalid>([&] { kmeans_gpu::fit(host.data(), 400, 4, p); }, "x in GPU memory: its address is not CUDA");
  expect_error<Invalid>([&] { kmeans_gpu::fit(static_cast<const float*>(nullptr), 400, 4, p); }, "a null pointer");
  expect_error<Invalid>([&] { kmeans_gpu::fit(held.get(), 400, 4, p, host.data()); }, "sample weights");
  p.implementation = "seq";
  expect_error<Invalid>([&] { kmeans_gpu::fit(held.get(), 400, 4, p); }, "--impl=seq cannot read data on the GPU");
  expect_error<Invalid>(
      [&] { kmeans_gpu::predict(host.data(), 400, 4, host.data(), 3, "", "euclidean", Memory::device); },
      "not CUDA device memory");
}

}  // namespace
