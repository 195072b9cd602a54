#include "kmeans/tuning.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "common/errors.hpp"

namespace km {

namespace {

[[noreturn]] void bad(const std::string& name, const std::string& value, const char* want) {
  throw UsageError("--fused-config: " + name + "=" + value + ": want " + want);
}

bool parse_bool(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  bad(name, v, "0 or 1");
}

double parse_double(const std::string& name, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno != 0 || !std::isfinite(x) || x < 0) bad(name, v, "a number >= 0");
  return x;
}

int parse_int(const std::string& name, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
    bad(name, v, ("an integer in " + std::to_string(lo) + ".." + std::to_string(hi)).c_str());
  return static_cast<int>(x);
}

std::string show(bool b) { return b ? "1" : "0"; }
std::string show(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}
template <class V>
std::string show(const std::optional<V>& v) {
  return v ? show(*v) : "auto";
}

// One row per field: its name, how to set it from text, how to print it.
struct Field {
  const char* name;
  std::function<void(FusedConfig&, const std::string&)> set;
  std::function<std::string(const FusedConfig&)> get;
};

#define KM_BOOL(field, key)                                                               \
  Field{key, [](FusedConfig& c, const std::string& v) { c.field = parse_bool(key, v); }, \
        [](const FusedConfig& c) { return show(c.field); }}
#define KM_OPT_BOOL(field, key)                                                          \
  Field{key,                                                                             \
        [](FusedConfig& c, const std::string& v) {                                       \
          if (v == "auto") c.field.reset();                                              \
          else c.field = parse_bool(key, v);                                             \
        },                                                                               \
        [](const FusedConfig& c) { return show(c.field); }}
#define KM_OPT_DOUBLE(field, key)                                                        \
  Field{key,                                                                             \
        [](FusedConfig& c, const std::string& v) {                                       \
          if (v == "auto") c.field.reset();                                              \
          else c.field = parse_double(key, v);                                           \
        },                                                                               \
        [](const FusedConfig& c) { return show(c.field); }}

const std::vector<Field>& fields() {
  static const std::vector<Field> all = {
      Field{"path",
            [](FusedConfig& c, const std::string& v) {
              if (v == "auto") c.path = FusedConfig::Path::automatic;
              else if (v == "one-pass") c.path = FusedConfig::Path::one_pass;
              else if (v == "tensor") c.path = FusedConfig::Path::tensor;
              else bad("path", v, "auto, one-pass or tensor");
            },
            [](const FusedConfig& c) {
              return std::string(c.path == FusedConfig::Path::automatic ? "auto"
                                 : c.path == FusedConfig::Path::one_pass ? "one-pass"
                                                                         : "tensor");
            }},
      KM_BOOL(classic, "classic"),
      KM_BOOL(fixed_width, "fixed_width"),
      KM_OPT_BOOL(ball, "ball"),
      Field{"cells",
            [](FusedConfig& c, const std::string& v) {
              if (v == "auto") return c.cells.reset();
              const int side = parse_int("cells", v, 0, 256);
              if (side % 4 != 0 || (side > 0 && side < 4)) bad("cells", v, "0 or a multiple of 4 up to 256");
              c.cells = side;
            },
            [](const FusedConfig& c) { return c.cells ? std::to_string(*c.cells) : std::string("auto"); }},
      KM_OPT_BOOL(mma, "mma"),
      KM_OPT_BOOL(staged, "staged"),
      KM_OPT_BOOL(float_copy, "float_copy"),
      KM_OPT_DOUBLE(float_copy_after, "float_copy_after"),
      KM_BOOL(copy_rows, "copy_rows"),
      Field{"guard", [](FusedConfig& c, const std::string& v) { c.guard = parse_double("guard", v); },
            [](const FusedConfig& c) { return show(c.guard); }},
      Field{"prefetch",
            [](FusedConfig& c, const std::string& v) {
              if (v == "auto") c.prefetch.reset();
              else c.prefetch = parse_int("prefetch", v, 0, 1);
            },
            [](const FusedConfig& c) { return c.prefetch ? std::to_string(*c.prefetch) : std::string("auto"); }},
      KM_BOOL(exact_addends, "exact_addends"),
      KM_BOOL(launch_ahead, "launch_ahead"),
      KM_BOOL(dependent_launch, "dependent_launch"),
      KM_BOOL(iteration_events, "events"),
      KM_BOOL(lean_cells, "lean_cells"),
      KM_BOOL(dynamic_chunks, "dynamic_chunks"),
      Field{"cell_candidates",
            [](FusedConfig& c, const std::string& v) {
              using C = FusedConfig::Candidates;
              if (v == "auto") c.cell_candidates = C::automatic;
              else if (v == "0" || v == "off") c.cell_candidates = C::off;
              else if (v == "1" || v == "on") c.cell_candidates = C::on;
              else if (v == "global") c.cell_candidates = C::global;
              else bad("cell_candidates", v, "auto, 0, 1 or global");
            },
            [](const FusedConfig& c) {
              using C = FusedConfig::Candidates;
              return std::string(c.cell_candidates == C::automatic ? "auto"
                                 : c.cell_candidates == C::off     ? "0"
                                 : c.cell_candidates == C::on      ? "1"
                                                                   : "global");
            }},
      KM_OPT_BOOL(sorted, "sorted"),
      KM_BOOL(wgmma, "wgmma"),
      KM_BOOL(tf32_in_double, "tf32_in_double"),
      KM_BOOL(tensor_copy, "tensor_copy"),
      KM_BOOL(f16_scores, "f16_scores"),
      KM_OPT_DOUBLE(movers_after, "movers_after"),
      KM_BOOL(share_copy, "share_copy"),
      Field{"share", [](FusedConfig& c, const std::string& v) { c.share = parse_int("share", v, 1, 1 << 20); },
            [](const FusedConfig& c) { return std::to_string(c.share); }},
  };
  return all;
}

#undef KM_BOOL
#undef KM_OPT_BOOL
#undef KM_OPT_DOUBLE

}  // namespace

void apply_fused_config(FusedConfig& config, const std::string& spec) {
  std::size_t at = 0;
  while (at <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    at = comma + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) throw UsageError("--fused-config: '" + item + "': want name=value");
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    bool found = false;
    for (const Field& f : fields())
      if (name == f.name) {
        f.set(config, value);
        found = true;
      }
    if (!found) {
      std::string names;
      for (const Field& f : fields()) names += (names.empty() ? "" : ", ") + std::string(f.name);
      throw UsageError("--fused-config: no field '" + name + "' (fields: " + names + ")");
    }
  }
}

std::vector<std::string> describe_fused_config(const FusedConfig& config) {
  std::vector<std::string> out;
  for (const Field& f : fields()) out.push_back(std::string(f.name) + "=" + f.get(config));
  return out;
}

}  // namespace km
