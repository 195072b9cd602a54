// The driver's stop rules as one function for the host and the device: the driver asks it after
// each iteration (src/kmeans/driver.cpp: should_stop), and fused's delta kernel asks it in its last
// block, so that the kernel queued behind it (launched ahead) knows whether to run at all
// (6_fused_delta.cuh: DeltaPass::gate). The same arithmetic in both places gives the same verdict.
#pragma once

#include "kernels/kmeans/layouts.hpp"  // KM_HOST_DEVICE

namespace km::kernels {

// Stop when at most changed_limit objects changed cluster (the lab rule: threshold * n, 0 for
// "none moved"), or when shift_limit >= 0 (scikit-learn's tol; negative: none) and the summed
// squared centroid shift is at most shift_limit. (A negative tol never stops the fit either way.)
KM_HOST_DEVICE inline bool meets_stop_rule(double changed, double shift, double changed_limit, double shift_limit) {
  return changed <= changed_limit || (shift_limit >= 0 && shift <= shift_limit);
}

}  // namespace km::kernels
