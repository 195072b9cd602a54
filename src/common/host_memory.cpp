#include "common/host_memory.hpp"

#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "common/errors.hpp"

namespace km {

namespace {

// This process's resident bytes (/proc/self/statm), 0 when unknown.
std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  const long page = sysconf(_SC_PAGESIZE);
  return got == 2 && page > 0 ? static_cast<std::size_t>(resident * static_cast<unsigned long long>(page)) : 0;
}

// "1.50 GiB", or below a GiB "12.3 MiB".
std::string amount(double bytes) {
  return bytes >= 1073741824.0 ? strprintf("%.2f GiB", bytes / 1073741824.0) : strprintf("%.1f MiB", bytes / 1048576.0);
}

}  // namespace

std::size_t available_host_memory() {
  if (const char* env = std::getenv("KMEANS_HOST_MEMORY")) {
    // digits, optionally followed by one of K, M, G, T (powers of 1024, either case); anything
    // else, or more than 64 bits, is refused, not ignored
    const char* end = env;
    unsigned long long v = 0;
    bool ok = *env >= '0' && *env <= '9';
    for (; ok && *end >= '0' && *end <= '9'; ++end) {
      const unsigned digit = static_cast<unsigned>(*end - '0');
      ok = v <= (ULLONG_MAX - digit) / 10;
      v = v * 10 + digit;
    }
    if (ok && *end != '\0') {
      const char* units = "KMGT";
      const char* unit = std::strchr(units, std::toupper(static_cast<unsigned char>(*end)));
      const int shift = unit ? 10 * static_cast<int>(unit - units + 1) : 0;
      ok = unit && end[1] == '\0' && v <= (ULLONG_MAX >> shift);
      if (ok) v <<= shift;
    }
    if (!ok)
      throw UsageError(strprintf("KMEANS_HOST_MEMORY=%s: must be a number of bytes, optionally with K, M, G or T",
                                 env));
    const std::size_t held = resident_bytes();  // the whole budget: less what this process already holds
    return v > held ? static_cast<std::size_t>(v - held) : 0;
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
    throw InputError(strprintf("%s needs %s of host memory but %s are available", what.c_str(), amount(bytes).c_str(),
                               amount(static_cast<double>(available)).c_str()));
}

}  // namespace km
