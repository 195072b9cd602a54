// The tensor path's centre (tensor_kernels.hpp: sampled_mean), on the host or from the rows on
// the device. Its own translation unit: with CUDA's lazy loading, the first kernel of a module
// loads all of it, and fused's took ~45 ms, which k-means|| (tensor_nearest.cu) would pay
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

// The sampled rows are summed in kSegments runs (a run's rows in order, the runs' sums then in
// run order), so that the device's threads each take a run and give the host's bits: one thread
// a coordinate adding all 8,192 rows of 1M x 128 in order took 1 ms.
constexpr std::size_t kSegments = 64;

std::size_t segment_rows(std::size_t taken) { return (taken + kSegments - 1) / kSegments; }

// part[s][j] = coordinate j summed over the sampled rows (0, step, 2 step, ... below n) of run
// s, in order, in double: a thread a (run, coordinate).
template <class T>
__global__ void sampled_runs(const T* __restrict__ x, std::int64_t n, int d, std::int64_t step, std::int64_t per,
                             double* __restrict__ part) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  constexpr int kAhead = 16;  // loads in flight ahead of the chain of adds
  const std::int64_t t0 = blockIdx.y * per, t1 = t0 + per;  // sampled rows t0 .. t1 (row t * step)
  double s = 0;
  for (std::int64_t t = t0; t < t1 && t * step < n; t += kAhead) {
    T v[kAhead];
#pragma unroll
    for (int q = 0; q < kAhead; ++q) v[q] = t + q < t1 && (t + q) * step < n ? x[(t + q) * step * d + j] : T(0);
#pragma unroll
    for (int q = 0; q < kAhead; ++q)
      if (t + q < t1 && (t + q) * step < n) s += static_cast<double>(v[q]);
  }
  part[blockIdx.y * static_cast<std::int64_t>(d) + j] = s;
}

// sum[j] = 0 + part[0][j] + part[1][j] + ..., in run order.
__global__ void sampled_total(const double* __restrict__ part, int runs, int d, double* __restrict__ sum) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  double s = 0;
  for (int r = 0; r < runs; ++r) s += part[static_cast<std::int64_t>(r) * d + j];
  sum[j] = s;
}

}  // namespace

template <class T>
std::vector<T> sampled_mean(const Dataset<T>& data, std::size_t n) {
  // Summed in double: all 60,000 x 784 of Fashion-MNIST, serially, took ~40 ms of a 75 ms setup.
  const std::size_t d = data.d, step = mean_step(n, d), taken = n == 0 ? 0 : (n - 1) / step + 1;
  const std::size_t per = segment_rows(taken);
  std::vector<double> sum(d, 0.0), part(d);
  for (std::size_t t0 = 0; t0 < taken; t0 += per) {
    std::fill(part.begin(), part.end(), 0.0);
    for (std::size_t t = t0; t < std::min(taken, t0 + per); ++t)
      for (std::size_t j = 0; j < d; ++j) part[j] += static_cast<double>(data.row(t * step)[j]);
    for (std::size_t j = 0; j < d; ++j) sum[j] += part[j];
  }
  return mean_of<T>(sum, taken);
}

template <class T>
std::vector<T> sampled_mean(const T* rows, std::size_t n, std::size_t d, cudaStream_t stream) {
  // The host's rows are strided 8 KB apart at 1M x 128: 2.5 ms of the host's time for 8,192 of
  // them.
  const std::size_t step = mean_step(n, d), taken = n == 0 ? 0 : (n - 1) / step + 1;
  const std::size_t per = std::max<std::size_t>(1, segment_rows(taken)), runs = (taken + per - 1) / per;
  std::vector<double> host(d, 0.0);
  if (runs > 0) {
    DeviceBuffer<double> part(runs * d, stream), sum(d, stream);
    const auto blocks = static_cast<unsigned>((d + 127) / 128);
    sampled_runs<T><<<dim3(blocks, static_cast<unsigned>(runs)), 128, 0, stream>>>(
        rows, static_cast<std::int64_t>(n), static_cast<int>(d), static_cast<std::int64_t>(step),
        static_cast<std::int64_t>(per), part.get());
    CUDA_CHECK_LAUNCH();
    sampled_total<<<blocks, 128, 0, stream>>>(part.get(), static_cast<int>(runs), static_cast<int>(d), sum.get());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(host.data(), sum.get(), d * sizeof(double), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return mean_of<T>(host, taken);
}

template std::vector<float> sampled_mean(const Dataset<float>&, std::size_t);
template std::vector<double> sampled_mean(const Dataset<double>&, std::size_t);
template std::vector<float> sampled_mean(const float*, std::size_t, std::size_t, cudaStream_t);
template std::vector<double> sampled_mean(const double*, std::size_t, std::size_t, cudaStream_t);

}  // namespace km::gpu
