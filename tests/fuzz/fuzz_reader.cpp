// libFuzzer target for one reader: the input bytes become a file with the extension
// KM_FUZZ_EXT (".csv", ".txt", ".npy", ".bin", ".h5") and go through km::load in both
// precisions. A clean InputError/UsageError is the expected end for bad bytes; a crash, a
// hang, a sanitizer report or any other exception is a bug (abort).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "common/errors.hpp"
#include "io/load.hpp"

#ifndef KM_FUZZ_EXT
#error "build with -DKM_FUZZ_EXT=\".csv\" (or .txt, .npy, .bin, .h5)"
#endif

namespace {

const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/km-fuzz-" + std::to_string(::getpid()) + KM_FUZZ_EXT;
  }();
  return path;
}

template <class T>
void load_once(const std::string& path) {
  try {
    km::LoadOptions options;
    const km::Dataset<T> data = km::load<T>(path, options);
    if (data.n == 0 || data.d == 0) std::abort();  // a dataset is never empty
  } catch (const km::InputError&) {
  } catch (const km::UsageError&) {
  } catch (const std::bad_alloc&) {  // main reports it as one line
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string& path = scratch_path();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(bytes, 1, size, f) != size) std::abort();
  std::fclose(f);
  load_once<double>(path);
  load_once<float>(path);
  std::remove(path.c_str());
  return 0;
}
