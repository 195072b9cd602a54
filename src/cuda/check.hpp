// The one CUDA error path: CUDA_CHECK(call) and CUBLAS_CHECK(call) throw DeviceError naming
// the call, the file and the line; CUDA_CHECK_LAUNCH() checks the last launch and, when the
// environment sets KMEANS_SYNC_LAUNCHES=1, synchronises so an asynchronous fault is blamed
// on its kernel.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "common/errors.hpp"

namespace km {

[[noreturn]] inline void cuda_fail(cudaError_t err, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the next run starts clean
  throw DeviceError(strprintf("CUDA error %s (%s) in %s at %s:%d", cudaGetErrorName(err), cudaGetErrorString(err),
                              call, file, line));
}

[[noreturn]] inline void cublas_fail(cublasStatus_t st, const char* call, const char* file, int line) {
  throw DeviceError(strprintf("cuBLAS error %s in %s at %s:%d", cublasGetStatusString(st), call, file, line));
}

inline bool sync_after_launches() {
  static const bool on = [] {
    const char* v = std::getenv("KMEANS_SYNC_LAUNCHES");
    return v && std::string(v) == "1";
  }();
  return on;
}

}  // namespace km

#define CUDA_CHECK(call)                                                             \
  do {                                                                               \
    const cudaError_t km_err_ = (call);                                              \
    if (km_err_ != cudaSuccess) ::km::cuda_fail(km_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                      \
  do {                                                                                          \
    const cublasStatus_t km_st_ = (call);                                                       \
    if (km_st_ != CUBLAS_STATUS_SUCCESS) ::km::cublas_fail(km_st_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUDA_CHECK_LAUNCH()                                               \
  do {                                                                    \
    CUDA_CHECK(cudaGetLastError());                                       \
    if (::km::sync_after_launches()) CUDA_CHECK(cudaDeviceSynchronize()); \
  } while (0)
