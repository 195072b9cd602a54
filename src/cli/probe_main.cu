// kmeans-probe: the device's ceilings, measured in the same run as the benchmarks.
//   read bandwidth  a kernel that reads a 1 GiB buffer once (16-byte loads, grid-stride),
//                   median of 20 timed runs after a warm-up;
//   h2d bandwidth   pinned host -> device copies of 1 GiB, median of 10 after a warm-up (the
//                   link that out-of-core k-means streams over);
//   gemm            cuBLAS time of an m x k by k x n product (double and float, TF32 off),
//                   median of 10 runs after a warm-up, for --gemm=m,n,k.
// Prints one JSON object. Usage: kmeans-probe [--gemm=M,N,K]...
#include <cstdio>
#include <cstring>
#include <string>

#include "cuda/check.hpp"
#include "cuda/memory.hpp"
#include "cuda/timer.hpp"

namespace {

using km::cuda::DeviceBuffer;

__global__ void read_all(const double2* __restrict__ in, std::size_t count, double* out) {
  double acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double2 v = in[i];
    acc += v.x + v.y;
  }
  if (acc == 1234.5) *out = acc;  // keeps the loads alive; never true for zeroed memory
}

template <class T>
double gemm_seconds(cudaStream_t s, cublasHandle_t h, int m, int n, int k) {
  DeviceBuffer<T> a(std::size_t(m) * k), b(std::size_t(k) * n), c(std::size_t(m) * n);
  CUDA_CHECK(cudaMemsetAsync(a.get(), 0, a.bytes(), s));
  CUDA_CHECK(cudaMemsetAsync(b.get(), 0, b.bytes(), s));
  const T one = 1, zero = 0;
  return km::cuda::time_median(s, 10, [&] {
    if constexpr (sizeof(T) == 8)
      CUBLAS_CHECK(cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b.get(), k, a.get(), k, &zero, c.get(), n));
    else
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b.get(), k, a.get(), k, &zero, c.get(), n));
  });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    km::cuda::Stream stream;
    const std::size_t bytes = 1ull << 30;
    double seconds = 0;
    {
      DeviceBuffer<double2> buf(bytes / sizeof(double2));
      DeviceBuffer<double> out(1);
      CUDA_CHECK(cudaMemsetAsync(buf.get(), 0, bytes, stream));
      const int grid = prop.multiProcessorCount * 8;
      seconds = km::cuda::time_median(stream, 20, [&] {
        read_all<<<grid, 512, 0, stream>>>(buf.get(), buf.size(), out.get());
        CUDA_CHECK_LAUNCH();
      });
    }
    double h2d_seconds = 0;
    {
      DeviceBuffer<unsigned char> dst(bytes);
      void* host = nullptr;
      CUDA_CHECK(cudaMallocHost(&host, bytes));
      std::memset(host, 1, bytes);
      try {
        h2d_seconds = km::cuda::time_median(stream, 10, [&] {
          CUDA_CHECK(cudaMemcpyAsync(dst.get(), host, bytes, cudaMemcpyHostToDevice, stream));
        });
      } catch (...) {
        cudaFreeHost(host);
        throw;
      }
      CUDA_CHECK(cudaFreeHost(host));
    }
    std::printf("{\"device\": \"%s\", \"read_bandwidth_gbs\": %.3f, \"h2d_pinned_gbs\": %.3f", prop.name,
                bytes / seconds / 1e9, bytes / h2d_seconds / 1e9);
    km::cuda::CublasHandle h(stream);
    std::printf(", \"gemm\": [");
    bool first = true;
    for (int i = 1; i < argc; ++i) {
      int m, n, k;
      if (std::sscanf(argv[i], "--gemm=%d,%d,%d", &m, &n, &k) != 3) continue;
      std::printf("%s{\"m\": %d, \"n\": %d, \"k\": %d, \"double_seconds\": %.9g, \"float_seconds\": %.9g}",
                  first ? "" : ", ", m, n, k, gemm_seconds<double>(stream, h, m, n, k),
                  gemm_seconds<float>(stream, h, m, n, k));
      first = false;
    }
    std::printf("]}\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kmeans-probe: error: %s\n", e.what());
    return 1;
  }
}
