// What the host knows about the GPU, free of CUDA types so that any host code (the CLIs,
// the registries' supports() answers, the tests) can include it.
#pragma once

#include <cstddef>
#include <string>

namespace km {

struct GpuInfo {
  bool present = false;
  std::string name;                 // e.g. "NVIDIA H100 80GB HBM3"
  std::string why_absent;           // when !present: the CUDA runtime's reason
  std::size_t shared_optin = 0;     // dynamic shared memory one block may opt in to, bytes
  int multiprocessors = 0;
  int compute_capability = 0;       // major * 10 + minor, e.g. 90
};

// Device 0, queried once and cached; never throws.
const GpuInfo& gpu_info();

// The current device, asked each time (they throw DeviceError when CUDA fails).
std::size_t max_shared_bytes();
int multiprocessor_count();
int compute_capability();
std::string device_name();
// The current device's index, and how many devices the runtime sees (0 when none is usable).
int current_device();
int device_count();

// Throws DeviceError before any allocation when `bytes` (plus room for the runtime and
// cuBLAS workspaces) will not fit in the current device's free memory. `what` names the
// request ("--impl=fused"), `hint` says what to try instead.
void check_device_memory(std::size_t bytes, const std::string& what, const std::string& hint);

}  // namespace km
