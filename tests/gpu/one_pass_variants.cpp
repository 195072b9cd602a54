// Each variant of fused's one-pass delta kernel against the same kernel without it (and omp),
// whole fits bit for bit: the cell table at d = 2, its lean passes and sorted order; the scores
// on the tensor cores; d fixed at compile time; the staged loads; the passes taken from chunk
// counters; the inertia's addends from the scores; the float copy of x - z in double.
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
#include "kmeans/fixed_point.hpp"
#include "kmeans/registry.hpp"

namespace {

using namespace kmtest;

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

TEST(GpuFusedDelta, DoubleMmaAsFma) { check_mma<double>(); }
TEST(GpuFusedDelta, FloatMmaAsFma) { check_mma<float>(); }

// The delta kernel with d a constant where d fills its register width 16 or 32 (EXACT; the FMA
// scores, the index packed or not (K > 64), and the tensor-core scores at d = 16 and 32)
// against the same kernel with d at run time (fixed_width=0): the same arithmetic, so
// labels, centroids, change counts, shifts, the objects re-checked and re-scored, and the inertia
// all bit for bit, omp's labels; the report's path names the variant that ran ("d fixed"), so a
// run where the engine did not take it fails. d = 4 and 8 (widths it has no fixed kernel for) and
// d = 12 (width 16, not filled) must not take it.
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
        if (s.d == 16 || s.d == 32) EXPECT_NE(on.path.find("d fixed"), std::string::npos) << on.path;
        else EXPECT_EQ(on.path.find("d fixed"), std::string::npos) << on.path;
        expect_same_counts(on, off);
      });
}

TEST(GpuFusedDelta, DoubleExactAsRuntimeD) { check_exact<double>(); }
TEST(GpuFusedDelta, FloatExactAsRuntimeD) { check_exact<float>(); }

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
// counters; the default) against a fixed share a warp
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

TEST(GpuFusedDelta, FloatMmaPassesAsFixedShares) { check_mma_dynamic_chunks<float>(); }
TEST(GpuFusedDelta, DoubleMmaPassesAsFixedShares) { check_mma_dynamic_chunks<double>(); }
TEST(GpuFusedDelta, DoubleStagedPassesAsFixedShares) { check_dynamic_chunks<double>(); }
TEST(GpuFusedDelta, FloatStagedPassesAsFixedShares) { check_dynamic_chunks<float>(); }
TEST(GpuFusedDelta, DoubleLeanCellPassesAsFixedShares) { check_lean_dynamic_chunks<double>(); }
TEST(GpuFusedDelta, FloatLeanCellPassesAsFixedShares) { check_lean_dynamic_chunks<float>(); }

TEST(GpuFusedDelta, DoubleStagedAsRegisterLoads) { check_tile<double>(false); }
TEST(GpuFusedDelta, FloatStagedAsRegisterLoads) { check_tile<float>(false); }
TEST(GpuFusedDelta, DoubleStagedMmaAsRegisterLoads) { check_tile<double>(true); }
TEST(GpuFusedDelta, FloatStagedMmaAsRegisterLoads) { check_tile<float>(true); }

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

TEST(GpuFusedDelta, FloatInertiaFromScoresAsExact) { check_approx_inertia<float>(); }
TEST(GpuFusedDelta, DoubleInertiaFromScoresAsExact) { check_approx_inertia<double>(); }

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
        km::apply_fused_config(p.fused, "path=one-pass,float_copy=1,float_copy_after=0.25");
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

// The float copy's kernel with its movers' and close calls' rows from the kept row-major upload
// (the default) against the same rows read from x [d][n] (copy_rows=0): the same values,
// so the same fit bit for bit, the iteration's inertia included, on uniform, clustered and
// quantised data. The reports must name the rows, and only where they were read.
void check_shadow_rows() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  km::FusedConfig copy;
  km::apply_fused_config(copy, "path=one-pass,float_copy=1,float_copy_after=1");
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

TEST(GpuFusedDelta, DoubleFloatCopyAsX) { check_shadow(); }
TEST(GpuFusedDelta, DoubleFloatCopyRowsAsX) { check_shadow_rows(); }

}  // namespace
