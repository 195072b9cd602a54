// The initialisations on the GPU against the CPU's, bit for bit: k-means++ and k-means|| (its
// rounds on the tensor cores or through cuBLAS GEMMs, its reduction on the GPU), the centre of the
// tensor path's copy, k-means||'s nearest rows with and without a ceiling, and the engine's
// staged data read by the initialisation (Engine::stage, Engine::centred_rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "fit_checks.hpp"
#include "io/generate.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/gpu/tensor_kernels.hpp"
#include "kmeans/gpu/tensor_nearest.hpp"
#include "kmeans/init.hpp"
#include "kmeans/registry.hpp"

namespace {

using namespace kmtest;

// An initialisation on the GPU gives the CPU's centres, bit for bit, and the same on every run,
// on uniform, clustered and quantised data (exact ties).
// - k-means++: the same draws, distances in the same arithmetic, chunk sums in the same order.
// - k-means||: nearest candidates from the tensor cores' TF32 keys (or, in the *Gemm tests, from
//   GEMM scores), re-checked within the proven error (only the re-check breaks the quantised
//   data's ties as the CPU does); K = 2000 draws about 5000 candidates, more than one GEMM block
//   of them.
// The GPU's centres for p are the CPU's, bit for bit, and the same on a second run; returns the CPU's.
template <class T>
std::vector<T> expect_cpu_centres(const km::Dataset<T>& data, const km::Params& p) {
  const auto cpu = km::initial_centroids(data, p, false);
  const auto gpu = km::initial_centroids(data, p, true);
  const auto again = km::initial_centroids(data, p, true);
  EXPECT_EQ(gpu.size(), cpu.size());
  if (gpu.size() != cpu.size() || again.size() != cpu.size()) return cpu;
  EXPECT_EQ(std::memcmp(gpu.data(), cpu.data(), cpu.size() * sizeof(T)), 0) << "GPU centres differ from the CPU's";
  EXPECT_EQ(std::memcmp(gpu.data(), again.data(), cpu.size() * sizeof(T)), 0) << "not reproducible";
  return cpu;
}

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
      expect_cpu_centres(data, p);
    }
}
const std::vector<LabelShape> kPlusPlusShapes = {{50000, 32, 100}, {40000, 3, 1000}, {20000, 200, 64}};

// Under cosine and dot, k-means++ and k-means|| give rows of length 0 no share (a third of the
// rows here, the first among them) and k-means|| no weight: the GPU's steps skip the same rows,
// so the centres are the CPU's, none zero.
template <class T>
void check_skips_zero_rows() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const LabelShape& s : {LabelShape{30000, 16, 200}, LabelShape{20001, 130, 64}}) {
    auto data = label_data<T>(0, s);
    for (std::size_t i = 0; i < data.n; i += 3) std::fill(data.row(i), data.row(i) + data.d, T(0));
    for (km::Init init : {km::Init::kmeanspp, km::Init::kmeans_parallel})
      for (km::Metric metric : {km::Metric::cosine, km::Metric::dot}) {
        SCOPED_TRACE("d=" + std::to_string(s.d) + " " + km::to_string(metric) + " " + km::to_string(init));
        km::Params p;
        p.k = s.k;
        p.init = init;
        p.seed = 3;
        p.metric = metric;
        const auto cpu = expect_cpu_centres(data, p);
        for (std::size_t c = 0; c < static_cast<std::size_t>(s.k); ++c)
          EXPECT_FALSE(std::all_of(cpu.begin() + c * s.d, cpu.begin() + (c + 1) * s.d, [](T v) { return v == T(0); }))
              << "centre " << c << " is a row of length 0";
      }
  }
}
TEST(GpuKmeansPlusPlus, SkipsZeroRowsDouble) { check_skips_zero_rows<double>(); }
TEST(GpuKmeansPlusPlus, SkipsZeroRowsFloat) { check_skips_zero_rows<float>(); }
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
// Data only on the device (a CuPy array's, no host rows), through the GEMMs, which read the
// candidates' rows on the host, and skipping cosine's rows of length 0: the CPU's centres.
TEST(GpuKmeansParallel, DeviceOnlyGemm) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  auto host = label_data<float>(1, LabelShape{30000, 16, 300});
  for (std::size_t i = 0; i < host.n; i += 5) std::fill(host.row(i), host.row(i) + host.d, 0.0f);
  km::cuda::DeviceBuffer<float> held;
  const auto device = on_device(host, held);
  for (km::Metric metric : {km::Metric::euclidean, km::Metric::cosine}) {
    km::Params p;
    p.k = 300;
    p.init = km::Init::kmeans_parallel;
    p.seed = 8;
    p.metric = metric;
    p.gpu_init = nearest_by_gemm();
    const auto cpu = km::initial_centroids(host, p, false);
    const auto gpu = km::initial_centroids(device, p, true);
    ASSERT_EQ(gpu.size(), cpu.size());
    EXPECT_EQ(std::memcmp(gpu.data(), cpu.data(), cpu.size() * sizeof(float)), 0) << km::to_string(metric);
  }
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
