// What the host knows about the GPU, without launching anything.
#pragma once

#include <string>

namespace km {

struct GpuInfo {
  bool present = false;
  std::string name;        // e.g. "NVIDIA H100 80GB HBM3"
  std::string why_absent;  // when !present: the CUDA runtime's reason
};

// Queries device 0 once and caches the answer.
const GpuInfo& gpu_info();

}  // namespace km
