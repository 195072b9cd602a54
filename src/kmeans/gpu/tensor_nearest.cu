// k-means||'s nearest candidates on the tensor cores (tensor_nearest.hpp): fused's TF32 kernels
// (tensor_kernels.hpp) with m candidates as the centroids, then the re-checks of
// 6_fused_tensor.cuh in double.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "kernels/gemm/6_tensor.cuh"
#include "kernels/kmeans/6_fused_tensor.cuh"
#include "kmeans/gpu/device_update.hpp"
#include "kmeans/gpu/tensor_kernels.hpp"
#include "kmeans/gpu/tensor_nearest.hpp"
#include "kmeans/init.hpp"

namespace km::gpu {

namespace {

using cuda::DeviceBuffer;

// *largest = the largest of v[0..n) (not negative: their bits order as the values do; NaN's
// bits sort above every finite value). (CUB's max with its scratch allocated and freed took
// ~0.6 ms at 1M.)
__global__ void largest_of(const double* __restrict__ v, std::int64_t n, unsigned long long* __restrict__ largest) {
  unsigned long long m = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    m = max(m, static_cast<unsigned long long>(__double_as_longlong(v[i])));
  for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (threadIdx.x % 32 == 0) atomicMax(largest, m);
}

template <class T>
class TensorNearestImpl final : public TensorNearest<T> {
 public:
  TensorNearestImpl(const Dataset<T>& data, const T* x, const TensorKernels<float>& kernels, cudaStream_t stream,
                    const CentredRows* centred)
      : x_(x), n_(data.n), d_(data.d), kernels_(kernels), stream_(stream) {
    // The bound: float's, or double on TF32 candidates' (margin.hpp). Either covers a re-check
    // in double: the direct formula's error in double is below g = gamma_{d+2}(2^-24).
    bound_ = std::is_same_v<T, float> ? tensor_bound<float>(d_) : kernels::tf32_candidates_bound(d_);
    const auto began = std::chrono::steady_clock::now();
    auto lap = [&](const char* what) {
      if (parallel_verbose())
        std::fprintf(stderr, "k-means||: the tensor path: %s at %.4f s\n", what,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    };
    const std::vector<T> mean =
        centred ? std::vector<T>(centred->mean.begin(), centred->mean.end()) : sampled_mean(x_, n_, d_, stream_);
    lap(centred ? "the engine's mean" : "the mean");
    mu_ = DeviceBuffer<T>(d_, stream_);
    mu32_ = DeviceBuffer<float>(d_, stream_);  // the kernels' mu argument (unused with the copy)
    const std::vector<float> mean32(mean.begin(), mean.end());
    CUDA_CHECK(cudaMemcpyAsync(mu_.get(), mean.data(), d_ * sizeof(T), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(mu32_.get(), mean32.data(), d_ * sizeof(float), cudaMemcpyHostToDevice, stream_));
    if (!centred) {
      owned_operand_ = DeviceBuffer<float>(n_ * d_, stream_);
      owned_xnorm2_ = DeviceBuffer<double>(n_, stream_);
    }
    operand_ = centred ? centred->rows : owned_operand_.get();
    xnorm2_ = centred ? centred->norms2 : owned_xnorm2_.get();
    cmax2_ = DeviceBuffer<double>(1, stream_);
    queue_ = DeviceBuffer<kernels::Recheck>(n_, stream_);
    everyone_ = DeviceBuffer<std::int64_t>(n_, stream_);
    all_min_ = DeviceBuffer<unsigned long long>(n_, stream_);
    queued_ = DeviceBuffer<unsigned long long>(2, stream_);
    prev_ = DeviceBuffer<std::int32_t>(n_, stream_);  // the wgmma kernel's thresholds: row 0's (any row will do)
    CUDA_CHECK(cudaMemsetAsync(prev_.get(), 0, n_ * sizeof(std::int32_t), stream_));
    lap("allocated");
    if (!centred) {  // as fused's engine makes its copy (fused/tensor.cu: FusedTensor::stage)
      const int grid = static_cast<int>(std::min<std::size_t>((n_ + 7) / 8, multiprocessor_count() * 8ull));
      kernels::centred_row_norms<T, float><<<grid, 256, 0, stream_>>>(
          x_, mu_.get(), static_cast<std::int64_t>(n_), static_cast<int>(d_), true, owned_xnorm2_.get(),
          owned_operand_.get());
      CUDA_CHECK_LAUNCH();
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // before the means go
    lap(centred ? "the engine's centred copy" : "the centred copy");
    double mu2 = 0;
    for (const T v : mean) mu2 += static_cast<double>(v) * static_cast<double>(v);
    mu_norm_ = std::sqrt(mu2);
  }

  // A bound on every |x_ij|: |x| <= |x - mu| + |mu|, from the centred copy's norms (waits).
  double largest_abs() {
    CUDA_CHECK(cudaMemsetAsync(cmax2_.get(), 0, sizeof(double), stream_));
    const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n_ + 255) / 256, multiprocessor_count() * 4ull));
    largest_of<<<blocks, 256, 0, stream_>>>(xnorm2_, static_cast<std::int64_t>(n_),
                                           reinterpret_cast<unsigned long long*>(cmax2_.get()));
    CUDA_CHECK_LAUNCH();
    double max2 = 0;
    CUDA_CHECK(cudaMemcpyAsync(&max2, cmax2_.get(), sizeof max2, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return (std::sqrt(max2) + mu_norm_) * (1 + 0x1p-40);
  }

  void nearest(const T* rows, int m, std::int32_t* labels, const double* ceiling) override {
    const std::size_t pad = kernels::kKeyPad, padded = (static_cast<std::size_t>(m) + pad - 1) / pad * pad;
    if (keyed_.size() < padded) {
      keyed_ = DeviceBuffer<float>(padded, stream_);
      centred_ = DeviceBuffer<float>(padded * d_, stream_);
      if (kernels_.wgmma) image_ = DeviceBuffer<float>(wgmma_image_bytes(padded, d_) / sizeof(float), stream_);
    }
    // Keys past m are +inf (the kernels read whole stages of kKeyPad without a bounds test).
    if (padded > static_cast<std::size_t>(m))
      CUDA_CHECK(cudaMemcpyAsync(keyed_.get() + m, infinities_.data(), (padded - m) * sizeof(float),
                                 cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemsetAsync(cmax2_.get(), 0, sizeof(double), stream_));
    CUDA_CHECK(cudaMemsetAsync(queued_.get(), 0, 2 * sizeof(unsigned long long), stream_));
    const int d = static_cast<int>(d_);
    kernels::centre_centroids<T, float><<<(m * 32 + 255) / 256, 256, 0, stream_>>>(
        rows, mu_.get(), m, d, false, centred_.get(), keyed_.get(), cmax2_.get());
    CUDA_CHECK_LAUNCH();
    if (kernels_.wgmma) wgmma_image(centred_.get(), m, d, cmax2_.get(), image_.get(), false, stream_);
    const auto n = static_cast<std::int64_t>(n_);
    const auto blocks = static_cast<unsigned>((n_ + kernels_.pre_rows - 1) / kernels_.pre_rows);
    if (kernels_.wgmma)
      (ceiling && kernels_.wgmma_ceiling ? kernels_.wgmma_ceiling : kernels_.wgmma_kernel)<<<
          blocks, kernels_.pre_threads, kernels_.pre_smem, stream_>>>(
          operand_, image_.get(), centred_.get(), keyed_.get(), cmax2_.get(), xnorm2_, 0.0, n, d, m,
          bound_, labels, queue_.get(), everyone_.get(), queued_.get(), prev_.get(), ceiling);
    else
      kernels_.assign_pre<<<blocks, kernels_.pre_threads, kernels_.pre_smem, stream_>>>(
          operand_, mu32_.get(), centred_.get(), keyed_.get(), cmax2_.get(), xnorm2_, 0.0, n, d, m,
          bound_, labels, queue_.get(), everyone_.get(), queued_.get(), prev_.get());
    CUDA_CHECK_LAUNCH();
    // The close calls in double, the CPU's arithmetic and order (A = double).
    kernels::recheck_nearest<T, double><<<multiprocessor_count() * 8, kernels::kNearestThreads, 0, stream_>>>(
        x_, rows, d, queue_.get(), queued_.get(), everyone_.get(), all_min_.get(), labels);
    CUDA_CHECK_LAUNCH();
    const unsigned all_grid = static_cast<unsigned>(multiprocessor_count()) * 16;
    kernels::recheck_all<T, false, double><<<all_grid, kernels::kAllWarps * 32, 0, stream_>>>(
        x_, rows, d, m, everyone_.get(), queued_.get() + 1, all_min_.get(), labels);
    CUDA_CHECK_LAUNCH();
    kernels::recheck_all<T, true, double><<<all_grid, kernels::kAllWarps * 32, 0, stream_>>>(
        x_, rows, d, m, everyone_.get(), queued_.get() + 1, all_min_.get(), labels);
    CUDA_CHECK_LAUNCH();
  }

  void rechecked(unsigned long long& listed, unsigned long long& all) override {
    unsigned long long got[2] = {0, 0};
    CUDA_CHECK(cudaMemcpyAsync(got, queued_.get(), sizeof got, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    listed = got[0];
    all = got[1];
  }

 private:
  const T* x_;
  std::size_t n_, d_;
  TensorKernels<float> kernels_;
  cudaStream_t stream_;
  kernels::CandidateBound bound_;
  double mu_norm_ = 0;
  DeviceBuffer<T> mu_;
  DeviceBuffer<float> mu32_, keyed_, centred_;
  DeviceBuffer<float> owned_operand_;  // the centred copy, when no engine lent one
  DeviceBuffer<double> owned_xnorm2_;
  const float* operand_ = nullptr;     // the copy read: the engine's or owned_operand_
  const double* xnorm2_ = nullptr;     // |x'|^2: the engine's or owned_xnorm2_
  DeviceBuffer<float> image_;  // the centroids' tile image the wgmma kernel copies its stages from
  DeviceBuffer<double> cmax2_;
  DeviceBuffer<kernels::Recheck> queue_;
  DeviceBuffer<std::int64_t> everyone_;
  DeviceBuffer<unsigned long long> all_min_, queued_;
  DeviceBuffer<std::int32_t> prev_;
  const std::vector<float> infinities_ = std::vector<float>(kernels::kKeyPad, std::numeric_limits<float>::infinity());
};

}  // namespace

template <class T>
std::unique_ptr<TensorNearest<T>> make_tensor_nearest(const Dataset<T>& data, const T* x, double max_abs,
                                                      cudaStream_t stream, const CentredRows* centred) {
  if (compute_capability() < 80 || !(max_abs <= 0x1p48) || data.n == 0 || data.n > INT32_MAX) return nullptr;
  const bool unknown = std::isinf(max_abs) && max_abs < 0;  // -inf: bound it from the copy's norms
  // The float copy and the per-object buffers (|x'|^2, the queues, the minima, the thresholds'
  // labels), beside a few candidates' rows.
  const std::size_t need = (centred ? 0 : data.n * data.d * sizeof(float) + data.n * sizeof(double)) +
                           data.n * (sizeof(kernels::Recheck) + sizeof(std::int64_t) +
                                     sizeof(unsigned long long) + sizeof(std::int32_t)) +
                           (64ull << 20);
  if (device_budget(0) < need) return nullptr;
  const TensorKernels<float> kernels = tensor_kernels<float>(data.d);
  const char* what = "--init=kmeans|| on the tensor cores";
  if (kernels.wgmma) {
    cuda::opt_in_shared(kernels.wgmma_kernel, kernels.pre_smem, what);
    if (kernels.wgmma_ceiling) cuda::opt_in_shared(kernels.wgmma_ceiling, kernels.pre_smem, what);
  }
  else
    cuda::opt_in_shared(kernels.assign_pre, kernels.pre_smem, what);
  auto made = std::make_unique<TensorNearestImpl<T>>(data, x, kernels, stream, centred);
  if (unknown && !(made->largest_abs() <= 0x1p48)) return nullptr;
  return made;
}

template <class T>
void preload_tensor_nearest(std::size_t d, cudaStream_t stream) {
  if (compute_capability() < 80) return;
  auto touch = [](const void* kernel) {
    cudaFuncAttributes a{};
    CUDA_CHECK(cudaFuncGetAttributes(&a, kernel));
  };
  touch(reinterpret_cast<const void*>(largest_of));
  touch(reinterpret_cast<const void*>(kernels::centred_row_norms<T, float>));
  touch(reinterpret_cast<const void*>(kernels::centre_centroids<T, float>));
  touch(reinterpret_cast<const void*>(kernels::recheck_nearest<T, double>));
  touch(reinterpret_cast<const void*>(kernels::recheck_all<T, false, double>));
  touch(reinterpret_cast<const void*>(kernels::recheck_all<T, true, double>));
  const TensorKernels<float> k = tensor_kernels<float>(d);
  if (k.wgmma) {
    touch(reinterpret_cast<const void*>(k.wgmma_kernel));
    if (k.wgmma_ceiling) touch(reinterpret_cast<const void*>(k.wgmma_ceiling));
    wgmma_preload();
  } else if (k.assign_pre) {
    touch(reinterpret_cast<const void*>(k.assign_pre));
  }
  DeviceBuffer<T> one(d, stream);  // the centre's kernels (sampled_mean.cu), on one row
  CUDA_CHECK(cudaMemsetAsync(one.get(), 0, d * sizeof(T), stream));
  (void)sampled_mean(one.get(), 1, d, stream);
}

namespace {
// One warp: 128 values a round as a 16 x 8 A, B the 8 x 8 identity, so that D = A as read; each
// element through both conversions, the bit patterns of the two products compared.
__global__ void tf32_half_up_check(const float* xs, int n, unsigned long long* mismatches) {
  using Mma = kernels::gemm::MmaTf32m16n8k8;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const unsigned one = __float_as_uint(1.0f);
  const unsigned b[2] = {t == g ? one : 0u, t + 4 == g ? one : 0u};  // B[t][g], B[t + 4][g]
  unsigned long long differ = 0;
  for (int base = 0; base < n; base += 128) {
    // A[r][c] = xs[base + 8 r + c] (0 past n).
    auto at = [&](int r, int c) { const int i = base + 8 * r + c; return i < n ? xs[i] : 0.0f; };
    const float v[4] = {at(g, t), at(g + 8, t), at(g, t + 4), at(g + 8, t + 4)};
    unsigned a_up[4], a_rna[4];
    for (int q = 0; q < 4; ++q) {
      a_up[q] = Mma::convert_half_up(v[q]);
      a_rna[q] = Mma::convert(v[q]);
    }
    float d_up[4], d_rna[4];
    Mma::mma_zero(d_up, a_up, b);
    Mma::mma_zero(d_rna, a_rna, b);
    for (int q = 0; q < 4; ++q) differ += __float_as_uint(d_up[q]) != __float_as_uint(d_rna[q]) ? 1 : 0;
  }
  atomicAdd(mismatches, differ);
}
}  // namespace

std::size_t tf32_half_up_mismatches(const std::vector<float>& xs) {
  cudaStream_t stream = nullptr;
  DeviceBuffer<float> x(xs.size() + 1, stream);
  DeviceBuffer<unsigned long long> count(1, stream);
  CUDA_CHECK(cudaMemcpyAsync(x.get(), xs.data(), xs.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), stream));
  tf32_half_up_check<<<1, 32, 0, stream>>>(x.get(), static_cast<int>(xs.size()), count.get());
  CUDA_CHECK(cudaGetLastError());
  unsigned long long host = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host, count.get(), sizeof host, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<std::size_t>(host);
}

template void preload_tensor_nearest<float>(std::size_t, cudaStream_t);
template void preload_tensor_nearest<double>(std::size_t, cudaStream_t);

template std::unique_ptr<TensorNearest<float>> make_tensor_nearest(const Dataset<float>&, const float*, double,
                                                                   cudaStream_t, const CentredRows*);
template std::unique_ptr<TensorNearest<double>> make_tensor_nearest(const Dataset<double>&, const double*, double,
                                                                    cudaStream_t, const CentredRows*);

}  // namespace km::gpu
