// Host drivers of the GPU ladder. Each engine owns its device buffers and launches the
// kernels of its file in kernels/; the shared driver runs the loop.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../../kernels/fused.cuh"
#include "../../kernels/naive.cuh"
#include "../../kernels/offload.cuh"
#include "../../kernels/transpose.cuh"
#include "gpu/gpu_engine.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/registry.hpp"

namespace km::gpu {

namespace {

void check_int_range(std::size_t k, std::size_t d) {
  if (k * d >= (1ull << 31)) throw UsageError(strprintf("K*d = %zu is too large (limit 2^31)", k * d));
}

// Opts the kernel in to `bytes` of dynamic shared memory, or explains why it cannot.
template <class Kernel>
void require_shared(Kernel kernel, std::size_t bytes, const std::string& impl, std::size_t k, std::size_t d) {
  const std::size_t limit = max_shared_bytes();
  if (bytes > limit)
    throw UsageError(strprintf("--impl=%s needs %zu bytes of shared memory for K=%zu x d=%zu, above this GPU's "
                               "limit of %zu per block; use --impl=fused",
                               impl.c_str(), bytes, k, d, limit));
  if (bytes > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// ------------------------------------------------------------------ naive, transpose, shared
// Assignment on the GPU; the labels come back every iteration and the CPU computes the
// new centroids and sends them down, as in the lab.
enum class Variant { naive, transpose, shared };

template <class T>
class HostUpdateEngine final : public GpuEngine<T> {
  using Base = GpuEngine<T>;

 public:
  HostUpdateEngine(const Params& p, Variant v)
      : Base(p, v == Variant::naive ? "naive" : v == Variant::transpose ? "transpose" : "shared",
             v == Variant::naive ? Layout::row_major : Layout::coord_major),
        variant_(v) {}

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    this->k_ = initial.size() / data.d;
    check_int_range(this->k_, data.d);
    shared_bytes_ = this->k_ * data.d * sizeof(T);
    if (variant_ == Variant::shared) require_shared(kernels::assign_shared<T>, shared_bytes_, this->name_, this->k_, data.d);
    this->setup_common(data, this->k_ * data.d * sizeof(T));
    centroids_ = initial;
    device_centroids_ = DeviceBuffer<T>(initial.size());
    host_labels_ = std::make_unique<PinnedBuffer<std::int32_t>>(this->n_);
    staged_ = std::make_unique<PinnedBuffer<T>>(initial.size());
    sums_.assign(initial.size(), 0.0);
    counts_.assign(this->k_, 0);
  }

  void iterate(IterationStats& stats) override {
    upload_centroids();
    this->timer_.begin(Phase::kernel, this->stream_);
    this->reset_changed();
    launch(this->changed_.get());
    this->timer_.end(Phase::kernel, this->stream_);
    this->timer_.begin(Phase::d2h, this->stream_);
    CUDA_CHECK(cudaMemcpyAsync(host_labels_->get(), this->labels_.get(), this->n_ * sizeof(std::int32_t),
                               cudaMemcpyDeviceToHost, this->stream_));
    this->timer_.end(Phase::d2h, this->stream_);
    stats.changed = this->read_changed(stats);  // syncs; adds the phases
    HostPhase cpu(stats.cpu);
    // The lab's CPU update: one pass over the objects in their labels' clusters.
    std::fill(sums_.begin(), sums_.end(), 0.0);
    std::fill(counts_.begin(), counts_.end(), 0);
    const std::int32_t* labels = host_labels_->get();
    const std::size_t d = this->d_;
    for (std::size_t i = 0; i < this->n_; ++i) {
      const T* x = this->data_->row(i);
      double* s = &sums_[static_cast<std::size_t>(labels[i]) * d];
      for (std::size_t j = 0; j < d; ++j) s[j] += static_cast<double>(x[j]);
      ++counts_[labels[i]];
    }
    stats.shift = finalize_centroids(sums_.data(), counts_.data(), this->k_, d, centroids_.data());
  }

  void read_centroids(std::vector<T>& out) override { out = centroids_; }

  void final_labels(std::vector<std::int32_t>& out) override {
    IterationStats ignored;
    upload_centroids();
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));
    this->timer_.collect(ignored);
    launch(nullptr);
    this->download_labels(out);
  }

 private:
  void upload_centroids() {
    // [K][d] for naive, [d][K] for the coordinate-major variants.
    T* staged = staged_->get();
    const std::size_t k = this->k_, d = this->d_;
    if (variant_ == Variant::naive)
      std::copy(centroids_.begin(), centroids_.end(), staged);
    else
      for (std::size_t c = 0; c < k; ++c)
        for (std::size_t j = 0; j < d; ++j) staged[j * k + c] = centroids_[c * d + j];
    this->timer_.begin(Phase::h2d, this->stream_);
    CUDA_CHECK(cudaMemcpyAsync(device_centroids_.get(), staged, k * d * sizeof(T), cudaMemcpyHostToDevice,
                               this->stream_));
    this->timer_.end(Phase::h2d, this->stream_);
  }

  void launch(unsigned long long* changed) {
    const int grid = this->grid_for(this->n_), block = this->params_.block;
    const auto n = static_cast<std::int64_t>(this->n_);
    const int d = static_cast<int>(this->d_), k = static_cast<int>(this->k_);
    switch (variant_) {
      case Variant::naive:
        kernels::assign_naive<T><<<grid, block, 0, this->stream_>>>(this->x_.get(), device_centroids_.get(), n, d, k,
                                                                    this->labels_.get(), changed);
        break;
      case Variant::transpose:
        kernels::assign_transpose<T><<<grid, block, 0, this->stream_>>>(this->x_.get(), device_centroids_.get(), n, d,
                                                                        k, this->labels_.get(), changed);
        break;
      case Variant::shared:
        kernels::assign_shared<T><<<grid, block, shared_bytes_, this->stream_>>>(
            this->x_.get(), device_centroids_.get(), n, d, k, this->labels_.get(), changed);
        break;
    }
    CUDA_CHECK_LAUNCH();
  }

  Variant variant_;
  std::size_t shared_bytes_ = 0;
  std::vector<T> centroids_;
  DeviceBuffer<T> device_centroids_;
  std::unique_ptr<PinnedBuffer<std::int32_t>> host_labels_;
  std::unique_ptr<PinnedBuffer<T>> staged_;
  std::vector<double> sums_;
  std::vector<std::int64_t> counts_;
};

// ------------------------------------------------------------------ offload
template <class T>
class OffloadEngine final : public GpuEngine<T> {
  using Base = GpuEngine<T>;

 public:
  OffloadEngine(const Params& p, bool block_local)
      : Base(p, block_local ? "offload-block" : "offload", Layout::coord_major), block_local_(block_local) {}

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    const std::size_t k = initial.size() / data.d, d = data.d;
    this->k_ = k;
    check_int_range(k, d);
    if (block_local_) {
      shared_bytes_ = k * d * sizeof(double) + ((k + 1) & ~std::size_t(1)) * sizeof(unsigned) + k * d * sizeof(T);
      require_shared(kernels::assign_accumulate_block<T>, shared_bytes_, this->name_, k, d);
      int per_sm = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernels::assign_accumulate_block<T>,
                                                               this->params_.block, shared_bytes_));
      block_grid_ = std::max(1, std::min(per_sm * multiprocessor_count(), this->grid_for(data.n)));  // one wave
    } else {
      shared_bytes_ = k * d * sizeof(T);
      require_shared(kernels::assign_accumulate_global<T>, shared_bytes_, this->name_, k, d);
    }
    require_shared(kernels::assign_shared<T>, k * d * sizeof(T), this->name_, k, d);
    this->setup_common(data, k * d * (sizeof(T) + sizeof(double)) + k * sizeof(unsigned long long));
    std::vector<T> transposed(k * d);
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t j = 0; j < d; ++j) transposed[j * k + c] = initial[c * d + j];
    centroids_ = DeviceBuffer<T>(k * d);
    sums_ = DeviceBuffer<double>(k * d);
    counts_ = DeviceBuffer<unsigned long long>(k);
    CUDA_CHECK(cudaMemcpyAsync(centroids_.get(), transposed.data(), k * d * sizeof(T), cudaMemcpyHostToDevice,
                               this->stream_));
    CUDA_CHECK(cudaMemsetAsync(sums_.get(), 0, k * d * sizeof(double), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(counts_.get(), 0, k * sizeof(unsigned long long), this->stream_));
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));
  }

  void iterate(IterationStats& stats) override {
    const int grid = this->grid_for(this->n_), block = this->params_.block;
    const auto n = static_cast<std::int64_t>(this->n_);
    const int d = static_cast<int>(this->d_), k = static_cast<int>(this->k_);
    this->timer_.begin(Phase::kernel, this->stream_);
    this->reset_changed();
    if (block_local_)
      kernels::assign_accumulate_block<T><<<block_grid_, block, shared_bytes_, this->stream_>>>(
          this->x_.get(), centroids_.get(), n, d, k, this->labels_.get(), this->changed_.get(), sums_.get(),
          counts_.get());
    else
      kernels::assign_accumulate_global<T><<<grid, block, shared_bytes_, this->stream_>>>(
          this->x_.get(), centroids_.get(), n, d, k, this->labels_.get(), this->changed_.get(), sums_.get(),
          counts_.get());
    CUDA_CHECK_LAUNCH();
    kernels::update_centroids<T><<<k, 128, 0, this->stream_>>>(centroids_.get(), sums_.get(), counts_.get(), k, d,
                                                               true, this->shift_.get());
    CUDA_CHECK_LAUNCH();
    this->timer_.end(Phase::kernel, this->stream_);
    stats.changed = this->read_changed(stats, this->shift_.get(), &stats.shift);
  }

  void read_centroids(std::vector<T>& out) override {
    const std::size_t k = this->k_, d = this->d_;
    std::vector<T> transposed(k * d);
    CUDA_CHECK(cudaMemcpyAsync(transposed.data(), centroids_.get(), k * d * sizeof(T), cudaMemcpyDeviceToHost,
                               this->stream_));
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));
    out.resize(k * d);
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t j = 0; j < d; ++j) out[c * d + j] = transposed[j * k + c];
  }

  void final_labels(std::vector<std::int32_t>& out) override {
    kernels::assign_shared<T><<<this->grid_for(this->n_), this->params_.block, this->k_ * this->d_ * sizeof(T),
                                this->stream_>>>(this->x_.get(), centroids_.get(), static_cast<std::int64_t>(this->n_),
                                                 static_cast<int>(this->d_), static_cast<int>(this->k_),
                                                 this->labels_.get(), nullptr);
    CUDA_CHECK_LAUNCH();
    this->download_labels(out);
  }

 private:
  bool block_local_;
  int block_grid_ = 1;  // block mode: one wave of resident blocks
  std::size_t shared_bytes_ = 0;
  DeviceBuffer<T> centroids_;  // [d][k]
  DeviceBuffer<double> sums_;  // [k][d]
  DeviceBuffer<unsigned long long> counts_;
};

// ------------------------------------------------------------------ fused
template <class T>
using FusedKernel = void (*)(const T*, const T*, std::int64_t, int, int, std::int32_t*, unsigned long long*, double*,
                             unsigned long long*, double, double);

// The instantiation for a register width (the smallest power of two >= d) and the
// accumulation mode (owner lanes for 8 <= d <= 16 and K <= 32, else fixed-point atomics).
template <class T>
FusedKernel<T> fused_small_kernel(int maxd, bool owner) {
  if (owner) return maxd == 8 ? kernels::fused_small<T, 8, true> : kernels::fused_small<T, 16, true>;
  switch (maxd) {
    case 1: return kernels::fused_small<T, 1, false>;
    case 2: return kernels::fused_small<T, 2, false>;
    case 4: return kernels::fused_small<T, 4, false>;
    case 8: return kernels::fused_small<T, 8, false>;
    case 16: return kernels::fused_small<T, 16, false>;
    default: return kernels::fused_small<T, 32, false>;
  }
}

template <class T>
class FusedEngine final : public GpuEngine<T> {
  using Base = GpuEngine<T>;

 public:
  explicit FusedEngine(const Params& p) : Base(p, "fused", Layout::coord_major) {}
  ~FusedEngine() override {
    if (cublas_) cublasDestroy(cublas_);
  }

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    const std::size_t k = initial.size() / data.d, d = data.d;
    this->k_ = k;
    check_int_range(k, d);
    shared_bytes_ = k * d * sizeof(double) + ((k + 1) & ~std::size_t(1)) * sizeof(unsigned) + k * d * sizeof(T);
    maxd_ = 1;
    while (maxd_ < static_cast<int>(d)) maxd_ *= 2;
    // The one-pass path while its shared memory stays small enough for several resident
    // blocks per SM; otherwise the GEMM path, which takes any shape.
    small_ = d <= 32 && shared_bytes_ <= 64 * 1024;
    this->layout_ = small_ ? Layout::coord_major : Layout::row_major;
    std::size_t extra = k * d * (sizeof(T) + sizeof(double)) + k * (sizeof(unsigned long long) + sizeof(T));
    if (!small_) {
      chunk_ = std::min<std::size_t>(data.n, std::max<std::size_t>(4096, (32ull << 20) / (k * sizeof(T))));
      extra += chunk_ * k * sizeof(T);
    }
    if (small_) {
      kernel_ = fused_small_kernel<T>(maxd_, maxd_ >= 8 && maxd_ <= 16 && k <= 32);
      require_shared(kernel_, shared_bytes_, this->name_, k, d);
      // --block is the threads per block, capped at what the kernel's registers allow
      // (1024 at d <= 8); the grid is one wave of resident blocks.
      cudaFuncAttributes attr{};
      CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_));
      block_ = std::min(this->params_.block, attr.maxThreadsPerBlock / 32 * 32);
      int per_sm = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_, block_, shared_bytes_));
      const std::size_t blocks_needed = (data.n + block_ - 1) / block_;
      grid_ = static_cast<int>(std::max<std::size_t>(
          1, std::min<std::size_t>(static_cast<std::size_t>(per_sm) * multiprocessor_count(), blocks_needed)));
      // Fixed-point scale of the block sums: |sum| <= max|x| * (objects one block sees) < 2^61.
      const int unroll = maxd_ <= 2 ? 8 : maxd_ <= 8 ? 4 : maxd_ <= 16 ? 2 : 1;  // as the kernel's U
      const std::size_t per_pass = static_cast<std::size_t>(grid_) * block_ * unroll;
      const double per_block = static_cast<double>((data.n + per_pass - 1) / per_pass) * block_ * unroll;
      const double bound = max_abs_value(data) * per_block;
      const int exponent = bound > 0 ? std::clamp(61 - static_cast<int>(std::ceil(std::log2(bound))), -1000, 1000) : 0;
      scale_ = std::ldexp(1.0, exponent);
      inv_scale_ = std::ldexp(1.0, -exponent);
    }
    this->setup_common(data, extra);
    centroids_ = DeviceBuffer<T>(k * d);
    sums_ = DeviceBuffer<double>(k * d);
    counts_ = DeviceBuffer<unsigned long long>(k);
    norms_ = DeviceBuffer<T>(k);
    std::vector<T> staged(initial);
    if (small_)
      for (std::size_t c = 0; c < k; ++c)
        for (std::size_t j = 0; j < d; ++j) staged[j * k + c] = initial[c * d + j];
    CUDA_CHECK(cudaMemcpyAsync(centroids_.get(), staged.data(), k * d * sizeof(T), cudaMemcpyHostToDevice,
                               this->stream_));
    CUDA_CHECK(cudaMemsetAsync(sums_.get(), 0, k * d * sizeof(double), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(counts_.get(), 0, k * sizeof(unsigned long long), this->stream_));
    if (!small_) {
      dots_ = DeviceBuffer<T>(chunk_ * k);
      if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS) throw DeviceError("cublasCreate failed");
      if (cublasSetStream(cublas_, this->stream_) != CUBLAS_STATUS_SUCCESS ||
          cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS)  // no TF32: float stays float
        throw DeviceError("cuBLAS set-up (stream, math mode) failed");
      launch_norms();
    }
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));
  }

  void iterate(IterationStats& stats) override {
    const int d = static_cast<int>(this->d_), k = static_cast<int>(this->k_);
    this->timer_.begin(Phase::kernel, this->stream_);
    this->reset_changed();
    assign(true);
    kernels::update_centroids<T><<<k, 128, 0, this->stream_>>>(centroids_.get(), sums_.get(), counts_.get(), k, d,
                                                               small_, this->shift_.get());
    CUDA_CHECK_LAUNCH();
    if (!small_) launch_norms();
    this->timer_.end(Phase::kernel, this->stream_);
    stats.changed = this->read_changed(stats, this->shift_.get(), &stats.shift);
  }

  void read_centroids(std::vector<T>& out) override {
    const std::size_t k = this->k_, d = this->d_;
    std::vector<T> staged(k * d);
    CUDA_CHECK(cudaMemcpyAsync(staged.data(), centroids_.get(), k * d * sizeof(T), cudaMemcpyDeviceToHost,
                               this->stream_));
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));
    out.resize(k * d);
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t j = 0; j < d; ++j) out[c * d + j] = small_ ? staged[j * k + c] : staged[c * d + j];
  }

  void final_labels(std::vector<std::int32_t>& out) override {
    assign(false);
    this->download_labels(out);
  }

 private:
  void launch_norms() {
    const int k = static_cast<int>(this->k_);
    kernels::centroid_norms<T><<<(k * 32 + 255) / 256, 256, 0, this->stream_>>>(centroids_.get(), k,
                                                                               static_cast<int>(this->d_), norms_.get());
    CUDA_CHECK_LAUNCH();
  }

  void assign(bool accumulate) {
    const auto n = static_cast<std::int64_t>(this->n_);
    const int d = static_cast<int>(this->d_), k = static_cast<int>(this->k_);
    unsigned long long* changed = accumulate ? this->changed_.get() : nullptr;
    double* sums = accumulate ? sums_.get() : nullptr;
    if (small_) {
      kernel_<<<grid_, block_, shared_bytes_, this->stream_>>>(this->x_.get(), centroids_.get(), n, d, k,
                                                             this->labels_.get(), changed, sums, counts_.get(),
                                                             scale_, inv_scale_);
      CUDA_CHECK_LAUNCH();
      return;
    }
    const T one = 1, zero = 0;
    for (std::int64_t first = 0; first < n; first += static_cast<std::int64_t>(chunk_)) {
      const int count = static_cast<int>(std::min<std::int64_t>(static_cast<std::int64_t>(chunk_), n - first));
      // Row-major dots[count][k] = X[count][d] . C[k][d]^T, i.e. column-major C . X^T.
      cublasStatus_t st;
      if constexpr (std::is_same_v<T, double>)
        st = cublasDgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, k, count, d, &one, centroids_.get(), d,
                         this->x_.get() + first * d, d, &zero, dots_.get(), k);
      else
        st = cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, k, count, d, &one, centroids_.get(), d,
                         this->x_.get() + first * d, d, &zero, dots_.get(), k);
      if (st != CUBLAS_STATUS_SUCCESS) throw DeviceError(strprintf("cuBLAS gemm failed with status %d", int(st)));
      const int block = this->params_.block;
      const std::int64_t threads = static_cast<std::int64_t>(count) * 32;
      kernels::argmin_accumulate<T><<<static_cast<int>((threads + block - 1) / block), block, 0, this->stream_>>>(
          this->x_.get(), dots_.get(), norms_.get(), first, count, d, k, this->labels_.get(), changed, sums,
          counts_.get());
      CUDA_CHECK_LAUNCH();
    }
  }

  bool small_ = true;
  FusedKernel<T> kernel_ = nullptr;
  int maxd_ = 1, grid_ = 1, block_ = 128;
  double scale_ = 1, inv_scale_ = 1;
  std::size_t shared_bytes_ = 0, chunk_ = 0;
  DeviceBuffer<T> centroids_;  // [d][k] on the small path, [k][d] on the GEMM path
  DeviceBuffer<double> sums_;  // [k][d]
  DeviceBuffer<unsigned long long> counts_;
  DeviceBuffer<T> norms_, dots_;
  cublasHandle_t cublas_ = nullptr;
};

}  // namespace

}  // namespace km::gpu

namespace km {

template <class T>
std::unique_ptr<Engine<T>> make_naive_engine(const Params& p) {
  return std::make_unique<gpu::HostUpdateEngine<T>>(p, gpu::Variant::naive);
}
template <class T>
std::unique_ptr<Engine<T>> make_transpose_engine(const Params& p) {
  return std::make_unique<gpu::HostUpdateEngine<T>>(p, gpu::Variant::transpose);
}
template <class T>
std::unique_ptr<Engine<T>> make_shared_engine(const Params& p) {
  return std::make_unique<gpu::HostUpdateEngine<T>>(p, gpu::Variant::shared);
}
template <class T>
std::unique_ptr<Engine<T>> make_offload_engine(const Params& p) {
  return std::make_unique<gpu::OffloadEngine<T>>(p, false);
}
template <class T>
std::unique_ptr<Engine<T>> make_offload_block_engine(const Params& p) {
  return std::make_unique<gpu::OffloadEngine<T>>(p, true);
}
template <class T>
std::unique_ptr<Engine<T>> make_fused_engine(const Params& p) {
  return std::make_unique<gpu::FusedEngine<T>>(p);
}

#define KM_INSTANTIATE(F)                                            \
  template std::unique_ptr<Engine<float>> F<float>(const Params&);   \
  template std::unique_ptr<Engine<double>> F<double>(const Params&);
KM_INSTANTIATE(make_naive_engine)
KM_INSTANTIATE(make_transpose_engine)
KM_INSTANTIATE(make_shared_engine)
KM_INSTANTIATE(make_offload_engine)
KM_INSTANTIATE(make_offload_block_engine)
KM_INSTANTIATE(make_fused_engine)
#undef KM_INSTANTIATE

}  // namespace km
