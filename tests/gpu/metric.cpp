// The cosine and dot metrics on every GPU rung: the whole fit bit for bit against the CPU rung
// with the same arithmetic (naive, transpose and shared update on the host in double as seq
// does; offload, offload-block and fused in fixed point as omp does, kmeans/fixed_point.hpp):
// the labels are exact, so the re-normalised centroids, the labels and the objective are the
// same bits, on spread, clustered, quantised and offset data (tests/metric_data.hpp), in both
// precisions, in memory and streamed. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "fit_checks.hpp"
#include "kmeans/registry.hpp"
#include "metric_data.hpp"

namespace {

using namespace kmtest;

// d = 2 (fused's cells), 16 (one pass), 64 and 128 (the tensor path), K up to 1000.
const std::vector<SplitShape> kMetricShapes = {{5003, 2, 16}, {4001, 16, 16}, {3001, 64, 100}, {2003, 128, 1000}};

template <class T>
void check_metric(const km::Implementation& impl, km::Metric metric, std::size_t stream_rows = 0) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& ref_impl = km::find_implementation(cpu_reference_of(impl.name));
  for (const SplitShape& s : kMetricShapes) {
    if (!km::supports(impl, static_cast<std::size_t>(s.k), s.d, sizeof(T)).ok) continue;
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE(std::string(km::to_string(metric)) + " d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) +
                   " " + metric_data_name(kind));
      const auto data = metric_data<T>(kind, s.n, s.d, static_cast<std::size_t>(s.k), 31);
      km::Params p;
      p.k = s.k;
      p.loops = 12;
      p.metric = metric;
      p.init = km::Init::kmeanspp;
      p.seed = 9;
      p.stream_rows = stream_rows;
      expect_fit_is_reference(km::run(impl, data, p), km::run(ref_impl, data, p), ref_impl.name);
    }
  }
}

class GpuMetric : public ::testing::TestWithParam<const km::Implementation*> {};
TEST_P(GpuMetric, CosineDouble) { check_metric<double>(*GetParam(), km::Metric::cosine); }
TEST_P(GpuMetric, CosineFloat) { check_metric<float>(*GetParam(), km::Metric::cosine); }
TEST_P(GpuMetric, DotDouble) { check_metric<double>(*GetParam(), km::Metric::dot); }
TEST_P(GpuMetric, DotFloat) { check_metric<float>(*GetParam(), km::Metric::dot); }
INSTANTIATE_TEST_SUITE_P(Registry, GpuMetric, ::testing::ValuesIn(gpu_implementations()), impl_name);

// Out of core: the rows streamed in chunks of 1,000 (the device-update rungs).
TEST(GpuMetricStreamed, FusedAndOffload) {
  for (const char* name : {"fused", "offload"}) {
    SCOPED_TRACE(name);
    check_metric<float>(km::find_implementation(name), km::Metric::cosine, 1000);
    check_metric<double>(km::find_implementation(name), km::Metric::dot, 1000);
  }
}

}  // namespace
