// Sample weights on every GPU rung: the whole fit bit for bit against the CPU rung with the same
// arithmetic (naive, transpose and shared update on the host in double as seq does; offload,
// offload-block and fused, whose weighted fits take its tensor path at every shape, in fixed
// point as omp does), on spread, clustered,
// quantised and offset data (tests/metric_data.hpp) with continuous weights (a tenth of them 0)
// and integer ones, in both precisions, in memory and streamed; weights of 1 give the
// unweighted bits. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "fit_checks.hpp"
#include "common/errors.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/multi_gpu.hpp"
#include "kmeans/registry.hpp"
#include "metric_data.hpp"
#include "weights_data.hpp"

namespace {

using namespace kmtest;

const std::vector<SplitShape> kWeightShapes = {{5003, 2, 16}, {4001, 16, 16}, {3001, 64, 100}, {2003, 128, 1000}};

template <class T>
void check_weighted(const km::Implementation& impl, std::size_t stream_rows = 0) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const SplitShape& s : kWeightShapes) {
    if (!km::supports(impl, static_cast<std::size_t>(s.k), s.d, sizeof(T)).ok) continue;
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE(std::string(impl.name) + " d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " " +
                   metric_data_name(kind));
      auto data = metric_data<T>(kind, s.n, s.d, static_cast<std::size_t>(s.k), 31);
      data.weights = sample_weights<T>(data.n, 5 + kind, kind == 2);
      km::Params p;
      p.k = s.k;
      p.loops = 12;
      p.init = km::Init::kmeanspp;
      p.seed = 9;
      p.stream_rows = stream_rows;
      const auto got = km::run(impl, data, p);
      const km::Implementation& ref_impl = km::find_implementation(cpu_reference_of(impl.name));
      if (std::string(impl.name) == "fused") {
        EXPECT_EQ(got.path.rfind("tensor (sample weights)", 0), 0u) << got.path;
      }
      SCOPED_TRACE(std::string("against ") + ref_impl.name + ", path " + got.path);
      expect_fit_is_reference(got, km::run(ref_impl, data, p), ref_impl.name);
    }
  }
}

class GpuWeights : public ::testing::TestWithParam<const km::Implementation*> {};
TEST_P(GpuWeights, Double) { check_weighted<double>(*GetParam()); }
TEST_P(GpuWeights, Float) { check_weighted<float>(*GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuWeights, ::testing::ValuesIn(gpu_implementations()), impl_name);

// Out of core: the rows and their weights streamed in chunks of 1,000.
TEST(GpuWeightsStreamed, FusedAndOffload) {
  for (const char* name : {"fused", "offload"}) {
    SCOPED_TRACE(name);
    check_weighted<float>(km::find_implementation(name), 1000);
    check_weighted<double>(km::find_implementation(name), 1000);
  }
}

// Weights of 1 on the device-update rungs: the unweighted fit's bits (fused's weighted fit takes
// the tensor path, its unweighted one at d = 16 the one pass: both omp's bits).
TEST(GpuWeightsOnes, GiveTheUnweightedBits) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const char* name : {"offload", "offload-block", "fused"})
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE(std::string(name) + " " + metric_data_name(kind));
      const auto data = metric_data<float>(kind, 4001, 16, 16, 3);
      auto ones = metric_data<float>(kind, 4001, 16, 16, 3);
      ones.weights = km::HostBuffer<float>(ones.n);
      std::fill_n(ones.weights.data(), ones.n, 1.0f);
      km::Params p;
      p.k = 16;
      p.loops = 12;
      p.init = km::Init::first;
      const auto a = km::run(km::find_implementation(name), ones, p);
      const auto b = km::run(km::find_implementation(name), data, p);
      EXPECT_EQ(a.centroids, b.centroids);
      EXPECT_EQ(a.labels, b.labels);
      EXPECT_EQ(a.inertia, b.inertia);
      EXPECT_EQ(a.iterations, b.iterations);
    }
}

// Over the GPUs there are (NCCL; on one GPU, one part): each part's weights with its rows, the
// one-GPU fit bit for bit.
TEST(GpuWeightsSplit, OverGpusGivesTheOneGpuBits) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  for (const char* name : {"fused", "offload-block"}) {
    SCOPED_TRACE(name);
    const km::Implementation& impl = km::find_implementation(name);
    auto data = metric_data<double>(1, 6007, 16, 12, 8);
    data.weights = sample_weights<double>(data.n, 4);
    km::Params p;
    p.k = 12;
    p.loops = 10;
    p.init = km::Init::kmeanspp;
    const auto one = km::run(impl, data, p);
    p.gpus = std::min(km::device_count(), 4);
    std::unique_ptr<km::Engine<double>> engine;
    try {
      engine = km::make_multi_gpu<double>(impl, p);
    } catch (const km::DeviceError& e) {
      GTEST_SKIP() << "no NCCL: " << e.what();
    }
    const auto split = km::fit(*engine, data, p);
    EXPECT_EQ(split.centroids, one.centroids) << p.gpus << " GPUs";
    EXPECT_EQ(split.labels, one.labels);
    EXPECT_EQ(split.inertia, one.inertia);
    EXPECT_EQ(split.iterations, one.iterations);
  }
}

}  // namespace
