// k-means++ and k-means|| on the GPU: the data-sized steps of the drivers in init_plusplus.cpp
// and init_parallel.cpp (the distance passes, the chunk sums, the draws' walks; k-means||'s
// draws, nearest candidates and counts) as kernels (kernels/kmeans/kmeanspp.cuh), the sampling
// and the choices left to the shared drivers, so the centres are the CPU's, bit for bit.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "common/errors.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "cuda/timer.hpp"
#include "kernels/kmeans/kmeanspp.cuh"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/gpu/device_update.hpp"
#include "kmeans/gpu/tensor_nearest.hpp"
#include "kmeans/init.hpp"

namespace km {

namespace {

using cuda::DeviceBuffer;

// What both initialisations keep on the device: the data, each object's closest distance, the
// distance pass to given centres and the chunk sums.
template <class T>
class GpuDistances {
 protected:
  // `bytes`: what the caller will add beyond the data, closest and the chunk sums of `rows` rows.
  // `device_rows`: the data already on the device (row-major; an engine's copy), else uploaded.
  // The chunk sums over `chunk` objects each (kSumChunk: k-means++'s; kParallelChunk: k-means||'s).
  GpuDistances(const Dataset<T>& data, const T* device_rows, std::size_t rows, std::size_t bytes, const char* what,
               std::size_t chunk)
      : data_(data), n_(data.n), d_(data.d), chunk_(chunk), chunks_((data.n + chunk - 1) / chunk) {
    lap("stream made");
    check_device_memory((device_rows ? 0 : n_ * d_ * sizeof(T)) + n_ * sizeof(double) + d_ * sizeof(double) +
                            chunks_ * rows * sizeof(double) + bytes,
                        what, "use fewer objects or --init=random");
    if (device_rows) {
      x_ = device_rows;
    } else {
      own_ = DeviceBuffer<T>(n_ * d_);
      cuda::upload(own_.get(), data.values.data(), n_ * d_ * sizeof(T), stream_);
      x_ = own_.get();
    }
    lap(device_rows ? "memory checked (the engine's copy of the data)" : "memory checked, data uploaded");
    closest_ = DeviceBuffer<double>(n_, stream_);
    sums_ = DeviceBuffer<double>(chunks_ * rows, stream_);
    lap("closest allocated");
  }
  // With parallel_verbose (kmeans --init-timings): the time since the last lap, the stream drained.
  void lap(const char* what) {
    if (!verbose_) return;
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "k-means||: %s, %.4f s\n", what, std::chrono::duration<double>(now - lap_).count());
    lap_ = now;
  }
  // The chosen centre is one of the candidates just weighed (the driver's greedy choice): its
  // row of mins is already min(closest, distance to it), computed as closest_pass would (the same
  // distance, summed in the same order, and the same min), and its chunk sums came back with the
  // others, so closest takes that row and no second pass reads the data. Otherwise, the pass.
  // The distance pass over `count` centres (centres_, [count][d] doubles), G of them at a time
  // (the smallest of 1, 2, 4, 8, 16 that holds them, else 16).
  void distances(int count, bool first, double* mins) {
    auto launch = [&](auto kernel) {
      kernel<<<row_blocks(), kernels::kPlusPlusRows, 0, stream_>>>(x_, static_cast<std::int64_t>(n_),
                                                                   static_cast<int>(d_), centres_.get(), count, first,
                                                                   closest_.get(), mins);
    };
    if (count <= 1)
      launch(kernels::plusplus_distances<T, 1>);
    else if (count <= 2)
      launch(kernels::plusplus_distances<T, 2>);
    else if (count <= 4)
      launch(kernels::plusplus_distances<T, 4>);
    else if (count <= 8)
      launch(kernels::plusplus_distances<T, 8>);
    else
      launch(kernels::plusplus_distances<T, 16>);
    CUDA_CHECK_LAUNCH();
  }

  unsigned row_blocks() const {
    return static_cast<unsigned>((n_ + kernels::kPlusPlusRows - 1) / kernels::kPlusPlusRows);
  }

  // Objects `rows` as doubles [rows][d] into centres_ (grown to hold them), gathered on the device
  // from x_ (data on the device: a cudaMemcpy a row cost 19.7 ms of a 602 ms fit at 60000 x 784,
  // K = 256, H200). (The indices' copy from pageable memory is staged before it returns.)
  void upload_rows(const std::vector<std::size_t>& rows) {
    const std::size_t m = rows.size();
    if (centres_.size() < m * d_) centres_ = DeviceBuffer<double>(m * d_, stream_);
    if (row_index_.size() < m) row_index_ = DeviceBuffer<std::int64_t>(m, stream_);
    index_staging_.assign(rows.begin(), rows.end());
    CUDA_CHECK(cudaMemcpyAsync(row_index_.get(), index_staging_.data(), m * sizeof(std::int64_t),
                               cudaMemcpyHostToDevice, stream_));
    kernels::gather_rows<T, double><<<static_cast<unsigned>(m), 128, 0, stream_>>>(
        x_, row_index_.get(), static_cast<int>(d_), centres_.get());
    CUDA_CHECK_LAUNCH();
  }

  // closest = min(closest, the distance to object `centre`), or with `first` that distance.
  void closest_pass(std::size_t centre, bool first, std::vector<double>& chunk_sums) {
    upload_rows({centre});
    distances(1, first, nullptr);
    sums_of(closest_.get(), 1, chunk_sums);
  }

  // closest = 0 (and nearest = -1 where given) for the rows of length 0 (cosine and dot).
  void skip_zero_rows(std::int32_t* nearest) {
    kernels::plusplus_skip_zero_rows<<<row_blocks(), kernels::kPlusPlusRows, 0, stream_>>>(
        x_, static_cast<std::int64_t>(n_), static_cast<int>(d_), closest_.get(), nearest);
    CUDA_CHECK_LAUNCH();
  }

  // out[ch * rows + r]: chunk ch's sum of row r of `values` ([rows][n]). Waits for the stream.
  void sums_of(const double* values, int rows, std::vector<double>& out) {
    const std::size_t count = chunks_ * static_cast<std::size_t>(rows);
    const auto sum_blocks = static_cast<unsigned>((count + kernels::kSumWarps - 1) / kernels::kSumWarps);
    kernels::plusplus_chunk_sums<<<sum_blocks, kernels::kSumWarps * 32, 0, stream_>>>(
        values, static_cast<std::int64_t>(n_), rows, static_cast<std::int64_t>(chunk_),
        static_cast<std::int64_t>(chunks_), sums_.get());
    CUDA_CHECK_LAUNCH();
    out.resize(count);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), sums_.get(), count * sizeof(double), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  const bool verbose_ = parallel_verbose();
  std::chrono::steady_clock::time_point lap_ = std::chrono::steady_clock::now();
  const Dataset<T>& data_;
  std::size_t n_, d_, chunk_, chunks_;
  cuda::Stream stream_;
  DeviceBuffer<T> own_;  // the data, when no device copy was given
  const T* x_ = nullptr;
  DeviceBuffer<double> closest_, centres_, sums_;
  DeviceBuffer<std::int64_t> row_index_;
  std::vector<std::int64_t> index_staging_;
};

template <class T>
class GpuPlusPlus final : public PlusPlusSteps, GpuDistances<T> {
  using B = GpuDistances<T>;
  using B::chunks_, B::closest_, B::n_, B::stream_;

 public:
  GpuPlusPlus(const Dataset<T>& data, std::size_t max_trials, const T* device_rows, bool skip_zero)
      : B(data, device_rows, max_trials, data.n * sizeof(double) * max_trials + max_trials * data.d * sizeof(double),
          "--init=kmeans++ on the GPU", kSumChunk),
        skip_zero_(skip_zero) {
    mins_ = DeviceBuffer<double>(n_ * max_trials);
    walk_chunks_ = DeviceBuffer<std::int64_t>(max_trials);
    walk_cands_ = DeviceBuffer<std::int64_t>(max_trials);
    walk_r_ = DeviceBuffer<double>(max_trials);
  }

  // With skip_zero, rows of length 0 then get closest 0 (no share), before the chunk sums.
  void start(std::size_t first, std::vector<double>& chunk_sums) override {
    B::upload_rows({first});
    B::distances(1, true, nullptr);
    if (skip_zero_) B::skip_zero_rows(nullptr);
    B::sums_of(closest_.get(), 1, chunk_sums);
  }
  // The chosen centre is one of the candidates just weighed (the driver's greedy choice): its
  // row of mins is already min(closest, distance to it), computed as closest_pass would (the same
  // distance, summed in the same order, and the same min), and its chunk sums came back with the
  // others, so closest takes that row and no second pass reads the data. Otherwise, the pass.
  void choose(std::size_t centre, std::vector<double>& chunk_sums) override {
    const auto it = std::find(last_cands_.begin(), last_cands_.end(), centre);
    if (it == last_cands_.end()) {
      B::closest_pass(centre, false, chunk_sums);
      return;
    }
    const std::size_t t = static_cast<std::size_t>(it - last_cands_.begin()), trials = last_cands_.size();
    CUDA_CHECK(cudaMemcpyAsync(closest_.get(), mins_.get() + t * n_, n_ * sizeof(double), cudaMemcpyDeviceToDevice,
                               stream_));
    chunk_sums.resize(chunks_);
    for (std::size_t ch = 0; ch < chunks_; ++ch) chunk_sums[ch] = last_sums_[ch * trials + t];
    last_cands_.clear();  // closest has moved on: these rows are stale
  }

  void walk(std::vector<Draw>& draws) override {
    const int count = static_cast<int>(draws.size());
    std::vector<std::int64_t> chunks(count), cands(count);
    std::vector<double> rs(count);
    for (int t = 0; t < count; ++t) {
      chunks[t] = static_cast<std::int64_t>(draws[t].chunk);
      rs[t] = draws[t].r;
    }
    CUDA_CHECK(cudaMemcpyAsync(walk_chunks_.get(), chunks.data(), count * sizeof(std::int64_t), cudaMemcpyHostToDevice,
                               stream_));
    CUDA_CHECK(cudaMemcpyAsync(walk_r_.get(), rs.data(), count * sizeof(double), cudaMemcpyHostToDevice, stream_));
    kernels::plusplus_walk<<<(count + kernels::kSumWarps - 1) / kernels::kSumWarps, kernels::kSumWarps * 32, 0,
                             stream_>>>(closest_.get(), static_cast<std::int64_t>(n_),
                                        static_cast<std::int64_t>(kSumChunk), walk_chunks_.get(), walk_r_.get(), count,
                                        walk_cands_.get());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(cands.data(), walk_cands_.get(), count * sizeof(std::int64_t), cudaMemcpyDeviceToHost,
                               stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (int t = 0; t < count; ++t) draws[t].cand = static_cast<std::size_t>(cands[t]);
  }

  void candidate_sums(const std::vector<std::size_t>& cands, std::vector<double>& out) override {
    const int trials = static_cast<int>(cands.size());
    B::upload_rows(cands);
    B::distances(trials, false, mins_.get());
    B::sums_of(mins_.get(), trials, out);
    last_cands_ = cands;
    last_sums_ = out;
  }

 private:
  const bool skip_zero_;
  DeviceBuffer<double> mins_;
  std::vector<std::size_t> last_cands_;  // the candidates whose rows mins_ holds, and their chunk sums
  std::vector<double> last_sums_;
  DeviceBuffer<std::int64_t> walk_chunks_, walk_cands_;
  DeviceBuffer<double> walk_r_;
};

// k-means||'s steps. A round's candidates meet the objects on the tensor cores where they can
// (tensor_nearest.hpp: fused's TF32 kernels, the N x m matrix never written, the close calls
// re-checked with the CPU's formula), then parallel_take keeps the nearer of that candidate
// and closest. Otherwise (no TF32, |x| > 2^48, no room for the float copy, or
// GpuInitConfig::nearest = gemm), through a GEMM (cuBLAS in T, pedantic: x . c for a tile of
// objects against a block of candidates, never the whole N x m), then parallel_nearest finds
// each object's least score and re-checks, with the CPU's direct formula, every candidate
// within the GEMM's proven error of it (kernels/kmeans/kmeanspp.cuh: parallel_window). Either
// way closest and nearest are the CPU's bit for bit.
template <class T>
class GpuParallel final : public ParallelSteps, GpuDistances<T> {
  using B = GpuDistances<T>;
  using B::closest_, B::d_, B::lap, B::n_, B::stream_, B::verbose_, B::x_;
  static constexpr std::size_t kGemmBytes = std::size_t{256} << 20;  // the GEMM's tile of scores
  static constexpr std::size_t kBlock = 4096;                          // candidates a GEMM at most

 public:
  GpuParallel(const Dataset<T>& data, const T* device_rows, const CentredRows* centred, const GpuInitConfig& config,
              bool skip_zero)
      : B(data, device_rows, 1, data.n * (sizeof(double) + sizeof(std::int32_t) + 1 + sizeof(std::int64_t)) + kGemmBytes,
          "--init=kmeans|| on the GPU", kParallelChunk),
        config_(config),
        skip_zero_(skip_zero) {
    if (n_ > static_cast<std::size_t>(INT32_MAX))
      throw UsageError("--init=kmeans|| on the GPU: at most 2^31 - 1 objects");
    nearest_ = DeviceBuffer<std::int32_t>(n_, stream_);
    flags_ = DeviceBuffer<unsigned char>(n_, stream_);
    drawn_ = DeviceBuffer<std::int64_t>(n_, stream_);
    drawn_count_ = DeviceBuffer<std::int64_t>(1, stream_);
    rechecked_ = DeviceBuffer<unsigned long long>(1, stream_);
    std::size_t temp = 0;
    CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, temp, thrust::counting_iterator<std::int64_t>(0), flags_.get(),
                                          drawn_.get(), drawn_count_.get(), static_cast<std::int64_t>(n_), stream_));
    select_temp_ = DeviceBuffer<unsigned char>(temp, stream_);
    CUDA_CHECK(cudaMemsetAsync(rechecked_.get(), 0, sizeof(unsigned long long), stream_));
    if (config_.nearest != GpuInitConfig::Nearest::gemm) {
      // Every |x_ij| bounded from the tensor path's own centred copy (no pass of its own), or
      // known from the host's range check.
      // The engine's centred copy when it made one (only of the rows this reads).
      const CentredRows* shared = centred && centred->rows && x_ == device_rows ? centred : nullptr;
      tensor_ = gpu::make_tensor_nearest(data, x_, shared ? shared->max_abs : -INFINITY, stream_.get(), shared);
      if (tensor_) round_labels_ = DeviceBuffer<std::int32_t>(n_, stream_);
      lap(!tensor_ ? "no tensor path" : shared ? "the tensor path on the engine's copy" : "the tensor path's copy made");
    }
    if (!tensor_) {  // the GEMMs' scores need |x_i|^2
      xnorm_ = DeviceBuffer<double>(n_, stream_);
      kernels::parallel_row_norms<T><<<B::row_blocks(), kernels::kPlusPlusRows, 0, stream_>>>(
          x_, static_cast<std::int64_t>(n_), static_cast<int>(d_), xnorm_.get());
      CUDA_CHECK_LAUNCH();
      lap("row norms for the GEMMs");
    }
  }

  void start(std::size_t first, std::vector<double>& chunk_sums) override {
    CUDA_CHECK(cudaMemsetAsync(nearest_.get(), 0, n_ * sizeof(std::int32_t), stream_));
    B::upload_rows({first});
    B::distances(1, true, nullptr);
    if (skip_zero_) B::skip_zero_rows(nearest_.get());
    B::sums_of(closest_.get(), 1, chunk_sums);
  }

  std::vector<std::size_t> draw(std::uint64_t seed, int round, double ell, double potential) override {
    const auto n = static_cast<std::int64_t>(n_);
    kernels::parallel_draw_flags<<<grid(), 256, 0, stream_>>>(closest_.get(), n, seed, round, ell, potential,
                                                              flags_.get());
    CUDA_CHECK_LAUNCH();
    std::size_t temp = select_temp_.size();
    CUDA_CHECK(cub::DeviceSelect::Flagged(select_temp_.get(), temp, thrust::counting_iterator<std::int64_t>(0),
                                          flags_.get(), drawn_.get(), drawn_count_.get(), n, stream_));
    std::int64_t count = 0;
    CUDA_CHECK(cudaMemcpyAsync(&count, drawn_count_.get(), sizeof count, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<std::int64_t> got(static_cast<std::size_t>(count));
    if (count) {
      CUDA_CHECK(cudaMemcpyAsync(got.data(), drawn_.get(), got.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost,
                                 stream_));
      CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    return {got.begin(), got.end()};
  }

  void add(const std::vector<std::size_t>& cands, std::size_t first, std::vector<double>& chunk_sums) override {
    if (first + cands.size() > static_cast<std::size_t>(INT32_MAX))
      throw UsageError("--init=kmeans||: more than 2^31 - 1 candidates");
    const std::size_t m = cands.size(), d = d_;
    if (tensor_) {
      add_on_tensor_cores(cands, first, chunk_sums);
      return;
    }
    if (!blas_) {
      blas_ = std::make_unique<cuda::CublasHandle>(stream_);
      lap("cuBLAS handle made");
    }
    // The candidates' rows in T (the GEMM's operand) and in double (the re-check's), gathered
    // from the device's copy (data only on the device has no host rows; a cudaMemcpy a row cost
    // about 0.5 K copies a round), and their squared norms (in double, for the scores) from
    // the T rows brought back in one copy.
    if (cand_t_.size() < m * d) {
      cand_t_ = DeviceBuffer<T>(m * d);
      cand_norms_ = DeviceBuffer<double>(m);
    }
    B::upload_rows(cands);  // centres_: the rows in double; row_index_: their indices
    kernels::gather_rows<T, T><<<static_cast<unsigned>(m), 128, 0, stream_>>>(x_, B::row_index_.get(),
                                                                              static_cast<int>(d), cand_t_.get());
    CUDA_CHECK_LAUNCH();
    rows_t_.resize(m * d);
    norms_.resize(m);
    CUDA_CHECK(cudaMemcpyAsync(rows_t_.data(), cand_t_.get(), m * d * sizeof(T), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (std::size_t t = 0; t < m; ++t) {
      double s = 0;
      for (std::size_t j = 0; j < d; ++j)
        s += static_cast<double>(rows_t_[t * d + j]) * static_cast<double>(rows_t_[t * d + j]);
      norms_[t] = s;
    }
    CUDA_CHECK(cudaMemcpyAsync(cand_norms_.get(), norms_.data(), m * sizeof(double), cudaMemcpyHostToDevice, stream_));
    const std::size_t tile =
        std::max<std::size_t>(1, std::min(n_, kGemmBytes / (std::min(m, kBlock) * sizeof(T))));
    if (scores_.size() < tile * std::min(m, kBlock)) {
      scores_ = DeviceBuffer<T>(tile * std::min(m, kBlock));
      lap("scores allocated");
    }
    const double u_gemm = std::is_same_v<T, float> ? 0x1.0p-24 : 0x1.0p-53;
    const double tiny = std::is_same_v<T, float> ? 0x1.0p-126 : 0x1.0p-1022;
    const T one = 1, zero = 0;
    double gemm_s = 0, nearest_s = 0;
    lap("candidates uploaded");
    for (std::size_t b0 = 0; b0 < m; b0 += kBlock) {
      const std::size_t mb = std::min(kBlock, m - b0);
      double cmax2 = 0;
      for (std::size_t t = b0; t < b0 + mb; ++t) cmax2 = std::max(cmax2, norms_[t]);
      const double cmax = std::sqrt(cmax2) * (1 + 0x1.0p-40);
      for (std::size_t i0 = 0; i0 < n_; i0 += tile) {
        const std::size_t rows = std::min(tile, n_ - i0);
        if (verbose_) gemm_time_.start(stream_);
        // scores[r][j] = x_(i0 + r) . c_(b0 + j): column-major [mb][rows] = C^T X
        if constexpr (std::is_same_v<T, double>)
          CUBLAS_CHECK(cublasDgemm(*blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(mb), static_cast<int>(rows),
                                   static_cast<int>(d), &one, cand_t_.get() + b0 * d, static_cast<int>(d),
                                   x_ + i0 * d, static_cast<int>(d), &zero, scores_.get(),
                                   static_cast<int>(mb)));
        else
          CUBLAS_CHECK(cublasSgemm(*blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(mb), static_cast<int>(rows),
                                   static_cast<int>(d), &one, cand_t_.get() + b0 * d, static_cast<int>(d),
                                   x_ + i0 * d, static_cast<int>(d), &zero, scores_.get(),
                                   static_cast<int>(mb)));
        if (verbose_) {
          gemm_time_.stop(stream_);
          gemm_s += gemm_time_.seconds();
        }
        if (first_tile_) lap("the first GEMM");
        if (verbose_) nearest_time_.start(stream_);
        const auto blocks = static_cast<unsigned>((rows + kernels::kParallelWarps - 1) / kernels::kParallelWarps);
        kernels::parallel_nearest<T><<<blocks, kernels::kParallelWarps * 32, 0, stream_>>>(
            x_, static_cast<std::int64_t>(i0), static_cast<std::int64_t>(rows), static_cast<int>(d),
            scores_.get(), static_cast<int>(mb), static_cast<int>(first + b0), B::centres_.get() + b0 * d,
            cand_norms_.get() + b0, cmax, u_gemm, tiny, xnorm_.get(), closest_.get(), nearest_.get(),
            rechecked_.get());
        CUDA_CHECK_LAUNCH();
        if (verbose_) {
          nearest_time_.stop(stream_);
          nearest_s += nearest_time_.seconds();
        }
        if (first_tile_) lap("the first nearest pass");
        first_tile_ = false;
      }
    }
    if (verbose_) std::fprintf(stderr, "k-means||: GEMMs %.4f s, nearest passes %.4f s (events)\n", gemm_s, nearest_s);
    lap("GEMMs and nearest");
    B::sums_of(closest_.get(), 1, chunk_sums);  // waits: the host's rows may go
    lap("chunk sums");
  }

  // The reduction on the GPU: the distance table (parallel_table), then the greedy steps on a
  // grid of co-resident blocks (parallel_reduce), with the host's arithmetic and order. The
  // host's when the table (at most 1 GiB, pick_kmeans_parallel) does not fit beside the data, the
  // device has no cooperative launch, or with GpuInitConfig::reduce = host.
  std::vector<std::size_t> reduce(const std::vector<std::size_t>& cands, const std::vector<double>& weights,
                                  std::size_t k, std::uint64_t seed, std::uint64_t stream) override {
    const std::size_t d = d_;
    // (GpuInitConfig::reduce: host, or gpu — the tests' "never the host")
    if (config_.reduce == GpuInitConfig::Reduce::host) return {};
    const bool must = config_.reduce == GpuInitConfig::Reduce::gpu;
    auto refuse = [&](const char* why) -> std::vector<std::size_t> {
      if (must) throw DeviceError(strprintf("k-means||: the reduction of %zu candidates to %zu on the GPU: %s",
                                            weights.size(), k, why));
      return {};
    };
    const std::size_t m = weights.size();
    const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
    if (m > INT32_MAX / 2 || k < 2 || trials > static_cast<std::size_t>(kernels::kReduceMaxTrials))
      return refuse("out of the kernel's range");
    // GpuInitConfig::reduce_chunks_per_block = p: at least p chunks a block (the tests' several-chunks path).
    const int at_least = config_.reduce_chunks_per_block;
    int cooperative = 0, device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
    if (!cooperative) return refuse("no cooperative launch");
    lap("the weights");
    // The fewest chunks a block that lets every block be resident at once.
    const std::size_t chunks = (m + kernels::kReduceChunkMax - 1) / kernels::kReduceChunkMax;
    if (kernels::reduce_top(static_cast<int>(chunks)) > kernels::kReduceMaxTop)
      return refuse("more chunks of candidates than the kernel's tree holds");
    std::size_t per = at_least > 0 ? static_cast<std::size_t>(at_least) : 1, shared = 0,
                blocks = 0;
    for (per = std::min(per, chunks);; ++per) {
      blocks = (chunks + per - 1) / per;
      shared = kernels::reduce_shared_doubles(per, chunks, trials) * sizeof(double);
      if (shared > gpu_info().shared_optin) return refuse("the sums need more shared memory than a block has");
      cuda::opt_in_shared(kernels::parallel_reduce, shared, "--init=kmeans|| on the GPU");
      int resident = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernels::parallel_reduce,
                                                               kernels::kReduceThreads, shared));
      if (blocks <= static_cast<std::size_t>(resident) * multiprocessor_count()) break;
      if (per >= chunks) return refuse("no block fits");
    }
    const std::size_t bytes = (m * m + m * d + m + 2 * trials * m + 2 * chunks * trials + k * trials) * sizeof(double);
    if (gpu::device_budget(0) < bytes) return refuse("no room for the distance table");
    static_assert(kReduceChunk == kernels::kReduceChunkMax, "the kernel's chunks are the host's");
    const auto began = std::chrono::steady_clock::now();
    DeviceBuffer<double> rows(m * d, stream_), table(m * m, stream_), w(m, stream_), mins(2 * trials * m, stream_),
        tsums(2 * chunks * trials, stream_);
    DeviceBuffer<std::int64_t> objects(m, stream_);
    DeviceBuffer<std::int32_t> picks(k, stream_);
    DeviceBuffer<double> uniforms((k - 1) * trials, stream_);
    DeviceBuffer<unsigned> arrived(1, stream_);
    DeviceBuffer<unsigned long long> phases(kernels::kReducePhases, stream_);
    CUDA_CHECK(cudaMemsetAsync(arrived.get(), 0, sizeof(unsigned), stream_));
    CUDA_CHECK(cudaMemsetAsync(phases.get(), 0, kernels::kReducePhases * sizeof(unsigned long long), stream_));
    lap("the reduction's buffers");
    // The candidates' rows in double, gathered from the device's copy of the data (the host's
    // rows, fetched into fresh pages, took ~4 ms at 2,591 x 128).
    const std::vector<std::int64_t> which(cands.begin(), cands.end());
    CUDA_CHECK(cudaMemcpyAsync(objects.get(), which.data(), m * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream_));
    kernels::gather_rows<T, double><<<static_cast<unsigned>(m), 128, 0, stream_>>>(
        x_, objects.get(), static_cast<int>(d), rows.get());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(w.get(), weights.data(), m * sizeof(double), cudaMemcpyHostToDevice, stream_));
    const unsigned tiles = static_cast<unsigned>((m + kernels::kTableTile - 1) / kernels::kTableTile);
    kernels::reduce_uniforms<<<static_cast<unsigned>(std::min<std::size_t>(((k - 1) * trials + 255) / 256, 1024)), 256, 0,
                               stream_>>>(seed, stream, static_cast<int>(k), static_cast<int>(trials), uniforms.get());
    CUDA_CHECK_LAUNCH();
    kernels::parallel_table<<<dim3(tiles, tiles), kernels::kTableTile * kernels::kTableTile /
                                                      kernels::kTableRowsPerThread,
                              0, stream_>>>(rows.get(), static_cast<int>(m), static_cast<int>(d), table.get());
    CUDA_CHECK_LAUNCH();
    lap("the reduction's table");
    const double* table_p = table.get();
    const double* w_p = w.get();
    int m_i = static_cast<int>(m), k_i = static_cast<int>(k), trials_i = static_cast<int>(trials),
        per_i = static_cast<int>(per);
    const double* uniforms_p = uniforms.get();
    double* mins_p = mins.get();
    double* tsums_p = tsums.get();
    std::int32_t* picks_p = picks.get();
    unsigned* arrived_p = arrived.get();
    unsigned long long* phases_p = verbose_ ? phases.get() : nullptr;
    void* args[] = {&table_p, &m_i,     &w_p,     &k_i,     &trials_i, &per_i,     &seed,
                    &stream,  &uniforms_p, &mins_p, &tsums_p, &picks_p, &arrived_p, &phases_p};
    CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernels::parallel_reduce),
                                           dim3(static_cast<unsigned>(blocks)), dim3(kernels::kReduceThreads), args,
                                           shared, stream_));
    CUDA_CHECK_LAUNCH();
    std::vector<std::int32_t> got(k);
    CUDA_CHECK(cudaMemcpyAsync(got.data(), picks.get(), k * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (verbose_) {
      unsigned long long ticks[kernels::kReducePhases] = {};
      CUDA_CHECK(cudaMemcpy(ticks, phases.get(), sizeof ticks, cudaMemcpyDeviceToHost));
      static const char* names[kernels::kReducePhases] = {
          "walk: chunk found", "chunk loaded, its tree", "candidate found", "its mins and chunk sums", "barrier",
          "trials' trees (their sums loaded)", "choice"};
      std::fprintf(stderr, "k-means||: the reduction's steps, block 0's thread 0's clocks a step:");
      for (int p = 0; p < kernels::kReducePhases; ++p)
        std::fprintf(stderr, " %s %.0f;", names[p], ticks[p] / static_cast<double>(k - 1));
      std::fprintf(stderr, "\n");
    }
    if (verbose_)
      std::fprintf(stderr,
                   "k-means||: the reduction on the GPU (%zu candidates, %zu trials a step, %zu blocks of %zu "
                   "chunks), %.4f s\n",
                   m, trials, blocks, per,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    return {got.begin(), got.end()};
  }

  // The round on the tensor cores: the candidates' rows in T up, the nearest of them
  // (tensor_nearest.hpp), then closest and nearest take it where it is strictly nearer.
  void add_on_tensor_cores(const std::vector<std::size_t>& cands, std::size_t first, std::vector<double>& chunk_sums) {
    const std::size_t m = cands.size(), d = d_;
    // The candidates' rows gathered from the device's copy (the host's, read into fresh pages and
    // uploaded, took up to ~1 ms a round at 1M x 128).
    if (cand_t_.size() < m * d) {
      cand_t_ = DeviceBuffer<T>(m * d, stream_);
      cand_index_ = DeviceBuffer<std::int64_t>(m, stream_);
    }
    index_.assign(cands.begin(), cands.end());
    CUDA_CHECK(cudaMemcpyAsync(cand_index_.get(), index_.data(), m * sizeof(std::int64_t), cudaMemcpyHostToDevice,
                               stream_));
    kernels::gather_rows<T, T><<<static_cast<unsigned>(m), 128, 0, stream_>>>(x_, cand_index_.get(),
                                                                              static_cast<int>(d), cand_t_.get());
    CUDA_CHECK_LAUNCH();
    lap("candidates gathered");
    if (verbose_) nearest_time_.start(stream_);
    // closest as the ceiling: only rows that beat it matter (parallel_take skips the -1s).
    tensor_->nearest(cand_t_.get(), static_cast<int>(m), round_labels_.get(), closest_.get());
    kernels::parallel_take<T><<<B::row_blocks(), kernels::kPlusPlusRows, 0, stream_>>>(
        x_, static_cast<std::int64_t>(n_), static_cast<int>(d), round_labels_.get(), cand_t_.get(),
        static_cast<int>(first), closest_.get(), nearest_.get());
    CUDA_CHECK_LAUNCH();
    if (verbose_) {
      nearest_time_.stop(stream_);
      unsigned long long listed = 0, all = 0;
      tensor_->rechecked(listed, all);
      std::fprintf(stderr, "k-means||: %zu candidates on the tensor cores, %.4f s (events); re-checked %llu against "
                           "their listed candidates, %llu against all\n",
                   m, nearest_time_.seconds(), listed, all);
    }
    lap("tensor cores' nearest");
    B::sums_of(closest_.get(), 1, chunk_sums);  // waits: the host's rows may go
    lap("chunk sums");
  }

  std::vector<std::int64_t> weigh(std::size_t candidates) override {
    DeviceBuffer<unsigned long long> counts(candidates, stream_);  // stream-ordered: no cudaFree's device-wide wait
    CUDA_CHECK(cudaMemsetAsync(counts.get(), 0, candidates * sizeof(unsigned long long), stream_));
    kernels::parallel_counts<<<grid(), 256, 0, stream_>>>(nearest_.get(), static_cast<std::int64_t>(n_),
                                                          counts.get());
    CUDA_CHECK_LAUNCH();
    std::vector<unsigned long long> got(candidates);
    CUDA_CHECK(cudaMemcpyAsync(got.data(), counts.get(), candidates * sizeof(unsigned long long),
                               cudaMemcpyDeviceToHost, stream_));
    unsigned long long rechecked = 0;
    CUDA_CHECK(cudaMemcpyAsync(&rechecked, rechecked_.get(), sizeof rechecked, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (verbose_)
      std::fprintf(stderr, "k-means||: %zu candidates, %llu objects re-checked against several\n", candidates,
                   rechecked);
    return {got.begin(), got.end()};
  }

 private:
  unsigned grid() const {
    return static_cast<unsigned>(std::min<std::size_t>((n_ + 255) / 256, multiprocessor_count() * 8));
  }

  GpuInitConfig config_;
  const bool skip_zero_;
  std::unique_ptr<cuda::CublasHandle> blas_;  // made at the first GEMM: none on the tensor path
  std::unique_ptr<gpu::TensorNearest<T>> tensor_;
  DeviceBuffer<std::int32_t> round_labels_;
  bool first_tile_ = true;
  cuda::EventPair gemm_time_, nearest_time_;  // parallel_verbose: each tile's GEMM and nearest pass
  DeviceBuffer<std::int32_t> nearest_;
  DeviceBuffer<double> xnorm_, cand_norms_;
  DeviceBuffer<unsigned char> flags_, select_temp_;
  DeviceBuffer<std::int64_t> drawn_, drawn_count_;
  DeviceBuffer<unsigned long long> rechecked_;
  DeviceBuffer<T> cand_t_, scores_;
  DeviceBuffer<std::int64_t> cand_index_;
  std::vector<std::int64_t> index_;  // the round's candidates, for their upload (the copy reads it later)
  std::vector<T> rows_t_;
  std::vector<double> norms_;
};

}  // namespace

template <class T>
std::unique_ptr<PlusPlusSteps> gpu_plusplus_steps(const Dataset<T>& data, std::size_t max_trials,
                                                  const T* device_rows, bool skip_zero) {
  return std::make_unique<GpuPlusPlus<T>>(data, max_trials, device_rows, skip_zero);
}

template std::unique_ptr<PlusPlusSteps> gpu_plusplus_steps(const Dataset<float>&, std::size_t, const float*, bool);
template std::unique_ptr<PlusPlusSteps> gpu_plusplus_steps(const Dataset<double>&, std::size_t, const double*, bool);

namespace {
// cudaFuncGetAttributes loads a kernel (CUDA's lazy loading otherwise loads each at its first
// launch, inside the init's timings); CUB's select runs once on a single element.
template <class K>
void touch(K kernel) {
  cudaFuncAttributes a{};
  CUDA_CHECK(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(kernel)));
}

template <class T>
void preload_parallel_kernels(std::size_t d) {
  touch(kernels::plusplus_distances<T, 1>);
  touch(kernels::plusplus_skip_zero_rows<T>);
  touch(kernels::plusplus_chunk_sums);
  touch(kernels::parallel_draw_flags);
  touch(kernels::gather_rows<T, T>);
  touch(kernels::gather_rows<T, double>);
  touch(kernels::parallel_take<T>);
  touch(kernels::parallel_counts);
  touch(kernels::parallel_table);
  touch(kernels::reduce_uniforms);
  touch(kernels::parallel_reduce);
  cuda::Stream stream;
  {  // CUB's select (the rounds' draws), on one element
    DeviceBuffer<unsigned char> flags(1, stream);
    DeviceBuffer<std::int64_t> out(1, stream), count(1, stream);
    CUDA_CHECK(cudaMemsetAsync(flags.get(), 0, 1, stream));
    std::size_t select = 0;
    CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, select, thrust::counting_iterator<std::int64_t>(0), flags.get(),
                                          out.get(), count.get(), std::int64_t{1}, stream));
    DeviceBuffer<unsigned char> temp(select, stream);
    CUDA_CHECK(cub::DeviceSelect::Flagged(temp.get(), select, thrust::counting_iterator<std::int64_t>(0), flags.get(),
                                          out.get(), count.get(), std::int64_t{1}, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  gpu::preload_tensor_nearest<T>(d, stream.get());
}
}  // namespace

template <class T>
void KernelPreload::start_parallel(std::size_t d) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  thread_ = std::thread([this, d, device] {
    try {
      CUDA_CHECK(cudaSetDevice(device));
      preload_parallel_kernels<T>(d);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void KernelPreload::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

template void KernelPreload::start_parallel<float>(std::size_t);
template void KernelPreload::start_parallel<double>(std::size_t);

template <class T>
std::unique_ptr<ParallelSteps> gpu_parallel_steps(const Dataset<T>& data, const T* device_rows,
                                                  const CentredRows* centred, const GpuInitConfig& config,
                                                  bool skip_zero) {
  return std::make_unique<GpuParallel<T>>(data, device_rows, centred, config, skip_zero);
}

template std::unique_ptr<ParallelSteps> gpu_parallel_steps(const Dataset<float>&, const float*, const CentredRows*,
                                                           const GpuInitConfig&, bool);
template std::unique_ptr<ParallelSteps> gpu_parallel_steps(const Dataset<double>&, const double*, const CentredRows*,
                                                           const GpuInitConfig&, bool);

}  // namespace km
