// libFuzzer target for the kmeans option parser: the input is split on NUL bytes into
// arguments, parsed by the CLI's own options (cli/kmeans_options) and checked, never run.
// CLI11's errors and UsageError/InputError are the expected ends; anything else is a bug.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/kmeans_options.hpp"
#include "common/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  std::vector<std::string> args = {"kmeans"};
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    if (bytes[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(bytes[i]);
    }
  }
  if (!current.empty()) args.push_back(current);
  if (args.size() > 64) return 0;
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  km::cli::KmeansOptions o;
  CLI::App app{"kmeans", "kmeans"};
  km::cli::add_kmeans_options(app, o);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    km::cli::check_kmeans_options(app, o);
  } catch (const CLI::Error&) {
  } catch (const km::UsageError&) {
  } catch (const km::InputError&) {
  }
  return 0;
}
