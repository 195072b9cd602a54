// Host memory, checked before large allocations so that a problem too big for the machine
// ends in one clear line instead of an OOM kill (Linux overcommits: an allocation that
// cannot be backed fails only when its pages are touched).
#pragma once

#include <cstddef>
#include <string>

namespace km {

// Bytes this process can still use: MemAvailable + SwapFree from /proc/meminfo, or less where a
// memory cgroup (a container's limit: docker --memory) leaves less (cgroup_room); or the
// environment's KMEANS_HOST_MEMORY (bytes: the whole budget, less what this process already
// holds resident) where the kernel's figures mislead (virtual machines whose memory grows as
// it is used). SIZE_MAX when unknown.
std::size_t available_host_memory();

// The room the memory cgroups of this process leave it: the least, over its cgroup and that
// cgroup's ancestors with a limit, of the limit less the usage other than page cache (which the
// kernel reclaims under the limit); cgroup v2 (memory.max, memory.current, memory.stat's file)
// and v1 (memory.limit_in_bytes, memory.usage_in_bytes, total_cache). Swap the cgroup may use
// is not counted (a stricter figure than /proc/meminfo's).
// `proc_cgroup`: /proc/self/cgroup's text; `root`: where the hierarchies are mounted
// (/sys/fs/cgroup: v2 there or under unified/, v1's memory controller under memory/). SIZE_MAX
// when no limit applies or none can be read.
std::size_t cgroup_room(const std::string& proc_cgroup, const std::string& root = "/sys/fs/cgroup");

// Throws InputError "<what> needs X GiB of host memory but Y GiB are available" (MiB below
// a GiB) when
// `bytes` is more than available_host_memory().
void check_host_memory(double bytes, const std::string& what);

}  // namespace km
