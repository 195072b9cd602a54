// fused's plan on the CPU (kmeans/gpu/fused_plan.hpp): plan_delta, the one-pass delta kernel's
// variant and launch shape per shape (the lab's rows as measured, each FusedConfig override, and
// that every buffer fits the device and the kernel's layout); plan_fused, the path at the
// measured crossover, a forced path where it can run, the tensor cores' scores per precision
// and device, and the plan in words.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/gpu/fused_plan.hpp"
#include "kmeans/tuning.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

using Config = km::FusedConfig;

km::gpu::DeltaPlan plan_for(std::size_t d, std::size_t k, std::size_t elem, std::size_t optin = 227 * 1024,
                            const km::FusedConfig& env = {}, std::size_t n = 1 << 20, double max_abs = 1.0,
                            int block = 128, bool block_given = false) {
  return km::gpu::plan_delta({n, d, k, elem, max_abs, block, block_given, optin}, env);
}

// Every buffer the plan sizes fits the device it was planned for, and the staged kernel's
// buffers start past the rest.
void expect_fits(const km::gpu::DeltaPlan& p, std::size_t optin) {
  if (!p.delta) return;
  EXPECT_LE(p.bytes, optin);
  if (p.tile) {
    EXPECT_LE(p.tile_bytes, optin);
    if (p.cells_side) {
      EXPECT_GE(p.tile_offset, p.bytes) << "its buffers after the cell table";
      EXPECT_GT(p.tile_bytes, p.tile_offset);
    } else {
      EXPECT_GT(p.tile_bytes, 0u);
    }
  }
  if (p.shadow) {
    EXPECT_TRUE(p.tile) << "the float copy is the staged kernel's";
    EXPECT_LE(p.shadow_bytes, optin);
    EXPECT_GT(p.shadow_bytes, p.bytes);
  } else {
    EXPECT_EQ(p.shadow_bytes, 0u);
  }
}

// The delta kernel's variant per shape (fused_plan.cpp), where the engine and --list both take it:
// the lab's rows as measured (docs/performance.md), each FusedConfig override, and the limits.
TEST(DeltaPlan, LabShapesTakeTheMeasuredVariants) {
  EXPECT_EQ(plan_for(2, 16, 4).describe(), "cells");
  EXPECT_EQ(plan_for(2, 16, 8).describe(), "cells");
  EXPECT_EQ(plan_for(2, 4, 4).describe(), "") << "below K = 8 in float: no table";
  EXPECT_EQ(plan_for(2, 8, 8).describe(), "") << "below K = 16 in double: no table";
  EXPECT_EQ(plan_for(16, 16, 8).describe(), "d fixed, staged, float copy") << "double: the staged kernel from the copy";
  EXPECT_EQ(plan_for(16, 16, 4).describe(), "d fixed, staged") << "float at d = 16: staged for 8 < K <= 24";
  EXPECT_EQ(plan_for(16, 8, 4).describe(), "d fixed") << "K = 8: the staged loads measured 1.06x";
  EXPECT_EQ(plan_for(16, 9, 4).describe(), "d fixed, staged");
  EXPECT_EQ(plan_for(32, 16, 4).describe(), "d fixed") << "float at d = 32: staging measured 1.88x";
  EXPECT_EQ(plan_for(32, 16, 8).describe(), "d fixed, staged") << "double at d = 32, K <= 16";
  EXPECT_EQ(plan_for(32, 64, 4).describe(), "d fixed, mma");
  EXPECT_EQ(plan_for(32, 64, 8).describe(), "d fixed, mma");
  EXPECT_EQ(plan_for(16, 64, 4).describe(), "d fixed, mma");
  EXPECT_EQ(plan_for(16, 32, 4).describe(), "d fixed, staged, mma") << "float at d = 16 (fixed): mma from K = 24, staged";
  EXPECT_EQ(plan_for(16, 23, 4).describe(), "d fixed, staged") << "below K = 24 the staged FMA scores";
  EXPECT_EQ(plan_for(16, 24, 4).describe(), "d fixed, staged, mma") << "from K = 24 the tensor-core scores";
  EXPECT_EQ(plan_for(16, 56, 4).describe(), "d fixed, staged, mma") << "staged up to K = 56";
  EXPECT_EQ(plan_for(16, 57, 4).describe(), "d fixed, mma") << "K = 64 staged measured 1.21x";
  EXPECT_EQ(plan_for(16, 24, 8).describe(), "d fixed, mma") << "double: staged only up to K = 16";
  EXPECT_EQ(plan_for(12, 32, 4).describe(), "") << "float at d = 9-15: mma only above K = 32";
  EXPECT_EQ(plan_for(12, 32, 8).describe(), "mma") << "d = 12 does not fill its width";
  EXPECT_EQ(plan_for(4, 16, 4).describe(), "") << "d fixed only at widths 16 and 32";
  EXPECT_EQ(plan_for(8, 16, 8).describe(), "");
  EXPECT_EQ(plan_for(4, 128, 4).describe(), "") << "d = 4 fixed only up to K = 64";
  EXPECT_EQ(plan_for(3, 16, 8).describe(), "");
  const auto ball = plan_for(1, 64, 8);
  EXPECT_TRUE(ball.ball);
  EXPECT_EQ(ball.cells_side, 0) << "the table is for d = 2";
  const auto table = plan_for(2, 64, 8);
  EXPECT_EQ(table.cells_side, 128);
  EXPECT_FALSE(table.ball) << "the table replaces Elkan's test";
  EXPECT_TRUE(table.ball_wanted) << "... which runs where no grid exists";
  EXPECT_FALSE(table.cell_masks) << "above K = 16 the candidates stay in L2";
  // Up to K = 16 each cell's 16-bit candidates after the table, where the device has room; the
  // table keeps its side and the masks give way where they do not fit.
  EXPECT_EQ(plan_for(2, 16, 4).cells_side, 64);
  EXPECT_TRUE(plan_for(2, 16, 4).cell_masks);
  km::FusedConfig side128;
  side128.cells = 128;
  const auto masked = plan_for(2, 16, 4, 227 * 1024, side128);
  EXPECT_TRUE(masked.cell_masks);
  const auto tight = plan_for(2, 16, 4, masked.bytes - 1, side128);
  EXPECT_EQ(tight.cells_side, 128) << "the table keeps its side; only the masks give way";
  EXPECT_FALSE(tight.cell_masks);
  EXPECT_EQ(masked.bytes - tight.bytes, 2u * 128 * 128) << "two bytes a cell";
  EXPECT_EQ(masked.describe(), tight.describe());
  EXPECT_EQ(plan_for(32, 70, 4).bits, 0) << "K > 64: the index is not packed";
  EXPECT_FALSE(plan_for(32, 70, 4).mma);
  for (std::size_t d : {1, 2, 3, 4, 8, 12, 16, 24, 32})
    for (std::size_t k : {1, 2, 5, 16, 33, 64, 70, 256})
      for (std::size_t elem : {4, 8}) {
        SCOPED_TRACE("d " + std::to_string(d) + " k " + std::to_string(k) + " elem " + std::to_string(elem));
        expect_fits(plan_for(d, k, elem), 227 * 1024);
      }
}

// Without --block, the threads per block that measured faster (fused_plan.cpp);
// with it, --block up to the planned kernel's launch bounds (layouts.hpp: delta_max_threads).
TEST(DeltaPlan, BlockMeasuredUnlessGiven) {
  EXPECT_EQ(plan_for(32, 64, 8).block, 192) << "the tensor-core scores in double at width 32: two blocks of 192";
  EXPECT_EQ(plan_for(24, 64, 8).block, 192);
  EXPECT_EQ(km::kernels::delta_max_threads(8, 32, true, false), 192);
  EXPECT_EQ(km::kernels::delta_max_threads(4, 32, true, false), 256);
  EXPECT_EQ(km::kernels::delta_max_threads(8, 32, true, true), 256) << "staged: its own launch bounds";
  EXPECT_EQ(km::kernels::delta_max_threads(8, 16, true, false), 256);
  EXPECT_EQ(km::kernels::delta_max_threads(8, 32, false, false), 256) << "K > 64 (the index not packed)";
  EXPECT_EQ(plan_for(32, 8, 8).block, 192) << "the FMA scores in double at width 32, not staged";
  EXPECT_EQ(plan_for(24, 16, 8).block, 192);
  EXPECT_TRUE(plan_for(32, 16, 8).tile);
  EXPECT_EQ(plan_for(32, 16, 8).block, 256) << "the staged kernel keeps 256 (192 1.16x)";
  EXPECT_EQ(plan_for(32, 100, 8).block, 256) << "K > 64: 256 (192 1.13x)";
  // Two of its blocks fit an H100's or H200's SM (228 KB, 1 KB reserved a block, ~1 KB static):
  // its stage holds the rows of x'' alone (the movers in rounds of 18), not 32 objects in double.
  EXPECT_LE(2 * (plan_for(32, 64, 8).bytes + 2048), 228u * 1024);
  EXPECT_EQ(km::kernels::delta_stage_warp_bytes(32, 8, 1, true), 32u * 36 * 4);
  EXPECT_EQ(km::kernels::delta_stage_warp_bytes(32, 8, 1, false), 32u * 32 * 8);
  EXPECT_EQ(km::kernels::delta_stage_warp_bytes(16, 4, 2, true), 64u * 20 * 4) << "float: the rows, as before";
  EXPECT_EQ(km::kernels::delta_stage_warp_bytes(16, 8, 1, true), 32u * 16 * 8) << "double at width 16: plain";
  km::FusedConfig both;
  both.mma = both.staged = true;
  EXPECT_EQ(plan_for(32, 16, 8, 227 * 1024, both).block, 256) << "mma forced, staged: the staged kernel's 256";
  both.staged = false;
  EXPECT_EQ(plan_for(32, 16, 8, 227 * 1024, both).block, 192) << "mma forced, not staged";
  EXPECT_EQ(plan_for(16, 64, 8).block, 256);
  EXPECT_EQ(plan_for(2, 16, 8).block, 256);
  EXPECT_EQ(plan_for(16, 16, 8).block, 256) << "the staged double d = 16 kernel, its centre in shared memory (H200: 0.97x of 192)";
  EXPECT_TRUE(plan_for(16, 16, 4).tile);
  EXPECT_EQ(plan_for(16, 16, 4).block, 256) << "the staged float d = 16 kernel: 256 (128 1.03x, 192 1.07x)";
  km::FusedConfig unstaged;
  unstaged.staged = false;
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, unstaged).block, 256);
  EXPECT_FALSE(plan_for(32, 16, 4).tile) << "float at width 32: not staged";
  EXPECT_EQ(plan_for(32, 16, 4).block, 256) << "float, d = 32, K = 16: not staged, 256";
  km::FusedConfig staged32;
  staged32.staged = true;
  EXPECT_EQ(plan_for(32, 16, 4, 227 * 1024, staged32).block, 192) << "float at width 32 where the staged kernel is forced";
  EXPECT_EQ(plan_for(32, 16, 4, 227 * 1024, staged32).queue_threads, 192) << "the queues sized for the block chosen";
  EXPECT_FALSE(plan_for(32, 8, 4).tile);
  EXPECT_EQ(plan_for(32, 8, 4).block, 256);
  EXPECT_FALSE(plan_for(24, 16, 4).tile) << "d below its width: no staged kernel";
  EXPECT_EQ(plan_for(24, 16, 4).block, 256);
  EXPECT_TRUE(plan_for(32, 64, 4).mma);
  EXPECT_EQ(plan_for(32, 64, 4).block, 256) << "the tensor-core scores at width 32 in float: 256";
  EXPECT_EQ(plan_for(32, 128, 4).block, 256);
  EXPECT_EQ(plan_for(4, 16, 4).block, 128);
  EXPECT_EQ(plan_for(8, 64, 4).block, 256);
  EXPECT_EQ(plan_for(2, 16, 4).block, 256);
  EXPECT_EQ(plan_for(16, 64, 4).block, 256);
  for (int given : {32, 128, 256, 1024}) {
    SCOPED_TRACE(given);
    const auto p = plan_for(32, 64, 4, 227 * 1024, {}, 1 << 20, 1.0, given, true);
    EXPECT_EQ(p.block, std::min(given, 256)) << "--block, up to the kernel's launch bounds";
    EXPECT_EQ(p.queue_threads, std::min(given, 256));
    const auto q = plan_for(32, 64, 8, 227 * 1024, {}, 1 << 20, 1.0, given, true);
    EXPECT_EQ(q.block, std::min(given, 192)) << "up to the kernel's launch bounds";
    EXPECT_EQ(q.queue_threads, std::min(given, 192));
  }
  // The shared memory is sized for the block chosen: 256 threads' queues are larger.
  EXPECT_GT(plan_for(32, 64, 8).bytes, plan_for(32, 64, 8, 227 * 1024, {}, 1 << 20, 1.0, 128, true).bytes);
  const auto classic = [] {
    km::FusedConfig o;
    o.classic = true;
    return o;
  }();
  EXPECT_EQ(plan_for(32, 64, 8, 227 * 1024, classic).block, 128) << "no delta kernel: --block's default";
}

// The cell table's kernel takes its rings, their coordinates, the table and the masks from
// delta_cells_layout (6_fused_delta.cuh): whatever the plan chose, the bytes it asks for reach
// past all of them, and the staged loads' buffers start after them.
TEST(DeltaPlan, CellTableLayoutFitsThePlan) {
  int tables = 0, with_masks = 0;
  for (std::size_t elem : {4, 8})
    for (std::size_t k : {8, 16, 17, 32, 33, 64})
      for (std::size_t optin : {48 * 1024, 64 * 1024, 100 * 1024, 227 * 1024})
        for (int block : {64, 128, 256})
          for (int side : {0, 4, 64, 128, 256})
            for (int tile : {0, 1}) {
              km::FusedConfig env;
              if (side) env.cells = side;
              if (tile) env.staged = true;
              const auto p = plan_for(2, k, elem, optin, env, 1 << 20, 1.0, block, true);
              if (!p.delta || !p.cells_side) continue;
              SCOPED_TRACE("elem " + std::to_string(elem) + " k " + std::to_string(k) + " optin " +
                           std::to_string(optin) + " block " + std::to_string(block) + " side " +
                           std::to_string(p.cells_side) + (tile ? " staged" : ""));
              const std::size_t base = (km::kernels::delta_layout<std::size_t>(k, 2, elem).bytes + 15) / 16 * 16;
              const auto at = km::kernels::delta_cells_layout((p.queue_threads + 31) / 32, km::kernels::delta_unroll(2, elem),
                                                              elem, p.cells_side, false, p.cell_masks);
              EXPECT_EQ(p.queue_threads, block) << "the kernel's warps are the block's";
              EXPECT_LE(base + at.end, p.bytes);
              EXPECT_LE(p.bytes, optin);
              EXPECT_EQ((base + at.table) % 16, 0u) << "the table is copied 16 bytes at a time";
              EXPECT_EQ((base + at.masks) % 16, 0u) << "so are the masks";
              if (p.tile) {
                EXPECT_GE(p.tile_offset, base + at.end);
              }
              ++tables;
              with_masks += p.cell_masks;
            }
  EXPECT_GT(tables, 100);
  EXPECT_GT(with_masks, 0);
  EXPECT_LT(with_masks, tables);
}

TEST(DeltaPlan, OverridesAndLimits) {
  km::FusedConfig env;
  env.classic = true;
  EXPECT_FALSE(plan_for(16, 16, 8, 227 * 1024, env).delta);
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, env).describe(), "");
  env = {};
  env.fixed_width = false;
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, env).describe(), "") << "the staged kernel needs d fixed";
  env = {};
  env.staged = false;
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, env).describe(), "d fixed") << "no float copy without the staged kernel";
  env.staged = true;
  EXPECT_EQ(plan_for(16, 8, 4, 227 * 1024, env).describe(), "d fixed, staged");
  EXPECT_EQ(plan_for(2, 16, 4, 227 * 1024, env).describe(), "staged, cells");
  env = {};
  env.mma = true;
  EXPECT_EQ(plan_for(16, 16, 4, 227 * 1024, env).describe(), "d fixed, staged, mma") << "staged there by default";
  env.staged = false;
  EXPECT_EQ(plan_for(16, 16, 4, 227 * 1024, env).describe(), "d fixed, mma");
  env.staged.reset();
  EXPECT_EQ(plan_for(8, 16, 4, 227 * 1024, env).describe(), "") << "no mma at width 8 (nor d fixed)";
  env.mma = false;
  EXPECT_EQ(plan_for(32, 64, 4, 227 * 1024, env).describe(), "d fixed");
  env = {};
  env.float_copy = false;
  EXPECT_EQ(plan_for(16, 16, 8, 227 * 1024, env).describe(), "d fixed, staged") << "float_copy=0";
  env.float_copy = true;
  EXPECT_EQ(plan_for(16, 16, 4, 227 * 1024, env).describe(), "d fixed, staged") << "no float copy in float";
  EXPECT_EQ(plan_for(16, 24, 8, 227 * 1024, env).describe(), "d fixed, mma") << "nor with the tensor-core scores";
  EXPECT_EQ(plan_for(16, 8, 8, 227 * 1024, env).describe(), "d fixed") << "nor where no staged kernel runs";
  EXPECT_EQ(plan_for(12, 16, 8, 227 * 1024, env).describe(), "") << "nor with d at run time";
  EXPECT_EQ(plan_for(32, 16, 8, 227 * 1024, env).describe(), "d fixed, staged") << "nor at d = 32";
  env.staged = true;
  EXPECT_EQ(plan_for(2, 16, 8, 227 * 1024, env).describe(), "staged, cells") << "nor with the cell table";
  env = {};
  env.cells = 0;
  EXPECT_EQ(plan_for(2, 64, 8, 227 * 1024, env).cells_side, 0);
  EXPECT_TRUE(plan_for(2, 64, 8, 227 * 1024, env).ball) << "without the table, Elkan's test at K > 32";
  env.cells = 256;
  EXPECT_EQ(plan_for(2, 16, 8, 227 * 1024, env).cells_side, 256);
  env = {};
  env.ball = false;
  EXPECT_FALSE(plan_for(1, 64, 8, 227 * 1024, env).ball);
  env.ball = true;
  EXPECT_TRUE(plan_for(1, 16, 8, 227 * 1024, env).ball);
  // The data: beyond 2^48 the float filter could overflow; u32 indices in the table's rings.
  EXPECT_FALSE(plan_for(16, 16, 8, 227 * 1024, {}, 1 << 20, 0x1p49).delta);
  EXPECT_EQ(plan_for(2, 16, 8, 227 * 1024, {}, std::size_t{1} << 32).cells_side, 0);
  EXPECT_FALSE(plan_for(2, 65535, 8).delta);
  // A smaller device: the table's side halves to fit, the tensor-core tables may not fit at all,
  // and nothing the plan sizes passes the limit.
  for (std::size_t optin : {48 * 1024, 64 * 1024, 100 * 1024, 164 * 1024, 227 * 1024})
    for (std::size_t d : {2, 16, 32})
      for (std::size_t k : {16, 64})
        for (std::size_t elem : {4, 8}) {
          SCOPED_TRACE("optin " + std::to_string(optin) + " d " + std::to_string(d) + " k " + std::to_string(k));
          km::FusedConfig all;
          all.staged = true;
          all.mma = true;
          all.cells = 256;
          expect_fits(plan_for(d, k, elem, optin, all), optin);
          expect_fits(plan_for(d, k, elem, optin), optin);
        }
  env = {};
  env.cells = 256;
  const auto small = plan_for(2, 64, 8, 48 * 1024, env);
  EXPECT_GT(small.cells_side, 0);
  EXPECT_LT(small.cells_side, 256) << "48 KB cannot hold 256 x 256 cells beside the rest";
}

km::gpu::DeltaShape shape(std::size_t d, std::size_t k, std::size_t elem) {
  km::gpu::DeltaShape s;
  s.d = d;
  s.k = k;
  s.elem = elem;
  return s;
}

km::gpu::FusedPlan plan(std::size_t d, std::size_t k, std::size_t elem, const Config& config = {},
                        const km::gpu::DeviceFacts& device = {}) {
  return km::gpu::plan_fused(shape(d, k, elem), device, config);
}

km::gpu::DeviceFacts device(int cc, std::size_t shared_optin = km::gpu::DeviceFacts{}.shared_optin) {
  km::gpu::DeviceFacts f;
  f.compute_capability = cc;
  f.shared_optin = shared_optin;
  return f;
}

Config with(const std::string& spec) {
  Config c;
  km::apply_fused_config(c, spec);
  return c;
}

bool one_pass(const km::gpu::FusedPlan& p) { return p.path == km::gpu::FusedPlan::Path::one_pass; }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string field(const km::gpu::FusedPlan& p, const std::string& name) {
  for (const auto& [n, v] : p.fields())
    if (n == name) return v;
  return "(missing)";
}

// The path at the measured crossover (layouts.hpp: fused_one_pass): one pass where it says so,
// the tensor cores elsewhere, on an H100's 227 KB (where the delta kernel always fits).
TEST(FusedPlan, PathAtTheCrossover) {
  EXPECT_TRUE(one_pass(plan(16, 256, 8)));
  EXPECT_FALSE(one_pass(plan(16, 512, 8)));
  EXPECT_TRUE(one_pass(plan(32, 128, 4)));
  EXPECT_FALSE(one_pass(plan(32, 256, 4)));
  EXPECT_TRUE(one_pass(plan(8, 512, 8)));
  EXPECT_FALSE(one_pass(plan(8, 1024, 8)));
  EXPECT_TRUE(one_pass(plan(2, 1024, 8)));
  EXPECT_EQ(plan(16, 512, 8).path_reason, std::string("K*d above the one-pass crossover"));
  for (std::size_t d : {33, 64, 128, 784}) {
    const auto p = plan(d, 2, 4);
    EXPECT_FALSE(one_pass(p)) << "d = " << d;
    EXPECT_EQ(p.path_reason, std::string("d > 32"));
  }
  for (std::size_t d : {1, 2, 3, 4, 8, 9, 16, 17, 24, 32, 33, 64})
    for (std::size_t k : {1, 2, 16, 64, 65, 128, 256, 512, 1024, 4096})
      for (std::size_t elem : {4, 8}) {
        SCOPED_TRACE("d " + std::to_string(d) + " k " + std::to_string(k) + " elem " + std::to_string(elem));
        const auto p = plan(d, k, elem);
        EXPECT_EQ(one_pass(p), km::kernels::fused_one_pass(k, d, elem));
        EXPECT_NE(std::string(p.path_reason), "");
      }
}

// On a device whose shared memory cannot hold the delta kernel above K*d = 1024 (d > 8), the
// tensor path, not the classic kernel it would fall back to; at or below K*d = 1024 one pass.
TEST(FusedPlan, SmallDeviceTakesTheTensorPathAboveTheDeltaKernel) {
  const std::size_t optin = 48 * 1024;
  ASSERT_GT(km::kernels::delta_shared_bytes(256, 16, 8), optin);
  const auto p = plan(16, 256, 8, {}, device(80, optin));
  EXPECT_FALSE(one_pass(p));
  EXPECT_TRUE(has(p.path_reason, "does not fit")) << p.path_reason;
  EXPECT_TRUE(one_pass(plan(16, 64, 8, {}, device(80, optin)))) << "K*d = 1024";
  EXPECT_TRUE(one_pass(plan(8, 512, 8, {}, device(80, optin)))) << "d <= 8";
}

// path=tensor and path=one-pass force the path both ways; one pass only where its kernels fit
// (d <= 32 and the block sums in shared memory), else the tensor path, saying why.
TEST(FusedPlan, ForcedPathWhereItCanRun) {
  const auto tensor = plan(16, 16, 8, with("path=tensor"));
  EXPECT_FALSE(one_pass(tensor));
  EXPECT_EQ(tensor.path_reason, std::string("forced (path=tensor)"));
  const auto forced = plan(16, 512, 8, with("path=one-pass"));
  EXPECT_TRUE(one_pass(forced)) << "above the crossover, forced";
  EXPECT_EQ(forced.path_reason, std::string("forced (path=one-pass)"));
  for (const auto& [d, k] : {std::pair<std::size_t, std::size_t>{33, 16}, {128, 2}, {32, 2000}}) {
    SCOPED_TRACE("d " + std::to_string(d) + " k " + std::to_string(k));
    const auto refused = plan(d, k, 8, with("path=one-pass"));
    EXPECT_FALSE(one_pass(refused));
    EXPECT_TRUE(has(refused.path_reason, "do not fit")) << refused.path_reason;
    EXPECT_NE(refused.scores, std::string("")) << "a whole tensor plan";
  }
  ASSERT_GT(km::kernels::block_sums_layout<std::size_t>(2000, 32, 8).bytes, km::gpu::DeviceFacts{}.shared_optin);
}

// The tensor cores' scores per precision, width and device: float in mma.sync's 16-deep slices
// up to d = 16; wgmma on sm_90 for 32 < d <= 128 with d % 4 == 0 (unless wgmma=0), mma.sync's
// 64-deep slices elsewhere; double on TF32 keys re-checked in FP64 by default, on FP64 DMMA with
// tf32_in_double=0 (m16n8k4 on sm_90, m8n8k4 before).
TEST(FusedPlan, TensorScoresPerPrecisionAndDevice) {
  const Config tensor = with("path=tensor");
  const std::string f16 = plan(16, 16, 4, tensor).scores;
  EXPECT_TRUE(has(f16, "TF32 mma.sync") && has(f16, "16-deep")) << f16;
  EXPECT_EQ(plan(8, 4096, 4).scores, f16) << "d <= 16";
  const std::string f24 = plan(24, 4096, 4).scores;
  EXPECT_TRUE(has(f24, "TF32 mma.sync") && !has(f24, "deep")) << f24;
  // float16 wgmma where the copy is made (d % 8 = 4 too: its rows padded), TF32 wgmma without it
  for (std::size_t d : {36, 40, 64, 100, 128}) {
    const std::string half = plan(d, 256, 4, {}, device(90)).scores;
    EXPECT_TRUE(has(half, "FP16 wgmma") && has(half, "float16 copy")) << half;
  }
  for (const char* s : {plan(128, 256, 4, with("f16_scores=0"), device(90)).scores,
                        plan(128, 256, 4, with("tensor_copy=0"), device(90)).scores,
                        plan(100, 256, 4, with("f16_scores=0"), device(90)).scores})
    EXPECT_TRUE(has(s, "TF32 wgmma")) << s;
  for (const char* s : {plan(128, 256, 4, {}, device(80)).scores, plan(128, 256, 4, with("wgmma=0"), device(90)).scores,
                        plan(130, 256, 4, {}, device(90)).scores, plan(132, 256, 4, {}, device(90)).scores,
                        plan(784, 256, 4, {}, device(90)).scores}) {
    EXPECT_TRUE(has(s, "TF32 mma.sync") && has(s, "64-deep") && !has(s, "wgmma")) << s;
  }
  const std::string d128_90 = plan(128, 256, 8, {}, device(90)).scores;
  EXPECT_TRUE(has(d128_90, "TF32 wgmma keys") && has(d128_90, "FP64 re-check")) << d128_90;
  const std::string d128_80 = plan(128, 256, 8, {}, device(80)).scores;
  EXPECT_TRUE(has(d128_80, "TF32 mma.sync keys") && has(d128_80, "FP64 re-check")) << d128_80;
  const Config dmma = with("tf32_in_double=0");
  const std::string dmma_90 = plan(128, 256, 8, dmma, device(90)).scores;
  EXPECT_TRUE(has(dmma_90, "FP64 DMMA m16n8k4") && !has(dmma_90, "TF32")) << dmma_90;
  EXPECT_TRUE(has(dmma_90, "32-deep")) << dmma_90;
  const std::string dmma_90_16 = plan(16, 512, 8, dmma, device(90)).scores;
  EXPECT_TRUE(has(dmma_90_16, "FP64 DMMA m16n8k4") && !has(dmma_90_16, "deep")) << dmma_90_16;
  const std::string dmma_80 = plan(128, 256, 8, dmma, device(80)).scores;
  EXPECT_TRUE(has(dmma_80, "FP64 DMMA m8n8k4") && !has(dmma_80, "TF32")) << dmma_80;
  // The rest of the tensor plan: float's centred TF32 copy (unless tensor_copy=0; never in
  // double), the movers' scheme after 0.2 unless given.
  EXPECT_TRUE(plan(64, 256, 4).tensor_copy);
  EXPECT_FALSE(plan(64, 256, 4, with("tensor_copy=0")).tensor_copy);
  EXPECT_FALSE(plan(64, 256, 8).tensor_copy);
  EXPECT_EQ(plan(64, 256, 8).movers_after, 0.2);
  EXPECT_EQ(plan(64, 256, 8, with("movers_after=0")).movers_after, 0.0);
  EXPECT_EQ(plan(64, 256, 8, with("movers_after=0.5")).movers_after, 0.5);
}

// The plan in words: describe() starts with the path (the tensor path's with its scores, the
// one pass's with the delta kernel's variant), and fields() holds every decision, "path" and
// "why" first, the words of the same plan.
TEST(FusedPlan, DescribeAndFieldsNameThePlan) {
  const auto tensor = plan(128, 1024, 8);
  EXPECT_EQ(tensor.describe(), std::string("tensor, ") + tensor.scores);
  const auto op = plan(16, 16, 8);
  EXPECT_EQ(op.describe().rfind("one-pass", 0), 0u) << op.describe();
  EXPECT_EQ(op.describe(), "one-pass, " + op.delta.describe());
  EXPECT_EQ(plan(16, 16, 8, with("classic=1")).describe(), "one-pass") << "the classic kernel has no variant";
  for (const auto& p : {tensor, op}) {
    const auto f = p.fields();
    ASSERT_GE(f.size(), 3u);
    EXPECT_EQ(f[0].first, "path");
    EXPECT_EQ(f[0].second, one_pass(p) ? "one-pass" : "tensor");
    EXPECT_EQ(f[1].first, "why");
    EXPECT_EQ(f[1].second, p.path_reason);
    for (const auto& [name, value] : f) EXPECT_NE(value, "") << name;
  }
  EXPECT_EQ(field(tensor, "scores"), tensor.scores);
  EXPECT_EQ(field(op, "kernel"), "delta");
  EXPECT_EQ(field(op, "block"), std::to_string(op.delta.block));
  EXPECT_EQ(field(op, "fixed_width"), "yes");
  EXPECT_EQ(field(op, "scores"), "float FMA");
  EXPECT_EQ(field(plan(32, 64, 4), "scores").rfind("TF32 mma.sync", 0), 0u);
  EXPECT_EQ(field(plan(2, 16, 4), "cells").rfind("64 x 64", 0), 0u) << field(plan(2, 16, 4), "cells");
  EXPECT_EQ(field(plan(2, 16, 4, with("cells=0")), "cells"), "no");
  EXPECT_TRUE(has(field(plan(16, 16, 8, with("classic=1")), "kernel"), "classic"));
}

// The one-pass plan's other decisions: its delta kernel is plan_delta's for the device's shared
// memory; Hamerly's bounds after 1% moved in double and at widths up to 8 in float, never in
// float at d = 16 (nor with the classic kernel), as given where given; the prefetch into L1 in
// float at d = 16 with the FMA scores and with the tensor-core scores at width 32; dependent
// launches on sm_90 only; the float copy's start.
TEST(FusedPlan, OnePassDecisions) {
  for (const auto& dev : {device(90), device(80, 164 * 1024), device(80, 48 * 1024)})
    for (std::size_t d : {1, 2, 4, 16, 32})
      for (std::size_t k : {4, 16, 64})
        for (std::size_t elem : {4, 8}) {
          const auto p = plan(d, k, elem, {}, dev);
          if (!one_pass(p)) continue;
          auto s = shape(d, k, elem);
          s.shared_optin = dev.shared_optin;
          const auto delta = km::gpu::plan_delta(s, {});
          EXPECT_EQ(p.delta.describe(), delta.describe()) << d << " " << k << " " << elem;
          EXPECT_EQ(p.delta.bytes, delta.bytes);
          EXPECT_EQ(p.delta.block, delta.block);
        }
  EXPECT_EQ(plan(16, 16, 4).prefetch, 1);
  EXPECT_EQ(plan(16, 16, 8).prefetch, 0);
  EXPECT_EQ(plan(32, 64, 4).prefetch, 1) << "tensor-core scores at width 32";
  EXPECT_EQ(plan(16, 16, 8, with("prefetch=1")).prefetch, 1);
  EXPECT_TRUE(plan(16, 16, 8, {}, device(90)).dependent_launch);
  EXPECT_FALSE(plan(16, 16, 8, {}, device(80)).dependent_launch) << "programmatic dependent launches need sm_90";
  EXPECT_FALSE(plan(16, 16, 8, with("dependent_launch=0"), device(90)).dependent_launch);
  EXPECT_FALSE(plan(16, 16, 8, with("launch_ahead=0")).launch_ahead);
  EXPECT_EQ(plan(16, 16, 8).float_copy_after, 0.25);
  EXPECT_EQ(plan(16, 16, 8, with("float_copy_after=1")).float_copy_after, 1.0);
}

}  // namespace
