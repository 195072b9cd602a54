// kmeans-probe: the device's ceilings, measured in the same run as the benchmarks.
//   read bandwidth  a kernel that reads a 1 GiB buffer once (16-byte loads, grid-stride),
//                   median of 20 timed runs after a warm-up;
//   gemm            cuBLAS time of an m x k by k x n product (double and float, TF32 off),
//                   median of 10 runs after a warm-up, for --gemm=m,n,k.
// Prints one JSON object. Usage: kmeans-probe [--gemm=M,N,K]...
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu/cuda_check.hpp"

namespace {

__global__ void read_all(const double2* __restrict__ in, std::size_t count, double* out) {
  double acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double2 v = in[i];
    acc += v.x + v.y;
  }
  if (acc == 1234.5) *out = acc;  // keeps the loads alive; never true for zeroed memory
}

template <class F>
double median_ms(int reps, F&& body) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  body();  // warm-up
  std::vector<float> times;
  for (int r = 0; r < reps; ++r) {
    CUDA_CHECK(cudaEventRecord(a));
    body();
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return times[times.size() / 2];
}

template <class T>
double gemm_seconds(cublasHandle_t h, int m, int n, int k) {
  T *a, *b, *c;
  CUDA_CHECK(cudaMalloc(&a, sizeof(T) * m * k));
  CUDA_CHECK(cudaMalloc(&b, sizeof(T) * k * n));
  CUDA_CHECK(cudaMalloc(&c, sizeof(T) * m * n));
  CUDA_CHECK(cudaMemset(a, 0, sizeof(T) * m * k));
  CUDA_CHECK(cudaMemset(b, 0, sizeof(T) * k * n));
  const T one = 1, zero = 0;
  double ms = median_ms(10, [&] {
    cublasStatus_t st;
    if constexpr (sizeof(T) == 8)
      st = cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, k, a, k, &zero, c, n);
    else
      st = cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, k, a, k, &zero, c, n);
    if (st != CUBLAS_STATUS_SUCCESS) throw km::DeviceError("cuBLAS gemm failed");
  });
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return ms * 1e-3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const std::size_t bytes = 1ull << 30;
    double2* buf;
    double* out;
    CUDA_CHECK(cudaMalloc(&buf, bytes));
    CUDA_CHECK(cudaMalloc(&out, sizeof(double)));
    CUDA_CHECK(cudaMemset(buf, 0, bytes));
    const int grid = prop.multiProcessorCount * 8;
    const double ms = median_ms(20, [&] {
      read_all<<<grid, 512>>>(buf, bytes / sizeof(double2), out);
      CUDA_CHECK_LAUNCH();
    });
    cudaFree(buf);
    cudaFree(out);
    std::printf("{\"device\": \"%s\", \"read_bandwidth_gbs\": %.3f", prop.name, bytes / (ms * 1e-3) / 1e9);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw km::DeviceError("cublasCreate failed");
    if (cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) throw km::DeviceError("cuBLAS math mode");
    std::printf(", \"gemm\": [");
    bool first = true;
    for (int i = 1; i < argc; ++i) {
      int m, n, k;
      if (std::sscanf(argv[i], "--gemm=%d,%d,%d", &m, &n, &k) != 3) continue;
      std::printf("%s{\"m\": %d, \"n\": %d, \"k\": %d, \"double_seconds\": %.9g, \"float_seconds\": %.9g}",
                  first ? "" : ", ", m, n, k, gemm_seconds<double>(h, m, n, k), gemm_seconds<float>(h, m, n, k));
      first = false;
    }
    std::printf("]}\n");
    cublasDestroy(h);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kmeans-probe: error: %s\n", e.what());
    return 1;
  }
}
