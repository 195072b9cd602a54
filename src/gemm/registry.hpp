// The GEMM kernel registry: name → where it runs and a one-line description. The CLI's
// help, the tests and the sweep script all iterate this list.
#pragma once

#include <string>
#include <vector>

namespace km::gemm {

enum class Where { gpu, cpu, hybrid };

struct KernelInfo {
  const char* name;
  Where where;
  bool uses_tile;  // --tile changes it
  const char* description;
};

const std::vector<KernelInfo>& kernels();
// Throws UsageError naming the valid kernels.
const KernelInfo& find_kernel(const std::string& name);
std::string kernels_help();

}  // namespace km::gemm
