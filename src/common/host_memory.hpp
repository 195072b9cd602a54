// Host memory, checked before large allocations so that a problem too big for the machine
// ends in one clear line instead of an OOM kill (Linux overcommits: an allocation that
// cannot be backed fails only when its pages are touched).
#pragma once

#include <cstddef>
#include <string>

namespace km {

// Bytes this process can still use: MemAvailable + SwapFree from /proc/meminfo, or the
// environment's KMEANS_HOST_MEMORY (bytes: the whole budget, less what this process already
// holds resident) where the kernel's figure misleads (virtual machines whose memory grows as
// it is used). SIZE_MAX when unknown.
std::size_t available_host_memory();

// Throws InputError "<what> needs X GiB of host memory but Y GiB are available" (MiB below
// a GiB) when
// `bytes` is more than available_host_memory().
void check_host_memory(double bytes, const std::string& what);

}  // namespace km
