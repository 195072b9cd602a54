#include "common/host_memory.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

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

// A file's first line as a number of bytes; false for "max", a missing file or anything else.
bool read_bytes(const std::string& path, unsigned long long& out) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word.empty() || !std::isdigit(static_cast<unsigned char>(word[0]))) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(word.c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}

// The value of `key` in a memory.stat file, 0 when absent.
unsigned long long stat_value(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string name;
  unsigned long long v = 0;
  while (f >> name >> v)
    if (name == key) return v;
  return 0;
}

// The least room over `dir` (a cgroup's folder under `mount`, "/" its root) and its ancestors.
// The page cache (`cache_key` of memory.stat) is not counted as held: the kernel reclaims it
// under the limit, as MemAvailable counts it available.
std::size_t room_up_from(const std::string& mount, std::string dir, const char* limit_file, const char* usage_file,
                         const char* cache_key) {
  std::size_t room = SIZE_MAX;
  while (true) {
    const std::string at = mount + (dir == "/" ? "" : dir);
    unsigned long long limit = 0, usage = 0;
    if (read_bytes(at + "/" + limit_file, limit) && limit < (1ull << 62) && read_bytes(at + "/" + usage_file, usage)) {
      const unsigned long long cache = stat_value(at + "/memory.stat", cache_key);
      const unsigned long long held = usage > cache ? usage - cache : 0;
      room = std::min<std::size_t>(room, limit > held ? static_cast<std::size_t>(limit - held) : 0);
    }
    if (dir.empty() || dir == "/") return room;
    const std::size_t slash = dir.find_last_of('/');
    dir = slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
  }
}

// "1.50 GiB", or below a GiB "12.3 MiB".
std::string amount(double bytes) {
  return bytes >= 1073741824.0 ? strprintf("%.2f GiB", bytes / 1073741824.0) : strprintf("%.1f MiB", bytes / 1048576.0);
}

}  // namespace

std::size_t cgroup_room(const std::string& proc_cgroup, const std::string& root) {
  std::size_t room = SIZE_MAX;
  std::istringstream lines(proc_cgroup);
  std::string line;
  while (std::getline(lines, line)) {  // "id:controllers:path"
    const std::size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = ",";  // (appended, not "," + ...: GCC 12's -Wrestrict false alarm)
    controllers.append(line, a + 1, b - a - 1).append(",");
    const std::string path = line.substr(b + 1);
    if (controllers == ",,") {  // v2: the unified hierarchy
      for (const char* under : {"", "/unified"})
        room = std::min(room, room_up_from(root + under, path, "memory.max", "memory.current", "file"));
    } else if (controllers.find(",memory,") != std::string::npos) {
      room = std::min(room, room_up_from(root + "/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes",
                                         "total_cache"));
    }
  }
  return room;
}

// KMEANS_HOST_MEMORY's bytes, or nothing when it is not set: digits, optionally followed by one
// of K, M, G, T (powers of 1024, either case); anything else, or more than 64 bits, is refused,
// not ignored.
static std::optional<unsigned long long> host_memory_setting() {
  const char* env = std::getenv("KMEANS_HOST_MEMORY");
  if (!env) return std::nullopt;
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
    throw UsageError(strprintf("KMEANS_HOST_MEMORY=%s: must be a number of bytes, optionally with K, M, G or T", env));
  return v;
}

std::size_t available_host_memory() {
  if (const auto v = host_memory_setting()) {
    const std::size_t held = resident_bytes();  // the whole budget: less what this process already holds
    return *v > held ? static_cast<std::size_t>(*v - held) : 0;
  }
  std::size_t room = SIZE_MAX;
  if (std::ifstream cgroups{"/proc/self/cgroup"}) {
    std::ostringstream text;
    text << cgroups.rdbuf();
    room = cgroup_room(text.str());
  }
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return room;
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
  return found ? std::min(room, static_cast<std::size_t>((available_kb + swap_kb) * 1024ull)) : room;
}

void check_host_memory(double bytes, const std::string& what) {
  if (bytes < 64.0 * 1048576) {  // not worth a read of /proc/meminfo; a bad setting is refused still
    host_memory_setting();
    return;
  }
  const std::size_t available = available_host_memory();
  if (available != SIZE_MAX && bytes > static_cast<double>(available))
    throw InputError(strprintf("%s needs %s of host memory but %s are available", what.c_str(), amount(bytes).c_str(),
                               amount(static_cast<double>(available)).c_str()));
}

}  // namespace km
