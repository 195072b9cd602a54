// libFuzzer target for the centroid files of --init=PATH and --predict=PATH: the first byte picks
// the option, the format (.csv, .txt, .npy, .bin), the precision and K; the other bytes become the
// file, read and checked by the CLI's own options code (cli/kmeans_options: load_given_centroids:
// K rows of d values, finite, within float's range in float), never run. CLI11's errors and
// UsageError/InputError are the expected ends; anything else is a bug (abort).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "cli/kmeans_options.hpp"
#include "common/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  if (size == 0) return 0;
  static const char* const exts[] = {".csv", ".txt", ".npy", ".bin"};
  const unsigned pick = bytes[0];
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/km-fuzz-centroids-" +
                           std::to_string(::getpid()) + exts[pick & 3];
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 1 && std::fwrite(bytes + 1, 1, size - 1, f) != size - 1) std::abort();
  std::fclose(f);
  const std::string option = (pick & 4) ? "--predict=" : "--init=";
  std::vector<std::string> args = {"kmeans", option + path, "--clusters=" + std::to_string(1 + ((pick >> 4) & 7)),
                                   (pick & 8) ? "--precision=float" : "--precision=double"};
  if (pick & 128) args.push_back("--coords=3");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  km::cli::KmeansOptions o;
  CLI::App app{"kmeans", "kmeans"};
  km::cli::add_kmeans_options(app, o);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    const km::Params p = km::cli::check_kmeans_options(app, o);
    if (p.given_centroids.size() != static_cast<std::size_t>(p.k) * p.given_d) std::abort();
  } catch (const CLI::Error&) {
  } catch (const km::UsageError&) {
  } catch (const km::InputError&) {
  } catch (const std::bad_alloc&) {  // main reports it as one line
  }
  std::remove(path.c_str());
  return 0;
}
