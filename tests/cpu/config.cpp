// fused's typed configuration (kmeans/tuning.hpp): km::apply_fused_config sets every FusedConfig
// field by the name describe_fused_config prints, and refuses, naming the field and value, what
// it cannot set.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "kmeans/tuning.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

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
      {"float_copy", "0", [](const Config& c) { return c.float_copy == false; }},
      {"float_copy_after", "0.5", [](const Config& c) { return c.float_copy_after == 0.5; }},
      {"copy_rows", "0", [](const Config& c) { return !c.copy_rows; }},
      {"guard", "0", [](const Config& c) { return c.guard == 0.0; }},
      {"prefetch", "1", [](const Config& c) { return c.prefetch == 1; }},
      {"prefetch", "0", [](const Config& c) { return c.prefetch == 0; }},
      {"exact_addends", "1", [](const Config& c) { return c.exact_addends; }},
      {"launch_ahead", "0", [](const Config& c) { return !c.launch_ahead; }},
      {"dependent_launch", "0", [](const Config& c) { return !c.dependent_launch; }},
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
      {"f16_scores", "0", [](const Config& c) { return !c.f16_scores; }},
      {"movers_after", "0.3", [](const Config& c) { return c.movers_after == 0.3; }},
      {"share_copy", "0", [](const Config& c) { return !c.share_copy; }},
      {"share", "32", [](const Config& c) { return c.share == 32; }},
  };
  return cases;
}

std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

std::string joined(const std::vector<std::string>& entries) {
  std::string out;
  for (const std::string& e : entries) out += (out.empty() ? "" : ",") + e;
  return out;
}

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
  km::apply_fused_config(c, "mma=1,staged=0,,float_copy_after=0.5,mma=0,");
  EXPECT_EQ(c.mma, false);
  EXPECT_EQ(c.staged, false);
  EXPECT_EQ(c.float_copy_after, 0.5);
  km::apply_fused_config(c, "mma=auto,float_copy_after=auto,cells=64,cells=auto,prefetch=1,prefetch=auto");
  EXPECT_FALSE(c.mma.has_value());
  EXPECT_FALSE(c.float_copy_after.has_value());
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
  refused("ring_xy=1", "no field 'ring_xy'");  // (removed: measured no faster)
  refused("bounds_after=0.1", "no field 'bounds_after'");
  for (const char* spec : {"mma=2", "mma=", "classic=yes", "events=-1", "path=fast", "path=onepass",
                           "cells=5", "cells=2", "cells=260", "cells=-4", "cells=x", "prefetch=3", "prefetch=-1",
                           "prefetch=2", "guard=-1", "guard=x", "guard=inf",
                           "float_copy_after=nan", "float_copy_after=0.1x", "float_copy_after=-0.5", "float_copy_after=",
                           "movers_after=1e999", "cell_candidates=2", "cell_candidates=maybe", "sorted=auto2", "share=0"})
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

}  // namespace
