// fused: the fastest rung. Two paths, chosen per shape by kernels/kmeans/layouts.hpp's
// fused_one_pass():
//   one pass  (d <= 32, small K*d) kernels/kmeans/6_fused_one_pass.cuh: assignment and
//             block-private accumulation in one read of the data;
//   GEMM      (any shape) cuBLAS x.c products over L2-sized chunks of objects, then
//             kernels/kmeans/6_fused_gemm.cuh's warp arg-min and accumulation.
// FusedEngine picks the path at setup and forwards to it.
#include <algorithm>
#include <cmath>
#include <optional>

#include "kernels/kmeans/6_fused_gemm.cuh"
#include "kernels/kmeans/6_fused_one_pass.cuh"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/gpu/device_update.hpp"

namespace km::gpu {

template <class T>
using OnePassKernel = void (*)(const T*, const T*, std::int64_t, int, int, std::int32_t*, unsigned long long*,
                               unsigned long long*, unsigned long long*, double, unsigned long long*, double);

// The instantiation for a register width (the smallest power of two >= d) and the
// accumulation mode (owner lanes or fixed-point shared atomics).
template <class T>
OnePassKernel<T> one_pass_kernel(int maxd, bool owner) {
  if (owner) return maxd == 8 ? kernels::fused_one_pass<T, 8, true> : kernels::fused_one_pass<T, 16, true>;
  switch (maxd) {
    case 1: return kernels::fused_one_pass<T, 1, false>;
    case 2: return kernels::fused_one_pass<T, 2, false>;
    case 4: return kernels::fused_one_pass<T, 4, false>;
    case 8: return kernels::fused_one_pass<T, 8, false>;
    case 16: return kernels::fused_one_pass<T, 16, false>;
    default: return kernels::fused_one_pass<T, 32, false>;
  }
}

template <class T>
class FusedOnePass final : public DeviceUpdateEngine<T> {
 public:
  explicit FusedOnePass(const Params& p) : DeviceUpdateEngine<T>(p, "fused", Layout::coord_major) {}

 private:
  std::size_t prepare(const Dataset<T>& data) override {
    const int maxd = kernels::fused_register_width(this->d_);
    bytes_ = kernels::block_sums_layout<std::size_t>(this->k_, this->d_, sizeof(T)).bytes;
    kernel_ = one_pass_kernel<T>(maxd, kernels::fused_owner_lanes(maxd, this->k_));
    cuda::opt_in_shared(kernel_, bytes_, "--impl=fused");
    // --block is the threads per block, capped at what the kernel's registers allow
    // (1024 at d <= 8); the grid is one wave of resident blocks.
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_));
    block_ = std::min(this->params_.block, attr.maxThreadsPerBlock / 32 * 32);
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_, block_, bytes_));
    const std::size_t blocks_needed = (data.n + block_ - 1) / block_;
    grid_ = static_cast<int>(std::max<std::size_t>(
        1, std::min<std::size_t>(static_cast<std::size_t>(per_sm) * multiprocessor_count(), blocks_needed)));
    return 0;
  }

  void assign(bool accumulate) override {
    this->launch(kernel_, grid_, block_, bytes_, this->centroids_.get(), accumulate ? this->changed_.get() : nullptr,
                 accumulate ? this->sums_.get() : nullptr, this->counts_.get(), this->scale_,
                 accumulate ? this->inertia_.get() : nullptr, this->inertia_scale_);
  }

  OnePassKernel<T> kernel_ = nullptr;
  int grid_ = 1, block_ = 128;
  std::size_t bytes_ = 0;
};

template <class T>
class FusedGemm final : public DeviceUpdateEngine<T> {
 public:
  explicit FusedGemm(const Params& p) : DeviceUpdateEngine<T>(p, "fused", Layout::row_major) {}

 private:
  std::size_t prepare(const Dataset<T>& data) override {
    const std::size_t k = this->k_;
    chunk_ = std::min<std::size_t>(data.n, std::max<std::size_t>(4096, (32ull << 20) / (k * sizeof(T))));
    return chunk_ * k * sizeof(T) + k * sizeof(T);  // dots + norms
  }

  void after_setup() override {
    dots_ = DeviceBuffer<T>(chunk_ * this->k_);
    norms_ = DeviceBuffer<T>(this->k_);
    blas_.emplace(this->stream_);
    after_update();
  }

  void after_update() override {  // |c|^2 of the new centroids
    const int k = static_cast<int>(this->k_);
    kernels::centroid_norms<T><<<(k * 32 + 255) / 256, 256, 0, this->stream_>>>(
        this->centroids_.get(), k, static_cast<int>(this->d_), norms_.get());
    CUDA_CHECK_LAUNCH();
  }

  void assign(bool accumulate) override {
    const auto n = static_cast<std::int64_t>(this->n_);
    const int d = static_cast<int>(this->d_), k = static_cast<int>(this->k_);
    unsigned long long* changed = accumulate ? this->changed_.get() : nullptr;
    unsigned long long* sums = accumulate ? this->sums_.get() : nullptr;
    const T one = 1, zero = 0;
    for (std::int64_t first = 0; first < n; first += static_cast<std::int64_t>(chunk_)) {
      const int count = static_cast<int>(std::min<std::int64_t>(static_cast<std::int64_t>(chunk_), n - first));
      // Row-major dots[count][k] = X[count][d] . C[k][d]^T, i.e. column-major C . X^T.
      if constexpr (std::is_same_v<T, double>)
        CUBLAS_CHECK(cublasDgemm(*blas_, CUBLAS_OP_T, CUBLAS_OP_N, k, count, d, &one, this->centroids_.get(), d,
                                 this->x_.get() + first * d, d, &zero, dots_.get(), k));
      else
        CUBLAS_CHECK(cublasSgemm(*blas_, CUBLAS_OP_T, CUBLAS_OP_N, k, count, d, &one, this->centroids_.get(), d,
                                 this->x_.get() + first * d, d, &zero, dots_.get(), k));
      const int block = this->params_.block;
      const std::int64_t threads = static_cast<std::int64_t>(count) * 32;
      kernels::argmin_accumulate<T><<<static_cast<int>((threads + block - 1) / block), block, 0, this->stream_>>>(
          this->x_.get(), this->centroids_.get(), dots_.get(), norms_.get(), first, count, d, k, this->labels_.get(),
          changed, sums, this->counts_.get(), this->scale_, this->inertia_.get(), this->inertia_scale_);
      CUDA_CHECK_LAUNCH();
    }
  }

  std::size_t chunk_ = 0;
  DeviceBuffer<T> dots_, norms_;
  std::optional<cuda::CublasHandle> blas_;
};

const char* fused_path(std::size_t k, std::size_t d, std::size_t elem) {
  return kernels::fused_one_pass(k, d, elem) ? "one-pass" : "gemm";
}

template <class T>
class FusedEngine final : public Engine<T> {
 public:
  explicit FusedEngine(const Params& p) : params_(p) {}

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    path_name_ = fused_path(initial.size() / data.d, data.d, sizeof(T));
    if (kernels::fused_one_pass(initial.size() / data.d, data.d, sizeof(T)))
      path_ = std::make_unique<FusedOnePass<T>>(params_);
    else
      path_ = std::make_unique<FusedGemm<T>>(params_);
    path_->setup(data, initial);
  }
  void iterate(IterationStats& stats) override { path_->iterate(stats); }
  void read_centroids(std::vector<T>& out) override { path_->read_centroids(out); }
  void final_labels(std::vector<std::int32_t>& out) override { path_->final_labels(out); }
  std::string device() const override { return device_name(); }
  std::string path() const override { return path_name_; }

 private:
  Params params_;
  const char* path_name_ = "";
  std::unique_ptr<Engine<T>> path_;
};

}  // namespace km::gpu

namespace km {
extern const Implementation fused_implementation = describe<gpu::FusedEngine>(
    "fused", "fastest: one pass, registers + shared memory, block-private sums; cuBLAS path for large K*d", Where::gpu,
    [](std::size_t k, std::size_t d, std::size_t, const GpuInfo&) { return gpu::fits_int_indexing(k, d); },
    gpu::fused_path);
}  // namespace km
