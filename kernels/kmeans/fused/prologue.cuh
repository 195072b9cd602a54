// The delta kernel's prologue steps that are not a feature's: the centroids' rows.
#pragma once

namespace km::kernels {

// Above d = 2 (SROW > 0), the centroids as rows [k][SROW] from the shared copy, read in its order
// (t = j k + c: no bank conflicts; read in the rows' order, a stride of k, 32 lanes hit one bank at
// K = 64), and zero past d.
template <class C>
__device__ __forceinline__ void centroid_rows(bool has_rows, int k, int d, typename C::T* srow,
                                              const typename C::T* s) {
  using T = typename C::T;
  constexpr int SROW = C::SROW;
  if (has_rows) {
    for (int t = threadIdx.x; t < k * d; t += blockDim.x) srow[(t % k) * SROW + t / k] = s[t];
    for (int t = threadIdx.x; t < k * (SROW - d); t += blockDim.x) srow[(t / (SROW - d)) * SROW + d + t % (SROW - d)] = T(0);
    __syncthreads();
  }
}

}  // namespace km::kernels
