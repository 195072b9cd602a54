// fused's tensor path (docs/fused.md): distances and arg-min on the tensor cores (FP64 DMMA, TF32
// mma.sync or wgmma; kernels/kmeans/6_fused_tensor.cuh, 6_fused_wgmma.cuh), never writing the
// N x K matrix, seq's labels exactly through a proven margin and a re-check of the close calls;
// then a radix sort by label and the sums cluster by cluster, or only the movers once few move.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/kmeans/6_fused_tensor.cuh"
#include "kernels/kmeans/checks.cuh"
#include "kernels/kmeans/margin.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/gpu/device_update.hpp"
#include "kmeans/gpu/fused_plan.hpp"
#include "kmeans/gpu/fused_wgmma.hpp"
#include "kmeans/gpu/tensor_kernels.hpp"

namespace km::gpu {

template <class Mma, bool SHORT = false, int DEPTH = 0, int NSTAGES = 3>
TensorKernels<typename Mma::T> tensor_kernels_for(std::size_t d) {
  using T = typename Mma::T;
  using Shape = kernels::TensorAssignShape<Mma, SHORT, DEPTH, NSTAGES>;
  constexpr int vec = 16 / int(sizeof(T));
  TensorKernels<T> r;
  r.assign = d % vec == 0 ? kernels::fused_tensor_assign<Mma, vec, SHORT, DEPTH, NSTAGES>
                          : kernels::fused_tensor_assign<Mma, 1, SHORT, DEPTH, NSTAGES>;
  if constexpr (!Shape::is_double)
    r.assign_pre = d % vec == 0 ? kernels::fused_tensor_assign<Mma, vec, SHORT, DEPTH, NSTAGES, true>
                                : kernels::fused_tensor_assign<Mma, 1, SHORT, DEPTH, NSTAGES, true>;
  r.smem = r.pre_smem = kernels::tensor_assign_smem_bytes<Mma, SHORT, DEPTH, NSTAGES>();
  r.threads = r.pre_threads = Shape::threads;
  r.rows = r.pre_rows = Shape::BM;
  r.centre_objects = Shape::centre_objects;
  return r;
}

template <class T>
TensorKernels<T> tensor_kernels(std::size_t d, bool wgmma) {
  namespace g = kernels::gemm;
  if constexpr (std::is_same_v<T, double>) {
    // sm_90, d > 16: 32-deep slices in three stages (221 KB of shared memory; half the barriers
    // of 16-deep ones): 2-6% faster on every measured shape with d >= 128 (H200, same call); at
    // d = 16 a 32-deep slice would be half padding.
    if (compute_capability() >= 90)
      return d > 16 ? tensor_kernels_for<g::MmaF64m16n8k4, false, 32, 3>(d) : tensor_kernels_for<g::MmaF64m16n8k4>(d);
    return tensor_kernels_for<g::MmaF64m8n8k4>(d);
  }
  else if (d <= 16)  // 16-deep slices: a short d is not padded to 32
    return tensor_kernels_for<g::MmaTf32m16n8k8, true>(d);
  else if (d > 32) {  // 64-deep slices, three stages (211 KB): half the barriers and stage set-ups of
    // 32-deep ones; 4-10% faster at d = 128 and 784 (H100, same call)
    TensorKernels<T> r = tensor_kernels_for<g::MmaTf32m16n8k8, false, 64, 3>(d);
    // From the centred copy, on sm_90 with 32 < d <= 128: wgmma (FusedConfig::wgmma off: mma.sync).
    if (wgmma)
      if (const WgmmaAssign w = wgmma_assign(d); w.kernel) {
        r.wgmma_kernel = w.kernel;
        r.wgmma_ceiling = w.ceiling_kernel;
        r.pre_smem = w.smem;
        r.pre_threads = w.threads;
        r.pre_rows = w.rows;
        r.wgmma = true;
      }
    return r;
  }
  else
    return tensor_kernels_for<g::MmaTf32m16n8k8>(d);
}

template TensorKernels<float> tensor_kernels(std::size_t, bool);
template TensorKernels<double> tensor_kernels(std::size_t, bool);

template <class T>
class FusedTensor final : public DeviceUpdateEngine<T> {
 public:
  explicit FusedTensor(const Params& p) : DeviceUpdateEngine<T>(p, "fused", Layout::row_major) {}
  bool takes_weights() const override { return true; }  // accumulate_sorted's W

  // The whole problem here and in device memory: the sums are kept across iterations, and once
  // at most movers_after_ of the objects moved in the last iteration, only the movers go
  // through them (6_fused_tensor.cuh: move_members), the inertia from the kept sums
  // (movers_inertia). Otherwise, and in parts (several GPUs) or out of core, every object is
  // summed afresh each iteration.
  void iterate(IterationStats& stats) override {
    if (!movers_scheme()) {
      movers_ = false;
      DeviceUpdateEngine<T>::iterate(stats);
      stats.summed = static_cast<std::int64_t>(this->whole_.n);
      return;
    }
    movers_ = movers_wanted();
    queue_sums_reset();
    DeviceUpdateEngine<T>::iterate(stats);
    held_ = true;
    last_changed_ = stats.changed;
    stats.summed = movers_ ? stats.changed : static_cast<std::int64_t>(this->n_);
  }

  void finish_update(IterationStats& stats) override {
    DeviceUpdateEngine<T>::finish_update(stats);  // waits for the stream, so the count is here
    take_counters(stats);
  }

  // A batch's graph (batch_graph.cu): the iteration iterate() would run, with the movers' scheme
  // as movers_wanted() says when the graph is captured; requeue() asks for another capture when
  // that changes.
  void queue_iteration() override {
    movers_ = movers_scheme() && movers_wanted();
    if (movers_scheme()) queue_sums_reset();
    DeviceUpdateEngine<T>::queue_iteration();
  }
  void collect_iteration(IterationStats& stats) override {
    DeviceUpdateEngine<T>::collect_iteration(stats);
    take_counters(stats);
    if (movers_scheme()) {
      held_ = true;
      last_changed_ = stats.changed;
    }
  }
  Requeue requeue() const override {
    if (!movers_scheme()) return movers_ ? Requeue::required : Requeue::none;  // take_counters turned it off
    return movers_wanted() != movers_ ? Requeue::preferred : Requeue::none;
  }

  std::string path() const override {  // the report's "path": "tensor, wgmma" when that kernel runs
    if (tf32_) return tf32_kernels_.wgmma ? "tf32 candidates, wgmma" : "tf32 candidates";
    if (half_) return "fp16 wgmma";
    return operand_.get() && kernels_.wgmma ? "wgmma" : DeviceUpdateEngine<T>::path();
  }

  // The plan's decisions (fused_plan.cpp) and, as "ran", what this fit took where memory decided.
  std::vector<std::pair<std::string, std::string>> plan() const override {
    auto f = plan_fused({this->n_, this->d_, this->k_, sizeof(T), 0.0, this->params_.block, false, 0}, device_facts(),
                        this->params_.fused)
                 .fields();
    f.emplace_back("ran", path());
    return f;
  }

  // For --init=kmeans||: the data up (DeviceUpdateEngine::stage), then the centred TF32 copy
  // this path reads in its loop (double on TF32 candidates, or float's copy), made now so that
  // the initialisation's tensor-core rounds read it too (centred_rows.hpp) instead of making
  // their own; after_setup adopts it. Where memory is short, under --device-memory, or with
  // FusedConfig::share_copy off, none (the initialisation makes its own, as the loop's setup does).
  const T* stage(const Dataset<T>& data, std::size_t k) override {
    const T* x = DeviceUpdateEngine<T>::stage(data, k);
    staged_rows_ = DeviceBuffer<float>();
    staged_norms_ = DeviceBuffer<double>();
    staged_mu_ = DeviceBuffer<T>();
    shared_ = CentredRows{};
    if (!x || this->params_.init != Init::kmeans_parallel || !this->params_.fused.share_copy ||
        this->params_.metric == Metric::dot ||  // (its copy is centred on the centroids: after_setup)
        this->params_.device_memory != 0 || compute_capability() < 80 || data.n > INT32_MAX)
      return x;
    const std::size_t n = data.n, d = data.d, copy = n * d * sizeof(float) + n * sizeof(double);
    // Room for the copy twice over (the loop's own test, after_setup, counts it as free) and a
    // generous 256 bytes an object for the initialisation's and the loop's other buffers.
    if (device_budget(0) < 2 * copy + n * 256 + this->buffer_bytes(k, d) + (64ull << 20)) return x;
    const std::vector<T> mean = sampled_mean(x, n, d, this->stream_);  // as after_setup's
    staged_mu_ = this->template device_buffer<T>(d);
    CUDA_CHECK(cudaMemcpyAsync(staged_mu_.get(), mean.data(), d * sizeof(T), cudaMemcpyHostToDevice, this->stream_));
    staged_rows_ = this->template device_buffer<float>(n * d);
    staged_norms_ = this->template device_buffer<double>(n);
    const int grid = static_cast<int>(std::min<std::size_t>((n + 7) / 8, static_cast<std::size_t>(multiprocessor_count()) * 8));
    kernels::centred_row_norms<T, float><<<grid, 256, 0, this->stream_>>>(
        x, staged_mu_.get(), static_cast<std::int64_t>(n), static_cast<int>(d), true, staged_norms_.get(),
        staged_rows_.get());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // the initialisation reads it on its own stream
    staged_mean_ = mean;
    shared_.rows = staged_rows_.get();
    shared_.norms2 = staged_norms_.get();
    shared_.mean.assign(mean.begin(), mean.end());
    if (this->whole_.n == n) shared_.max_abs = this->whole_.max_abs;  // the host's range check, before the fit
    return x;
  }
  const CentredRows* centred_rows() const override { return shared_.rows ? &shared_ : nullptr; }

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    initial_max_ = 0;  // TF32 candidates need the initial centroids inside float's range too
    for (T v : initial) initial_max_ = std::max(initial_max_, std::fabs(static_cast<double>(v)));
    DeviceUpdateEngine<T>::setup(data, initial);
  }

 private:
  // Every iteration of the whole problem in memory is one of two fixed sequences of launches
  // (with the movers' scheme or summing every object), so a batch can capture it.
  bool graphable() const override { return !this->streamed() && this->whole_.n == this->n_; }
  // Whether the movers' scheme can run (iterate), and whether the next iteration should take it.
  bool movers_scheme() const { return movers_after_ > 0 && object_q_.get() && this->whole_.n == this->n_; }
  bool movers_wanted() const {
    return held_ && static_cast<double>(last_changed_) <= movers_after_ * static_cast<double>(this->n_);
  }
  // The sums kept across iterations; cleared before an iteration that sums every object.
  void queue_sums_reset() {
    this->keep_sums_ = true;
    if (movers_) return;
    const std::size_t k = this->k_;
    CUDA_CHECK(cudaMemsetAsync(this->sums_.get(), 0, k * this->d_ * sizeof(unsigned long long), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(this->counts_.get(), 0, k * sizeof(unsigned long long), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(q_sums_.get(), 0, k * sizeof(unsigned long long), this->stream_));
  }
  // The iteration's re-check counts, and where the movers' algebraic inertia's bound failed
  // (clusters far tighter than their distance from the mean), this iteration's inertia from the
  // objects and every object summed from here on (the scheme off).
  void take_counters(IterationStats& stats) {
    const auto& counters = *this->counters_host_.get();  // read back with the change count
    stats.rechecked = static_cast<std::int64_t>(counters.queued[0] + counters.queued[1]);
    stats.rechecked_all = static_cast<std::int64_t>(counters.queued[1]);
    stats.summed = movers_ ? stats.changed : static_cast<std::int64_t>(this->whole_.n);  // (all ranks' rows)
    if (!movers_ || counters.inertia != kernels::kInertiaUnsure) return;
    std::vector<T> previous(this->k_ * this->d_);
    CUDA_CHECK(cudaMemcpy(previous.data(), previous_.get(), previous.size() * sizeof(T), cudaMemcpyDeviceToHost));
    if (!this->device_inertia(previous, stats.inertia))
      throw DeviceError("--impl=fused: the device no longer holds the data for the iteration's inertia");
    held_ = false;
    movers_after_ = 0;
    this->keep_sums_ = false;
    // the update kept the sums: cleared for the next iteration, which sums every object (done
    // before it: a batch's graph runs on another stream)
    CUDA_CHECK(cudaMemsetAsync(this->sums_.get(), 0, this->k_ * this->d_ * sizeof(unsigned long long), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(this->counts_.get(), 0, this->k_ * sizeof(unsigned long long), this->stream_));
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));
  }
  // The multiprocessors this problem's grid-stride kernels cover: all, or its share of a batch's.
  unsigned sms() const {
    return static_cast<unsigned>(std::max(1, multiprocessor_count() / std::max(1, this->params_.fused.share)));
  }

  std::size_t prepare(const Dataset<T>& data) override {
    kernels_ = tensor_kernels<T>(data.d, this->params_.fused.wgmma);
    cuda::opt_in_shared(kernels_.assign, kernels_.smem, "--impl=fused");
    if (kernels_.wgmma)
      cuda::opt_in_shared(kernels_.wgmma_kernel, kernels_.pre_smem, "--impl=fused");
    else if (kernels_.assign_pre)
      cuda::opt_in_shared(kernels_.assign_pre, kernels_.pre_smem, "--impl=fused");
    bound_ = tensor_bound<T>(data.d);
    half_kernel_ = WgmmaAssign{};
    if constexpr (std::is_same_v<T, float>)  // float16 scores, should the float16 copy fit (after_setup)
      if (this->params_.fused.f16_scores && this->params_.fused.wgmma &&
          (half_kernel_ = wgmma_assign(data.d, true)).kernel) {
        cuda::opt_in_shared(half_kernel_.kernel, half_kernel_.smem, "--impl=fused");
      }
    if constexpr (std::is_same_v<T, double>) {  // the TF32 candidates' kernels, should the copy fit (after_setup)
      tf32_kernels_ = tensor_kernels<float>(data.d, this->params_.fused.wgmma);
      if (tf32_kernels_.wgmma)
        cuda::opt_in_shared(tf32_kernels_.wgmma_kernel, tf32_kernels_.pre_smem, "--impl=fused");
      else
        cuda::opt_in_shared(tf32_kernels_.assign_pre, tf32_kernels_.pre_smem, "--impl=fused");
      tf32_bound_ = kernels::tf32_candidates_bound(data.d);
    }
    // the mean, the centred centroids, their norms, the largest norm, the next labels,
    // |x'|^2, the two re-check queues and their lengths, recheck_all's minima
    return data.d * sizeof(T) + this->k_ * (data.d + 1) * sizeof(T) +
           wgmma_image_bytes(this->k_, data.d) + kernels::kKeyPad * sizeof(T) + sizeof(double) +
           data.n * (sizeof(std::int32_t) + sizeof(double) + sizeof(kernels::Recheck) + sizeof(std::int64_t) +
                     sizeof(unsigned long long)) +
           2 * sizeof(unsigned long long) +
           data.n * (2 * sizeof(std::int64_t) + sizeof(std::int32_t)) * 2 +  // the sort's buffers and workspace
           data.d * sizeof(double) + this->k_ * (3 * sizeof(double) + data.d * sizeof(T)) +  // the movers' scheme
           data.n * sizeof(unsigned long long);
  }

  void after_setup() override {
    const std::size_t n = this->n_;
    // The copy stage() made, for the same rows still here (not streamed), is adopted where this
    // path reads one; its mean is the one computed below, bit for bit (the same rows).
    const bool dot = this->params_.metric == Metric::dot;
    const bool staged = staged_rows_.get() && !this->streamed() && this->uploaded_ == this->data_ &&
                        staged_rows_.size() == n * this->d_ && !dot;
    std::size_t staged_bytes = staged ? staged_rows_.bytes() + staged_norms_.bytes() : 0;
    // Out of core, the first chunk's, on the host. The dot metric: the initial centroids' mean
    // instead (margin.hpp allows any mu): its centroids of length 1 lie far from objects that
    // are long, and the keys' error, which grows with |x - mu| |c - mu|, is then far smaller
    // than about the objects' mean (uniform [0, 1)^128, K = 1,024: |c - mu| 0.3 against 4.7).
    const std::vector<T> mean = dot      ? centroid_mean()
                                : staged ? staged_mean_
                                : this->uploaded_ == this->data_ && this->layout_ == Layout::row_major
                                    ? sampled_mean(this->x_.get(), n, this->d_, this->stream_)
                                    : sampled_mean(*this->data_, n);
    if (staged) {
      mu_ = std::move(staged_mu_);
    } else {
      mu_ = this->template device_buffer<T>(this->d_);
      CUDA_CHECK(cudaMemcpyAsync(mu_.get(), mean.data(), this->d_ * sizeof(T), cudaMemcpyHostToDevice, this->stream_));
    }
    centred_ = this->template device_buffer<T>(this->k_ * this->d_);
    norms_ = padded_keys<T>();
    cmax2_ = this->template device_buffer<double>(1);
    next_ = this->template device_buffer<std::int32_t>(n);
    xnorm2_ = staged ? std::move(staged_norms_) : this->template device_buffer<double>(n);  // written again below
    queue_ = this->template device_buffer<kernels::Recheck>(n);
    everyone_ = this->template device_buffer<std::int64_t>(n);
    all_min_ = this->template device_buffer<unsigned long long>(n);
    rows_grid_ = static_cast<int>(std::min<std::size_t>((n + 7) / 8, std::size_t{sms()} * 8));
    // The sort by label: its buffers and workspace, label bits, and the chunks' launch shape.
    index_ = this->template device_buffer<std::int64_t>(n);
    sorted_index_ = this->template device_buffer<std::int64_t>(n);
    sorted_labels_ = this->template device_buffer<std::int32_t>(n);
    label_bits_ = 1;
    while ((std::size_t{1} << label_bits_) < this->k_) ++label_bits_;
    std::size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, next_.get(), sorted_labels_.get(), index_.get(),
                                               sorted_index_.get(), static_cast<std::int64_t>(n), 0, label_bits_,
                                               this->stream_));
    sort_temp_ = this->template device_buffer<unsigned char>(temp_bytes);
    sorted_threads_ = kernels::coordinate_threads(static_cast<int>(this->d_));
    const std::size_t sms = this->sms();
    sorted_chunk_ = static_cast<int>(std::clamp<std::size_t>(n / (sms * 8), 16, kernels::kSortedChunk));
    sorted_grid_ = static_cast<int>(std::min<std::size_t>((n + sorted_chunk_ - 1) / sorted_chunk_, sms * 16));
    // Double, by default: the candidates from the TF32 kernels on a float copy of the centred
    // objects (margin.hpp: tf32_candidates_bound), seq's formula in double for the close calls
    // -- 1.1-3.0x faster than FP64 DMMA keys on the real-data rows (H100; 1.12-3.13x on the H100 rows of docs/performance.md). Needs the
    // copy (4 bytes per coordinate) in free memory, the whole problem in memory, no
    // --device-memory cap, and every |x| and initial |c| at most 2^48 (float's range for the
    // keys). FusedConfig::tf32_in_double off keeps FP64 DMMA keys.
    tf32_ = false;
    if constexpr (std::is_same_v<T, double>) {
      const std::size_t copy = (n + this->k_) * this->d_ * sizeof(float) + (this->k_ + this->d_) * sizeof(float);
      tf32_ = this->params_.fused.tf32_in_double && !this->streamed() && this->params_.device_memory == 0 &&
              this->whole_.max_abs <= 0x1p48 && initial_max_ <= 0x1p48 && device_budget(0) + staged_bytes >= copy;
      if (tf32_) {
        operand32_ = staged ? std::move(staged_rows_) : this->template device_buffer<float>(n * this->d_);
        centred32_ = this->template device_buffer<float>(this->k_ * this->d_);
        keyed32_ = padded_keys<float>();
        mu32_ = this->template device_buffer<float>(this->d_);  // the kernels' mu argument (unused by both)
        const std::vector<float> mean32(mean.begin(), mean.end());
        CUDA_CHECK(cudaMemcpyAsync(mu32_.get(), mean32.data(), this->d_ * sizeof(float), cudaMemcpyHostToDevice,
                                   this->stream_));
        CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // before mean32 goes
      }
    }
    // The movers' scheme (iterate): z = mu in double, each cluster's q sum, the inertia's parts,
    // the centroids kept for the host when the algebraic inertia's bound fails.
    // FusedConfig::movers_after: from the iteration after one in which at most that fraction of
    // the objects moved (0: never; 1: from the second iteration); the guard as for the one pass.
    {
      // (Sample weights: never; the movers' q sums and counts count objects.)
      movers_after_ = this->data_->weighted() ? 0.0 : this->params_.fused.movers_after.value_or(kMoversAfter);
      q_guard_ = this->params_.fused.guard;
      held_ = movers_ = this->keep_sums_ = false;
      last_changed_ = 0;
      z64_ = this->template device_buffer<double>(this->d_);
      const std::vector<double> z(mean.begin(), mean.end());
      CUDA_CHECK(cudaMemcpyAsync(z64_.get(), z.data(), z.size() * sizeof(double), cudaMemcpyHostToDevice,
                                 this->stream_));
      CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // before z goes
      q_sums_ = this->template device_buffer<unsigned long long>(this->k_);
      parts_ = this->template device_buffer<double>(2 * this->k_);
      previous_ = this->template device_buffer<T>(this->k_ * this->d_);
      if (!this->streamed() && movers_after_ > 0)  // filled by centred_row_norms
        object_q_ = this->template device_buffer<unsigned long long>(n);
      else
        object_q_ = DeviceBuffer<unsigned long long>();
    }
    mu_norm_ = 0;
    for (T v : mean) mu_norm_ += static_cast<double>(v) * static_cast<double>(v);
    mu_norm_ = kernels_.centre_objects || tf32_ ? 0.0 : std::sqrt(mu_norm_) * (1 + 1e-12);
    // Float, in memory: the objects centred and rounded to TF32 once, in a copy the assignment
    // reads with ldmatrix (no subtraction and conversion per fragment element and tile), when
    // the copy fits in what is free. Out of core, under --device-memory, or with
    // FusedConfig::tensor_copy off the assignment forms them itself (the same operands bit for bit).
    // (Float: stage()'s copy is this one, float rows centred on the same mu and rounded alike;
    // the rounding flag below changes only |x'|^2, which the launch writes afresh.)
    // Where the float16 wgmma kernel runs (sm_90, d 36-128 a multiple of 4), a float16 copy
    // instead (float16_copy; stage()'s TF32 copy freed first).
    bool adopted = tf32_ && staged;
    half_ = false;
    operand16_ = DeviceBuffer<unsigned short>();
    operand_ = DeviceBuffer<T>();
    const bool copy = kernels_.assign_pre && !this->streamed() && this->params_.device_memory == 0 &&
                      this->params_.fused.tensor_copy;
    if (copy && half_kernel_.kernel &&
        device_budget(0) + staged_bytes >= n * kernels::float16_row_stride(this->d_) * sizeof(unsigned short)) {
      if (!tf32_ && staged_rows_.get()) {  // stage()'s TF32 copy: freed, no longer counted as free
        staged_rows_ = DeviceBuffer<float>();
        staged_bytes = 0;
      }
      half_ = float16_copy();
    }
    if (!half_ && copy && device_budget(0) + staged_bytes >= n * this->d_ * sizeof(T)) {
      if constexpr (std::is_same_v<T, float>) {
        adopted = staged && staged_rows_.get();
        operand_ = adopted ? std::move(staged_rows_) : this->template device_buffer<T>(n * this->d_);
      } else {
        operand_ = this->template device_buffer<T>(n * this->d_);
      }
    }
    staged_rows_ = DeviceBuffer<float>();  // not adopted: freed (its norms and mu, too)
    staged_norms_ = DeviceBuffer<double>();
    staged_mu_ = DeviceBuffer<T>();
    shared_ = CentredRows{};
    // An adopted copy is not written again (the same values); |x'|^2 and the movers' q are.
    if (tf32_)
      kernels::centred_row_norms<T, float><<<rows_grid_, 256, 0, this->stream_>>>(
          this->x_.get(), mu_.get(), static_cast<std::int64_t>(n), static_cast<int>(this->d_), true, xnorm2_.get(),
          adopted ? static_cast<float*>(nullptr) : operand32_.get(), z64_.get(), this->inertia_scale_,
          object_q_.get());
    else
      kernels::centred_row_norms<T><<<rows_grid_, 256, 0, this->stream_>>>(
          this->x_.get(), mu_.get(), static_cast<std::int64_t>(n), static_cast<int>(this->d_), kernels_.centre_objects,
          xnorm2_.get(), adopted ? static_cast<T*>(nullptr) : operand_.get(), z64_.get(), this->inertia_scale_,
          object_q_.get());
    CUDA_CHECK_LAUNCH();
    if (wgmma_runs())  // the wgmma kernel's stages come from the centroids' tile image
      image_ = this->template device_buffer<float>(wgmma_image_bytes(this->k_, this->d_, half_) / sizeof(float));
    after_update();
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // before `mean` goes
  }
  // Whether the assignment runs the wgmma kernel (which reads the centroids' tile image).
  bool wgmma_runs() const { return half_ || (tf32_ ? tf32_kernels_.wgmma : operand_.get() && kernels_.wgmma); }

  // Float, where the float16 wgmma kernel runs: the objects' operand as float16, centred on mu
  // and scaled by 2^ex from their largest |x'_p| (margin.hpp: f16_candidates_bound), in place of
  // the TF32 copy -- 2 bytes a coordinate read an iteration instead of 4, at twice TF32's rate.
  // False (nothing made) where the largest |x'_p| is not finite (the front ends refuse NaN and
  // infinite data before this; fmaxf would pass over a NaN).
  bool float16_copy() {
    if constexpr (!std::is_same_v<T, float>) {
      return false;
    } else {
      const auto n = static_cast<std::int64_t>(this->n_);
      const int d = static_cast<int>(this->d_);
      const std::size_t count = this->n_ * this->d_;
      const auto grid = static_cast<unsigned>(std::min<std::size_t>((count + 255) / 256, std::size_t{sms()} * 16));
      DeviceBuffer<unsigned> largest = this->template device_buffer<unsigned>(1);
      CUDA_CHECK(cudaMemsetAsync(largest.get(), 0, sizeof(unsigned), this->stream_));
      kernels::centred_abs_max<T><<<grid, 256, 0, this->stream_>>>(this->x_.get(), mu_.get(), n, d, largest.get());
      CUDA_CHECK_LAUNCH();
      unsigned bits = 0;
      CUDA_CHECK(cudaMemcpyAsync(&bits, largest.get(), sizeof bits, cudaMemcpyDeviceToHost, this->stream_));
      CUDA_CHECK(cudaStreamSynchronize(this->stream_));
      float m = 0;
      std::memcpy(&m, &bits, sizeof m);
      if (!std::isfinite(m)) return false;
      const int ex = kernels::f16_scale_exponent(m);
      half_bound_ = kernels::f16_candidates_bound(this->d_, ex);
      operand16_ = this->template device_buffer<unsigned short>(this->n_ * kernels::float16_row_stride(this->d_));
      kernels::float16_centred_copy<T><<<grid, 256, 0, this->stream_>>>(this->x_.get(), mu_.get(), n, d,
                                                                       std::ldexp(1.0f, ex), operand16_.get());
      CUDA_CHECK_LAUNCH();
      return true;
    }
  }

  // A buffer for the centroids' key terms, padded with +inf to a multiple of kKeyPad entries
  // (candidate_lists.cuh); centre_centroids writes the first k.
  template <class K>
  DeviceBuffer<K> padded_keys() {
    const std::size_t k = this->k_, padded = (k + kernels::kKeyPad - 1) / kernels::kKeyPad * kernels::kKeyPad;
    DeviceBuffer<K> keys = this->template device_buffer<K>(padded);
    const std::vector<K> tail(padded - k, std::numeric_limits<K>::infinity());
    if (!tail.empty()) {
      CUDA_CHECK(cudaMemcpyAsync(keys.get() + k, tail.data(), tail.size() * sizeof(K), cudaMemcpyHostToDevice,
                                 this->stream_));
      CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // before `tail` goes
    }
    return keys;
  }

  void rows_changed() override {  // out of core: the chunk's |x'|^2
    kernels::centred_row_norms<T><<<rows_grid_, 256, 0, this->stream_>>>(
        this->x_.get(), mu_.get(), static_cast<std::int64_t>(this->n_), static_cast<int>(this->d_),
        kernels_.centre_objects, xnorm2_.get(), static_cast<T*>(nullptr));
    CUDA_CHECK_LAUNCH();
  }

  // The mean of the initial centroids, in double, rounded to T.
  std::vector<T> centroid_mean() {
    std::vector<T> c;
    this->download_centroids(this->centroids_.get(), c);
    std::vector<double> sum(this->d_, 0.0);
    for (std::size_t i = 0; i < this->k_; ++i)
      for (std::size_t j = 0; j < this->d_; ++j) sum[j] += static_cast<double>(c[i * this->d_ + j]);
    std::vector<T> mean(this->d_);
    for (std::size_t j = 0; j < this->d_; ++j) mean[j] = static_cast<T>(sum[j] / static_cast<double>(this->k_));
    return mean;
  }

  void after_update() override {  // c' = c - mu, |c'|^2 and the largest, for the new centroids
    const int k = static_cast<int>(this->k_);
    CUDA_CHECK(cudaMemsetAsync(cmax2_.get(), 0, sizeof(double), this->stream_));
    if (tf32_)  // the objects are centred too: keyed = |c'|^2
      kernels::centre_centroids<T, float><<<(k * 32 + 255) / 256, 256, 0, this->stream_>>>(
          this->centroids_.get(), mu_.get(), k, static_cast<int>(this->d_), false, centred32_.get(), keyed32_.get(),
          cmax2_.get());
    else
      kernels::centre_centroids<T><<<(k * 32 + 255) / 256, 256, 0, this->stream_>>>(
          this->centroids_.get(), mu_.get(), k, static_cast<int>(this->d_), !kernels_.centre_objects, centred_.get(),
          norms_.get(), cmax2_.get());
    CUDA_CHECK_LAUNCH();
    if (image_.get()) {
      if constexpr (std::is_same_v<T, float>)
        wgmma_image(centred_.get(), k, static_cast<int>(this->d_), cmax2_.get(), image_.get(), half_, this->stream_);
      else  // double: only on TF32 candidates
        wgmma_image(centred32_.get(), k, static_cast<int>(this->d_), cmax2_.get(), image_.get(), false, this->stream_);
    }
  }

  void assign(bool accumulate) override {
    const auto n = static_cast<std::int64_t>(this->n_);
    const int d = static_cast<int>(this->d_), k = static_cast<int>(this->k_);
    cudaStream_t s = this->stream_;
    unsigned long long* queued = this->counters_.get()->queued;
    // (An iteration's counters, these included, were cleared at its start: reset_changed. The final
    // E-step, and each streamed chunk, clear the queues' lengths here.)
    if (!accumulate || this->streamed()) CUDA_CHECK(cudaMemsetAsync(queued, 0, 2 * sizeof(unsigned long long), s));
    const bool copied = operand_.get() != nullptr;
    const std::size_t rows = copied ? kernels_.pre_rows : kernels_.rows;
    const auto blocks = static_cast<unsigned>((this->n_ + rows - 1) / rows);
    bool launched = false;
    if (tf32_) {  // double on TF32 candidates: the float kernels on the float copy
      const TensorKernels<float>& f = tf32_kernels_;
      const auto tf32_blocks = static_cast<unsigned>((this->n_ + f.pre_rows - 1) / f.pre_rows);
      if (f.wgmma)
        f.wgmma_kernel<<<tf32_blocks, f.pre_threads, f.pre_smem, s>>>(
            operand32_.get(), image_.get(), centred32_.get(), keyed32_.get(), cmax2_.get(), xnorm2_.get(), 0.0, n, d, k,
            tf32_bound_, next_.get(), queue_.get(), everyone_.get(), queued, this->labels_.get(), nullptr);
      else
        f.assign_pre<<<tf32_blocks, f.pre_threads, f.pre_smem, s>>>(
            operand32_.get(), mu32_.get(), centred32_.get(), keyed32_.get(), cmax2_.get(), xnorm2_.get(), 0.0, n, d,
            k, tf32_bound_, next_.get(), queue_.get(), everyone_.get(), queued, this->labels_.get());
      launched = true;
    }
    if constexpr (std::is_same_v<T, float>)
      if (half_) {  // the centred objects and centroids as scaled float16
        const auto half_blocks = static_cast<unsigned>((this->n_ + half_kernel_.rows - 1) / half_kernel_.rows);
        half_kernel_.kernel<<<half_blocks, half_kernel_.threads, half_kernel_.smem, s>>>(
            operand16_.get(), image_.get(), centred_.get(), norms_.get(), cmax2_.get(), xnorm2_.get(), mu_norm_, n, d,
            k, half_bound_, next_.get(), queue_.get(), everyone_.get(), queued, this->labels_.get(), nullptr);
        launched = true;
      }
    if constexpr (std::is_same_v<T, float>)
      if (!launched && copied && kernels_.wgmma) {  // the previous labels give each object a threshold (margin.hpp)
        kernels_.wgmma_kernel<<<blocks, kernels_.pre_threads, kernels_.pre_smem, s>>>(
            operand_.get(), image_.get(), centred_.get(), norms_.get(), cmax2_.get(), xnorm2_.get(), mu_norm_, n, d, k,
            bound_, next_.get(), queue_.get(), everyone_.get(), queued, this->labels_.get(), nullptr);
        launched = true;
      }
    if (!launched)
      (copied ? kernels_.assign_pre : kernels_.assign)<<<blocks, copied ? kernels_.pre_threads : kernels_.threads,
                                                         copied ? kernels_.pre_smem : kernels_.smem, s>>>(
          copied ? operand_.get() : this->x_.get(), mu_.get(), centred_.get(), norms_.get(), cmax2_.get(),
          xnorm2_.get(), mu_norm_, n, d, k, bound_, next_.get(), queue_.get(), everyone_.get(), queued,
          this->labels_.get());
    CUDA_CHECK_LAUNCH();
    kernels::recheck_nearest<T><<<sms() * 8, kernels::kNearestThreads, 0, s>>>(
        this->x_.get(), this->centroids_.get(), d, queue_.get(), queued, everyone_.get(), all_min_.get(), next_.get());
    CUDA_CHECK_LAUNCH();
    const unsigned all_grid = sms() * 16;
    kernels::recheck_all<T, false><<<all_grid, kernels::kAllWarps * 32, 0, s>>>(
        this->x_.get(), this->centroids_.get(), d, k, everyone_.get(), queued + 1, all_min_.get(), next_.get());
    CUDA_CHECK_LAUNCH();
    if constexpr (std::is_same_v<T, float>)
      kernels::recheck_all_labels<<<sms() * 2, 256, 0, s>>>(
          everyone_.get(), queued + 1, all_min_.get(), next_.get());
    else
      kernels::recheck_all<T, true><<<all_grid, kernels::kAllWarps * 32, 0, s>>>(
          this->x_.get(), this->centroids_.get(), d, k, everyone_.get(), queued + 1, all_min_.get(), next_.get());
    CUDA_CHECK_LAUNCH();
    if (accumulate && movers_) {  // the kept sums: only the movers, the inertia from the sums
      kernels::move_members<T><<<sms() * 8, 256, 0, s>>>(
          this->x_.get(), next_.get(), this->labels_.get(), n, d, this->sums_.get(), this->counts_.get(),
          this->scale_, object_q_.get(), q_sums_.get(), this->changed_.get());
      CUDA_CHECK_LAUNCH();
      kernels::movers_parts<T><<<static_cast<unsigned>((k + 7) / 8), 256, 0, s>>>(
          this->centroids_.get(), this->sums_.get(), this->counts_.get(), q_sums_.get(), z64_.get(), k, d,
          this->inv_scale_, this->inertia_scale_, parts_.get());
      CUDA_CHECK_LAUNCH();
      kernels::movers_inertia<T><<<1, 1024, 0, s>>>(this->centroids_.get(), k, d, this->inertia_scale_, q_guard_,
                                                    parts_.get(), this->inertia_.get(), previous_.get());
      CUDA_CHECK_LAUNCH();
    } else if (accumulate) {
      // Sort the objects by label, then sum each cluster's members in chunks of that order
      // (with the sums kept, the q sums too).
      kernels::relabel_for_sort<<<static_cast<unsigned>((this->n_ + 255) / 256), 256, 0, s>>>(
          next_.get(), this->labels_.get(), n, this->changed_.get(), index_.get());
      CUDA_CHECK_LAUNCH();
      std::size_t temp_bytes = sort_temp_.size();
      CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp_.get(), temp_bytes, next_.get(), sorted_labels_.get(),
                                                 index_.get(), sorted_index_.get(), n, 0, label_bits_, s));
      (this->weights()    ? kernels::accumulate_sorted<T, kernels::kSortedUnroll, false, true>
       : this->keep_sums_ ? kernels::accumulate_sorted<T, kernels::kSortedUnroll, true>
                          : kernels::accumulate_sorted<T>)<<<sorted_grid_, sorted_threads_, 0, s>>>(
          this->x_.get(), this->centroids_.get(), sorted_labels_.get(), sorted_index_.get(), n, d, sorted_chunk_,
          this->sums_.get(), this->counts_.get(), this->scale_, this->inertia_.get(), this->inertia_scale_,
          object_q_.get(), q_sums_.get(), this->weights(), this->weight_scale_);
      CUDA_CHECK_LAUNCH();
    } else {  // the final E-step: the labels only
      kernels::relabel_for_sort<<<static_cast<unsigned>((this->n_ + 255) / 256), 256, 0, s>>>(
          next_.get(), this->labels_.get(), n, nullptr, index_.get());
      CUDA_CHECK_LAUNCH();
    }
  }

  // The movers' scheme (iterate): from after an iteration in which at most this fraction moved
  // (against full sums: 0.75-0.81x the time on the H100 rows of docs/performance.md).
  static constexpr double kMoversAfter = 0.2;
  double movers_after_ = kMoversAfter, q_guard_ = 1e-11;
  bool held_ = false;    // sums_, counts_ and q_sums_ are those of the current labels
  bool movers_ = false;  // this iteration moves the movers only
  std::int64_t last_changed_ = 0;
  DeviceBuffer<double> z64_, parts_;
  DeviceBuffer<unsigned long long> q_sums_, object_q_;  // each cluster's, each object's q = |x - z|^2 (fixed)
  DeviceBuffer<T> previous_;
  TensorKernels<T> kernels_;
  kernels::CandidateBound bound_;
  int rows_grid_ = 1, sorted_grid_ = 1, sorted_threads_ = 32, sorted_chunk_ = kernels::kSortedChunk, label_bits_ = 1;
  DeviceBuffer<std::int64_t> index_, sorted_index_;
  DeviceBuffer<std::int32_t> sorted_labels_;
  DeviceBuffer<unsigned char> sort_temp_;
  DeviceBuffer<T> mu_, centred_, norms_;
  DeviceBuffer<T> operand_;  // float, when it fits: x - mu rounded to TF32 (centred_row_norms)
  // Double on TF32 candidates (tf32_): the float kernels, their bound, the objects' float copy
  // (x - mu rounded to TF32), the centroids' (c - mu, TF32) and their |c'|^2 in float.
  bool tf32_ = false;
  double initial_max_ = 0;
  // stage()'s centred copy (for --init=kmeans||), until after_setup adopts or frees it.
  DeviceBuffer<float> staged_rows_;
  DeviceBuffer<double> staged_norms_;
  DeviceBuffer<T> staged_mu_;
  std::vector<T> staged_mean_;
  CentredRows shared_;
  TensorKernels<float> tf32_kernels_;
  kernels::CandidateBound tf32_bound_;
  DeviceBuffer<float> operand32_, centred32_, keyed32_, mu32_;
  DeviceBuffer<float> image_;  // the centred centroids' tile image (TF32 or float16), when wgmma_runs()
  // Float on float16 tensor cores (float16_copy): the objects' float16 operand, the kernel and its bound.
  bool half_ = false;
  DeviceBuffer<unsigned short> operand16_;
  WgmmaAssign half_kernel_;
  kernels::CandidateBound half_bound_;
  DeviceBuffer<double> cmax2_, xnorm2_;
  DeviceBuffer<std::int32_t> next_;
  DeviceBuffer<kernels::Recheck> queue_;
  DeviceBuffer<std::int64_t> everyone_;
  // recheck_all's least sum per queued object (its bits; float: with the centroid's index in the low word)
  DeviceBuffer<unsigned long long> all_min_;
  double mu_norm_ = 0;
};

template <class T>
std::unique_ptr<Engine<T>> make_fused_tensor(const Params& params) {
  return std::make_unique<FusedTensor<T>>(params);
}
template std::unique_ptr<Engine<float>> make_fused_tensor(const Params&);
template std::unique_ptr<Engine<double>> make_fused_tensor(const Params&);

}  // namespace km::gpu
