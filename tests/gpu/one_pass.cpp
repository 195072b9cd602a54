// fused's one-pass path: the delta kernel against the classic kernel and omp; the next pass
// prefetched or not; each iteration launched ahead (as dependent launches, released early or at
// the kernel's end, or plain) against one launch at a time; the fallback where the cell table's
// grid cannot be proved; --list naming the path a run takes.
// Each as whole fits, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "fit_checks.hpp"
#include "io/generate.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/gpu/fused_plan.hpp"
#include "kmeans/registry.hpp"

namespace {

using namespace kmtest;

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

TEST(GpuFusedDelta, DoubleAsClassic) { check_delta_as_classic<double>(); }
TEST(GpuFusedDelta, FloatAsClassic) { check_delta_as_classic<float>(); }

// The next pass's lines prefetched before the scores (prefetch: by default into L1
// in float at d 9-16 with the FMA scores and with the tensor-core scores at d 17-32) against none:
// whole fits bit for bit (labels, centroids, change and re-check counts); the
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
  check_same_fits_without<float>(base, "prefetch", shapes, same_path, "0");
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
      for (const bool plain : {false, true}) {
        SCOPED_TRACE(plain ? "plain launches, events" : "dependent launches released early, stamps");
        km::Params ahead = rules[r];
        ahead.fused.launch_ahead = true;
        ahead.fused.dependent_launch = !plain;
        ahead.fused.iteration_events = plain;
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

TEST(GpuFusedDelta, DoubleListNamesThePathTaken) { check_list_path<double>(); }
TEST(GpuFusedDelta, FloatListNamesThePathTaken) { check_list_path<float>(); }


}  // namespace
