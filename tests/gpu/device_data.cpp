// Data already on the GPU (Dataset::device_values, as a CuPy array or a PyTorch CUDA tensor is
// handed over): the fit of the device copy equals the fit of the host data bit for bit (centroids,
// labels, inertia, iterations) on every rung that takes it (offload, offload-block, fused: its cell,
// one-pass and tensor paths), both precisions, every initialisation it takes, the three metrics;
// predict too; the host's copy is never read (freed before the fit); the device rows, read in
// place where aligned as cudaMalloc's and copied where not, are left unchanged, and a fit holds
// no copy of aligned rows. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "fit_checks.hpp"
#include "kmeans/registry.hpp"
#include "metric_data.hpp"

namespace {

using namespace kmtest;

const std::vector<SplitShape> kDeviceShapes = {{5003, 2, 16}, {4001, 16, 16}, {3001, 64, 100}, {2003, 128, 1000}};

template <class T>
void check_device(const km::Implementation& impl, km::Metric metric = km::Metric::euclidean,
                  const std::vector<km::Init>& inits = {km::Init::first, km::Init::random, km::Init::kmeanspp}) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const SplitShape& s : kDeviceShapes) {
    if (!km::supports(impl, static_cast<std::size_t>(s.k), s.d, sizeof(T)).ok) continue;
    for (int kind = 0; kind < 4; ++kind) {
      auto host = metric_data<T>(kind, s.n, s.d, static_cast<std::size_t>(s.k), 17);
      if (metric == km::Metric::cosine)  // a row of length 0: kept 0 by the device's normalisation too
        std::fill(host.row(s.n / 2), host.row(s.n / 2) + s.d, T(0));
      km::cuda::DeviceBuffer<T> held;
      const std::size_t offset = kind == 1 ? 1 : 0;  // clustered data: rows off the alignment, copied
      const auto device = on_device(host, held, offset);
      for (km::Init init : inits) {
        SCOPED_TRACE(std::string(impl.name) + " " + km::to_string(metric) + " d=" + std::to_string(s.d) +
                     " k=" + std::to_string(s.k) + " " + metric_data_name(kind) + " init " +
                     std::to_string(static_cast<int>(init)));
        km::Params p;
        p.k = s.k;
        p.loops = 10;
        p.init = init;
        p.seed = 5;
        p.metric = metric;
        const auto want = km::run(impl, host, p);
        const auto got = km::run(impl, device, p);
        EXPECT_EQ(got.iterations, want.iterations);
        EXPECT_EQ(got.inertia, want.inertia);
        EXPECT_EQ(got.labels, want.labels);
        EXPECT_EQ(got.centroids, want.centroids);
        EXPECT_EQ(got.path, want.path);
        // predict with the fit's centroids, from the device copy: the fit's labels.
        km::Params q;
        q.k = s.k;
        q.metric = metric;
        q.init = km::Init::given;
        q.given_d = s.d;
        q.given_centroids.assign(want.centroids.begin(), want.centroids.end());
        const auto labels = km::predict(impl, device, q);
        EXPECT_EQ(labels.labels, want.labels);
        EXPECT_EQ(labels.inertia, km::predict(impl, host, q).inertia);
      }
      std::vector<T> after(host.n * host.d);  // the caller's rows, read in place, are left alone
      CUDA_CHECK(cudaMemcpy(after.data(), device.device_values, after.size() * sizeof(T), cudaMemcpyDeviceToHost));
      EXPECT_TRUE(std::equal(after.begin(), after.end(), host.values.data(),
                             [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }))
          << impl.name << " changed the device rows";
    }
  }
}

class GpuDeviceData : public ::testing::TestWithParam<const char*> {};
TEST_P(GpuDeviceData, Double) { check_device<double>(km::find_implementation(GetParam())); }
TEST_P(GpuDeviceData, Float) { check_device<float>(km::find_implementation(GetParam())); }
// cosine: the rows normalised on the device (kmeans/gpu/unit_rows.hpp), the objective summed there.
TEST_P(GpuDeviceData, CosineFloat) {
  check_device<float>(km::find_implementation(GetParam()), km::Metric::cosine, {km::Init::first, km::Init::kmeanspp});
}
TEST_P(GpuDeviceData, DotDouble) {
  check_device<double>(km::find_implementation(GetParam()), km::Metric::dot, {km::Init::random});
}
std::string rung_name(const ::testing::TestParamInfo<const char*>& rung) {
  std::string name = rung.param;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}
INSTANTIATE_TEST_SUITE_P(Rungs, GpuDeviceData, ::testing::Values("fused", "offload", "offload-block"), rung_name);

// The device memory a fused fit takes from the pool beside rows already on the device: its
// high-water mark, from the pool's own count (not the device's free memory, which other processes
// move). The pool gives the engines all their buffers, so a copy of the rows shows in it.
std::size_t fit_pool_peak(std::size_t offset) {
  const std::size_t n = std::size_t{1} << 20, d = 64;
  const auto host = metric_data<float>(0, n, d, 256, 3);
  km::cuda::DeviceBuffer<float> held;  // (cudaMalloc: outside the pool)
  const auto device = on_device(host, held, offset);
  km::Params p;
  p.k = 256;
  p.loops = 2;
  int gpu = 0;
  CUDA_CHECK(cudaGetDevice(&gpu));
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, gpu));
  CUDA_CHECK(cudaDeviceSynchronize());
  std::uint64_t high = 0;  // (the attribute is a cuuint64_t)
  CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));  // (reset: to what is in use)
  km::run(km::find_implementation("fused"), device, p);
  CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
  return static_cast<std::size_t>(high);
}

// Aligned rows are read in place; rows off the alignment are copied: the two fits' peaks differ by
// the rows' size (the same path, buffers and arithmetic otherwise).
TEST(GpuDeviceDataMemory, AlignedRowsAreNotCopied) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const std::size_t rows_bytes = (std::size_t{1} << 20) * 64 * sizeof(float);
  const std::size_t in_place = fit_pool_peak(0), copied = fit_pool_peak(1);
  std::printf("pool peak beside %zu bytes of rows: %zu read in place, %zu copied\n", rows_bytes, in_place, copied);
  ASSERT_GT(copied, in_place);
  EXPECT_GE(copied - in_place, rows_bytes - rows_bytes / 16) << "the copy is not the difference";
}

// A NaN in device memory: refused with one line (by the range check on the device).
TEST(GpuDeviceDataErrors, NanIsRefused) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  auto host = metric_data<float>(0, 1000, 4, 3, 2);
  host.row(700)[2] = std::numeric_limits<float>::quiet_NaN();
  km::cuda::DeviceBuffer<float> held;
  const auto device = on_device(host, held);
  km::Params p;
  p.k = 3;
  p.init = km::Init::kmeanspp;
  for (km::Init init : {km::Init::first, km::Init::kmeanspp}) {
    p.init = init;
    try {
      km::run(km::find_implementation("fused"), device, p);
      ADD_FAILURE() << "no error";
    } catch (const km::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("NaN or infinite"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
