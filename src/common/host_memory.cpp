#include "common/host_memory.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/errors.hpp"

namespace km {

std::size_t available_host_memory() {
  if (const char* env = std::getenv("KMEANS_HOST_MEMORY")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') return static_cast<std::size_t>(v);
  }
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return SIZE_MAX;
  unsigned long long available_kb = 0, swap_kb = 0;
  bool found = false;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long v = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
      available_kb = v;
      found = true;
    } else if (std::sscanf(line, "SwapFree: %llu kB", &v) == 1) {
      swap_kb = v;
    }
  }
  std::fclose(f);
  return found ? static_cast<std::size_t>((available_kb + swap_kb) * 1024ull) : SIZE_MAX;
}

void check_host_memory(double bytes, const std::string& what) {
  if (bytes < 64.0 * 1048576) return;  // not worth a read of /proc/meminfo
  const std::size_t available = available_host_memory();
  if (available != SIZE_MAX && bytes > static_cast<double>(available))
    throw InputError(strprintf("%s needs %.2f GiB of host memory but %.2f GiB are available", what.c_str(),
                               bytes / 1073741824.0, available / 1073741824.0));
}

}  // namespace km
