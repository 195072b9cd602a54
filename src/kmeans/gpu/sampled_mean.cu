// The tensor path's centre (tensor_kernels.hpp: sampled_mean), on the host or from the rows on
// the device. Its own translation unit: with CUDA's lazy loading, the first kernel of a module
// loads all of it, and fused.cu's took ~45 ms, which k-means|| (tensor_nearest.cu) would pay
// in its initialisation for this one small kernel.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/memory.hpp"
#include "kmeans/gpu/tensor_kernels.hpp"

namespace km::gpu {

using cuda::DeviceBuffer;

namespace {

// sampled_mean's rows and count: about 2^20 values (1,024 to 65,536 objects spread evenly).
std::size_t mean_step(std::size_t n, std::size_t d) {
  const std::size_t wanted = std::clamp<std::size_t>((std::size_t{1} << 20) / d, 1024, 65536);
  return std::max<std::size_t>(1, n / wanted);
}

template <class T>
std::vector<T> mean_of(const std::vector<double>& sum, std::size_t taken) {
  std::vector<T> mean(sum.size());
  for (std::size_t j = 0; j < sum.size(); ++j) mean[j] = static_cast<T>(sum[j] / static_cast<double>(taken));
  return mean;
}

// sum[j] = the host's sum of coordinate j over rows 0, step, 2 step, ... below n: a thread a
// coordinate, adding in row order in double, so the same bits.
template <class T>
__global__ void sampled_sums(const T* __restrict__ x, std::int64_t n, int d, std::int64_t step,
                             double* __restrict__ sum) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  constexpr int kAhead = 32;  // loads in flight ahead of the chain of adds (one at a time: 0.68 ms)
  double s = 0;
  for (std::int64_t i0 = 0; i0 < n; i0 += kAhead * step) {
    T v[kAhead];
#pragma unroll
    for (int q = 0; q < kAhead; ++q) v[q] = i0 + q * step < n ? x[(i0 + q * step) * d + j] : T(0);
#pragma unroll
    for (int q = 0; q < kAhead; ++q)
      if (i0 + q * step < n) s += static_cast<double>(v[q]);
  }
  sum[j] = s;
}

}  // namespace

template <class T>
std::vector<T> sampled_mean(const Dataset<T>& data, std::size_t n) {
  // Summed in double: all 60,000 x 784 of Fashion-MNIST, serially, took ~40 ms of a 75 ms setup.
  const std::size_t d = data.d, step = mean_step(n, d);
  std::vector<double> sum(d, 0.0);
  std::size_t taken = 0;
  for (std::size_t i = 0; i < n; i += step, ++taken)
    for (std::size_t j = 0; j < d; ++j) sum[j] += static_cast<double>(data.row(i)[j]);
  return mean_of<T>(sum, taken);
}

template <class T>
std::vector<T> sampled_mean(const T* rows, std::size_t n, std::size_t d, cudaStream_t stream) {
  // The host's rows are strided 8 KB apart at 1M x 128: 2.5 ms of the host's time for 8,192 of
  // them, ~0.05 ms here.
  const std::size_t step = mean_step(n, d), taken = n == 0 ? 0 : (n - 1) / step + 1;
  DeviceBuffer<double> sum(d, stream);
  sampled_sums<T><<<static_cast<unsigned>((d + 127) / 128), 128, 0, stream>>>(
      rows, static_cast<std::int64_t>(n), static_cast<int>(d), static_cast<std::int64_t>(step), sum.get());
  CUDA_CHECK_LAUNCH();
  std::vector<double> host(d);
  CUDA_CHECK(cudaMemcpyAsync(host.data(), sum.get(), d * sizeof(double), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return mean_of<T>(host, taken);
}

template std::vector<float> sampled_mean(const Dataset<float>&, std::size_t);
template std::vector<double> sampled_mean(const Dataset<double>&, std::size_t);
template std::vector<float> sampled_mean(const float*, std::size_t, std::size_t, cudaStream_t);
template std::vector<double> sampled_mean(const double*, std::size_t, std::size_t, cudaStream_t);

}  // namespace km::gpu
