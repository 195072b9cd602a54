// fused's tensor-path kernels (kernels/kmeans/6_fused_tensor.cuh, 6_fused_wgmma.cuh) as a table
// for a shape, and their exactness bound: instantiated once, in fused/tensor.cu, and read by fused's
// tensor path and by k-means||'s rounds (tensor_nearest.cu).
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "io/dataset.hpp"
#include "kernels/kmeans/margin.hpp"
#include "kmeans/gpu/fused_wgmma.hpp"

namespace km::gpu {

// The tensor path's kernels for T: FP64 DMMA (m16n8k4 on sm_90, m8n8k4 before) or TF32;
// 16-byte copies when every row starts 16-byte aligned.
template <class T>
struct TensorKernels {
  using Assign = void (*)(const T*, const T*, const T*, const T*, const double*, const double*, double, std::int64_t,
                          int, int, kernels::CandidateBound, std::int32_t*, kernels::Recheck*, std::int64_t*,
                          unsigned long long*, const std::int32_t*);
  Assign assign = nullptr;
  Assign assign_pre = nullptr;  // float: the objects read from a centred, TF32-rounded copy
  std::size_t smem = 0, pre_smem = 0;
  int threads = 0, rows = 0, pre_threads = 0, pre_rows = 0;  // per block
  bool centre_objects = false;
  bool wgmma = false;  // the copy is read by wgmma_kernel (sm_90a), not assign_pre
  WgmmaAssign::Kernel wgmma_kernel = nullptr;
  WgmmaAssign::Kernel wgmma_ceiling = nullptr;  // wgmma_kernel with a ceiling (k-means||'s rounds)
};

// The table for d coordinates on this GPU (fused/tensor.cu; float and double).
template <class T>
TensorKernels<T> tensor_kernels(std::size_t d, bool wgmma = true);

// The tensor path's centre: the mean of objects spread evenly over the first n of the data, in
// double, rounded to T (fused/tensor.cu). Any centre keeps the labels exact (margin.hpp); a central one keeps the
// margin small.
template <class T>
std::vector<T> sampled_mean(const Dataset<T>& data, std::size_t n);
// The same from the first n of `rows` (row-major [n][d], on the device), the same bits.
template <class T>
std::vector<T> sampled_mean(const T* rows, std::size_t n, std::size_t d, cudaStream_t stream);

// The bound of margin.hpp for T's mma: in float, centred objects and centroids rounded to
// TF32 (2^-11), FP32 sums; in double, exact FP64 inputs and sums.
template <class T>
kernels::CandidateBound tensor_bound(std::size_t d) {
  if constexpr (std::is_same_v<T, double>)
    return kernels::candidate_bound(d, 0.0, 0.0, 0x1p-53, 0x1p-53, DBL_MIN);
  else
    return kernels::candidate_bound(d, 0x1p-11, 0x1p-11, 0x1p-24, 0x1p-24, FLT_MIN);
}

}  // namespace km::gpu
