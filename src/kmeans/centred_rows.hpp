// A centred TF32 copy of the data on the device, made once and read by both the k-means||
// initialisation's tensor-core rounds (gpu/tensor_nearest.cu) and fused's tensor path
// (gpu/fused/tensor.cu), which would otherwise each make their own: fused's engine makes it while it
// stages the data (Engine::stage, timed as setup), the initialisation borrows it, and setup
// adopts it (1,000,000 x 128 in double: 512 MB written and ~1.5 ms less of the init).
#pragma once

#include <limits>
#include <vector>

namespace km {

struct CentredRows {
  const float* rows = nullptr;     // [n][d] on the device: x - mu rounded to TF32 (cvt.rna)
  const double* norms2 = nullptr;  // [n] on the device: |x - mu|^2 in double, x - mu in T
  std::vector<double> mean;        // mu (d values of T, exactly): sampled_mean of the device rows
  double max_abs = -std::numeric_limits<double>::infinity();  // the largest |x_ij| when known, else -inf
};

}  // namespace km
