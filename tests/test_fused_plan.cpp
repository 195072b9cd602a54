// fused's typed configuration and its plan on the CPU: km::apply_fused_config sets every
// FusedConfig field by the name describe_fused_config prints (and refuses, naming the field,
// what it cannot set); km::gpu::plan_fused picks the path at the measured crossover, obeys a
// forced path where the path can run, names the tensor cores' scores per precision and device,
// and reports itself in describe() and fields().
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/gpu/fused_plan.hpp"
#include "kmeans/tuning.hpp"
#include "test_util.hpp"

namespace {

using Config = km::FusedConfig;

// One field set away from its default: the text that sets it, and what it must have set.
struct FieldCase {
  std::string name, value;
  std::function<bool(const Config&)> holds;
};

const std::vector<FieldCase>& field_cases() {
  static const std::vector<FieldCase> cases = {
      {"path", "one-pass", [](const Config& c) { return c.path == Config::Path::one_pass; }},
      {"path", "tensor", [](const Config& c) { return c.path == Config::Path::tensor; }},
      {"classic", "1", [](const Config& c) { return c.classic; }},
      {"fixed_width", "0", [](const Config& c) { return !c.fixed_width; }},
      {"ball", "1", [](const Config& c) { return c.ball == true; }},
      {"ball", "0", [](const Config& c) { return c.ball == false; }},
      {"cells", "128", [](const Config& c) { return c.cells == 128; }},
      {"cells", "0", [](const Config& c) { return c.cells == 0; }},
      {"mma", "1", [](const Config& c) { return c.mma == true; }},
      {"staged", "0", [](const Config& c) { return c.staged == false; }},
      {"ring_xy", "1", [](const Config& c) { return c.ring_xy == true; }},
      {"float_copy", "0", [](const Config& c) { return c.float_copy == false; }},
      {"float_copy_after", "0.5", [](const Config& c) { return c.float_copy_after == 0.5; }},
      {"copy_rows", "0", [](const Config& c) { return !c.copy_rows; }},
      {"bounds_after", "0.05", [](const Config& c) { return c.bounds_after == 0.05; }},
      {"bounds_after", "1", [](const Config& c) { return c.bounds_after == 1.0; }},
      {"guard", "0", [](const Config& c) { return c.guard == 0.0; }},
      {"prefetch", "2", [](const Config& c) { return c.prefetch == 2; }},
      {"exact_addends", "1", [](const Config& c) { return c.exact_addends; }},
      {"launch_ahead", "0", [](const Config& c) { return !c.launch_ahead; }},
      {"dependent_launch", "0", [](const Config& c) { return !c.dependent_launch; }},
      {"prefetch_first", "3", [](const Config& c) { return c.prefetch_first == 3; }},
      {"early_release", "0", [](const Config& c) { return !c.early_release; }},
      {"events", "1", [](const Config& c) { return c.iteration_events; }},
      {"lean_cells", "0", [](const Config& c) { return !c.lean_cells; }},
      {"dynamic_chunks", "0", [](const Config& c) { return !c.dynamic_chunks; }},
      {"cell_candidates", "0", [](const Config& c) { return c.cell_candidates == Config::Candidates::off; }},
      {"cell_candidates", "1", [](const Config& c) { return c.cell_candidates == Config::Candidates::on; }},
      {"cell_candidates", "global", [](const Config& c) { return c.cell_candidates == Config::Candidates::global; }},
      {"sorted", "1", [](const Config& c) { return c.sorted == true; }},
      {"wgmma", "0", [](const Config& c) { return !c.wgmma; }},
      {"tf32_in_double", "0", [](const Config& c) { return !c.tf32_in_double; }},
      {"tensor_copy", "0", [](const Config& c) { return !c.tensor_copy; }},
      {"movers_after", "0.3", [](const Config& c) { return c.movers_after == 0.3; }},
      {"share_copy", "0", [](const Config& c) { return !c.share_copy; }},
  };
  return cases;
}

std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

std::string joined(const std::vector<std::string>& entries) {
  std::string out;
  for (const std::string& e : entries) out += (out.empty() ? "" : ",") + e;
  return out;
}

}  // namespace

// Every field describe_fused_config prints has a case above (a field added without one fails
// here), and each case sets its field, shows in the description as written, changes no other
// entry, and round-trips: the whole description applied to a default config gives it back.
TEST(FusedConfig, EveryFieldRoundTripsThroughItsName) {
  const std::vector<std::string> defaults = km::describe_fused_config({});
  std::vector<std::string> names;
  for (const std::string& e : defaults) names.push_back(name_of(e));
  for (const std::string& name : names) {
    EXPECT_TRUE(std::any_of(field_cases().begin(), field_cases().end(),
                            [&](const FieldCase& c) { return c.name == name; }))
        << "no case sets '" << name << "'";
  }
  {
    Config same;
    km::apply_fused_config(same, joined(defaults));
    EXPECT_EQ(km::describe_fused_config(same), defaults) << "the defaults as text are the defaults";
  }
  for (const FieldCase& fc : field_cases()) {
    SCOPED_TRACE(fc.name + "=" + fc.value);
    ASSERT_NE(std::find(names.begin(), names.end(), fc.name), names.end()) << "not a described field";
    Config c;
    ASSERT_FALSE(fc.holds(c)) << "the case's value is the default: it tests nothing";
    km::apply_fused_config(c, fc.name + "=" + fc.value);
    EXPECT_TRUE(fc.holds(c)) << "the field was not set";
    const std::vector<std::string> described = km::describe_fused_config(c);
    ASSERT_EQ(described.size(), defaults.size());
    for (std::size_t i = 0; i < described.size(); ++i) {
      if (name_of(described[i]) == fc.name) {
        EXPECT_EQ(described[i], fc.name + "=" + fc.value);
      } else {
        EXPECT_EQ(described[i], defaults[i]) << "another field changed";
      }
    }
    Config again;
    km::apply_fused_config(again, joined(described));
    EXPECT_TRUE(fc.holds(again));
    EXPECT_EQ(km::describe_fused_config(again), described);
  }
}

// Several fields in one spec, later ones winning; "auto" gives an optional back to the plan;
// the boolean spellings; empty items ignored.
TEST(FusedConfig, SpecsCombineAndAutoResets) {
  Config c;
  km::apply_fused_config(c, "mma=1,staged=0,,bounds_after=0.5,mma=0,");
  EXPECT_EQ(c.mma, false);
  EXPECT_EQ(c.staged, false);
  EXPECT_EQ(c.bounds_after, 0.5);
  km::apply_fused_config(c, "mma=auto,bounds_after=auto,cells=64,cells=auto,prefetch=1,prefetch=auto");
  EXPECT_FALSE(c.mma.has_value());
  EXPECT_FALSE(c.bounds_after.has_value());
  EXPECT_FALSE(c.cells.has_value());
  EXPECT_FALSE(c.prefetch.has_value());
  km::apply_fused_config(c, "path=tensor,cell_candidates=global");
  km::apply_fused_config(c, "path=auto,cell_candidates=auto");
  EXPECT_EQ(c.path, Config::Path::automatic);
  EXPECT_EQ(c.cell_candidates, Config::Candidates::automatic);
  for (const char* yes : {"1", "true", "on"}) {
    Config b;
    km::apply_fused_config(b, std::string("classic=") + yes);
    EXPECT_TRUE(b.classic) << yes;
  }
  for (const char* no : {"0", "false", "off"}) {
    Config b;
    km::apply_fused_config(b, std::string("launch_ahead=") + no);
    EXPECT_FALSE(b.launch_ahead) << no;
  }
  Config untouched;
  km::apply_fused_config(untouched, "");
  km::apply_fused_config(untouched, ",,");
  EXPECT_EQ(km::describe_fused_config(untouched), km::describe_fused_config({}));
}

// An unknown name, an item without '=', and every kind of bad value: one UsageError, on one
// line, naming the field (and the value) that is wrong.
TEST(FusedConfig, UnknownNamesAndBadValuesNameTheField) {
  const auto refused = [](const std::string& spec, const std::string& needle) {
    SCOPED_TRACE(spec);
    Config c;
    kmtest::expect_error<km::UsageError>([&] { km::apply_fused_config(c, spec); }, needle);
  };
  refused("warp_drive=1", "no field 'warp_drive'");
  refused("warp_drive=1", "mma");  // ... and the fields there are
  refused("mma=1,Mma=1", "no field 'Mma'");
  refused("mma", "'mma': want name=value");
  refused("=1", "no field ''");
  for (const char* spec : {"mma=2", "mma=", "classic=yes", "events=-1", "path=fast", "path=onepass",
                           "cells=5", "cells=2", "cells=260", "cells=-4", "cells=x", "prefetch=3", "prefetch=-1",
                           "prefetch_first=65", "prefetch_first=1.5", "guard=-1", "guard=x", "guard=inf",
                           "bounds_after=nan", "bounds_after=0.1x", "bounds_after=-0.5", "float_copy_after=",
                           "movers_after=1e999", "cell_candidates=2", "cell_candidates=maybe", "sorted=auto2"})
    refused(spec, spec);
  Config c;
  try {
    km::apply_fused_config(c, "staged=0,cells=5");
    ADD_FAILURE() << "cells=5 accepted";
  } catch (const km::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cells=5"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("staged"), std::string::npos) << "names the wrong field: " << e.what();
  }
}

// ------------------------------------------------------------------ plan_fused

namespace {

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

}  // namespace

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
  const std::string f128_90 = plan(128, 256, 4, {}, device(90)).scores;
  EXPECT_TRUE(has(f128_90, "TF32 wgmma")) << f128_90;
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
  EXPECT_EQ(plan(16, 16, 8).bounds_after, 0.01) << "double";
  EXPECT_EQ(plan(16, 16, 4).bounds_after, 0.0) << "float at d = 16";
  EXPECT_EQ(plan(8, 16, 4).bounds_after, 0.01) << "float at width 8";
  EXPECT_EQ(plan(2, 16, 4).bounds_after, 0.01);
  EXPECT_EQ(plan(16, 16, 4, with("bounds_after=0.05")).bounds_after, 0.05);
  EXPECT_EQ(plan(16, 16, 8, with("bounds_after=0")).bounds_after, 0.0);
  EXPECT_EQ(plan(16, 16, 8, with("classic=1")).bounds_after, 0.0) << "the bounds are the delta kernel's";
  EXPECT_EQ(field(plan(16, 16, 8), "bounds"), "after 0.01 moved (where room)");
  EXPECT_EQ(field(plan(16, 16, 4), "bounds"), "no");
  EXPECT_EQ(plan(16, 16, 4).prefetch, 1);
  EXPECT_EQ(plan(16, 16, 8).prefetch, 0);
  EXPECT_EQ(plan(32, 64, 4).prefetch, 1) << "tensor-core scores at width 32";
  EXPECT_EQ(plan(16, 16, 8, with("prefetch=2")).prefetch, 2);
  EXPECT_TRUE(plan(16, 16, 8, {}, device(90)).dependent_launch);
  EXPECT_FALSE(plan(16, 16, 8, {}, device(80)).dependent_launch) << "programmatic dependent launches need sm_90";
  EXPECT_FALSE(plan(16, 16, 8, with("dependent_launch=0"), device(90)).dependent_launch);
  EXPECT_FALSE(plan(16, 16, 8, with("launch_ahead=0")).launch_ahead);
  EXPECT_FALSE(plan(16, 16, 8, with("early_release=0")).early_release);
  EXPECT_EQ(plan(16, 16, 8).float_copy_after, 0.25);
  EXPECT_EQ(plan(16, 16, 8, with("float_copy_after=1")).float_copy_after, 1.0);
}
