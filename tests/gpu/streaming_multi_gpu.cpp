// The device-update rungs across devices and out of core: omp's fit bit for bit, and the same
// fit with the rows split over every GPU here (--gpus, NCCL); streamed from host memory in
// chunks (Params::stream_rows, --device-memory) against in memory, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "cuda/device.hpp"
#include "fit_checks.hpp"
#include "io/generate.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/multi_gpu.hpp"
#include "kmeans/registry.hpp"

namespace {

using namespace kmtest;

// The device-update rungs (offload, offload-block, fused) sum in 64-bit fixed point and
// update as omp does (kmeans/fixed_point.hpp), and their labels are seq's = omp's: so the
// whole run is omp's bit for bit, centroids and labels, on random, clustered and quantised data.
// And --gpus: the rows split over every GPU here (one GPU still goes through NCCL), the
// partials all-reduced: the one-GPU run bit for bit, per-iteration inertia and counts included.
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

// On a terminal a streamed iteration shows how far its pass is (progress::part), the host
// waiting for each chunk before it queues the next: the same bits as without the line.
TEST(GpuStreamed, ProgressOfThePass) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const auto data = label_data<double>(0, {20011, 16, 16});  // 2.561 MB: chunks of 4,096 rows are 0.5243 MB
  for (const char* name : {"fused", "offload"}) {
    SCOPED_TRACE(name);
    const km::Implementation& impl = km::find_implementation(name);
    km::Params p;
    p.k = 16;
    p.loops = 4;
    p.stream_rows = 4096;
    const auto quiet = km::run(impl, data, p);
    std::FILE* lines = std::tmpfile();
    km::progress::detail::enable_on(lines, "t", 0, 0);
    km::progress::Iterations shown(p.loops, 1);
    const auto run =
        km::run(impl, data, p, [&](int it, const km::IterationStats& s) { shown(it, s.changed, s.inertia); });
    km::progress::disable();
    std::string text(1 << 16, '\0');
    std::rewind(lines);
    text.resize(std::fread(text.data(), 1, text.size(), lines));
    std::fclose(lines);
    EXPECT_NE(run.path.find("streamed"), std::string::npos) << run.path;
    EXPECT_EQ(run.centroids, quiet.centroids);
    EXPECT_EQ(run.labels, quiet.labels);
    EXPECT_EQ(run.inertia, quiet.inertia);
    EXPECT_NE(text.find("\rt: iterations  [this pass 20%: 0.5243 of 2.561 MB]"), std::string::npos)
        << "the first pass, before the first iteration's line: " << text.substr(0, 400);
    EXPECT_NE(text.find("1 of 4 iterations  " + std::to_string(run.per_iteration[0].changed) + " changed"),
              std::string::npos)
        << text.substr(0, 400);
    EXPECT_NE(text.find("  [this pass 82%: 2.097 of 2.561 MB]"), std::string::npos) << "a pass's last chunk but one";
  }
}

}  // namespace
