// k-means++ on the GPU: the data-sized steps of init.cpp's greedy k-means++ (the distance
// passes, the chunk sums and the draws' walks) as kernels (kernels/kmeans/kmeanspp.cuh), the
// sampling and the choice left to the shared driver, so the centres are the CPU's, bit for bit.
#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "kernels/kmeans/kmeanspp.cuh"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/init.hpp"

namespace km {

namespace {

using cuda::DeviceBuffer;

template <class T>
class GpuPlusPlus final : public PlusPlusSteps {
 public:
  GpuPlusPlus(const Dataset<T>& data, std::size_t max_trials)
      : data_(data), n_(data.n), d_(data.d), chunks_((data.n + kSumChunk - 1) / kSumChunk) {
    const std::size_t bytes = n_ * d_ * sizeof(T) + n_ * sizeof(double) * (1 + max_trials) +
                              max_trials * d_ * sizeof(double) + chunks_ * max_trials * sizeof(double);
    check_device_memory(bytes, "--init=kmeans++ on the GPU", "use fewer objects or --init=random");
    x_ = DeviceBuffer<T>(n_ * d_);
    CUDA_CHECK(cudaMemcpyAsync(x_.get(), data.values.data(), n_ * d_ * sizeof(T), cudaMemcpyHostToDevice, stream_));
    closest_ = DeviceBuffer<double>(n_);
    mins_ = DeviceBuffer<double>(n_ * max_trials);
    centres_ = DeviceBuffer<double>(max_trials * d_);
    sums_ = DeviceBuffer<double>(chunks_ * max_trials);
    walk_chunks_ = DeviceBuffer<std::int64_t>(max_trials);
    walk_cands_ = DeviceBuffer<std::int64_t>(max_trials);
    walk_r_ = DeviceBuffer<double>(max_trials);
  }

  void start(std::size_t first, std::vector<double>& chunk_sums) override { closest_pass(first, true, chunk_sums); }
  // The chosen centre is one of the candidates just weighed (the driver's greedy choice): its
  // row of mins is already min(closest, distance to it), computed as closest_pass would (the same
  // distance, summed in the same order, and the same min), and its chunk sums came back with the
  // others, so closest takes that row and no second pass reads the data. Otherwise, the pass.
  void choose(std::size_t centre, std::vector<double>& chunk_sums) override {
    const auto it = std::find(last_cands_.begin(), last_cands_.end(), centre);
    if (it == last_cands_.end()) {
      closest_pass(centre, false, chunk_sums);
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
    upload_rows(cands);
    distances(trials, false, mins_.get());
    sums_of(mins_.get(), trials, out);
    last_cands_ = cands;
    last_sums_ = out;
  }

 private:
  // The distance pass over `count` centres, G of them at a time (the smallest of 1, 2, 4, 8, 16
  // that holds them, else 16).
  void distances(int count, bool first, double* mins) {
    auto launch = [&](auto kernel) {
      kernel<<<row_blocks(), kernels::kPlusPlusRows, 0, stream_>>>(x_.get(), static_cast<std::int64_t>(n_),
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

  // Objects `rows` as doubles [rows][d] into centres_.
  void upload_rows(const std::vector<std::size_t>& rows) {
    staging_.resize(rows.size() * d_);
    for (std::size_t t = 0; t < rows.size(); ++t)
      for (std::size_t j = 0; j < d_; ++j) staging_[t * d_ + j] = static_cast<double>(data_.row(rows[t])[j]);
    CUDA_CHECK(cudaMemcpyAsync(centres_.get(), staging_.data(), staging_.size() * sizeof(double),
                               cudaMemcpyHostToDevice, stream_));
  }

  void closest_pass(std::size_t centre, bool first, std::vector<double>& chunk_sums) {
    upload_rows({centre});
    distances(1, first, nullptr);
    sums_of(closest_.get(), 1, chunk_sums);
  }

  // out[ch * rows + r]: chunk ch's sum of row r of `values` ([rows][n]).
  void sums_of(const double* values, int rows, std::vector<double>& out) {
    const std::size_t count = chunks_ * static_cast<std::size_t>(rows);
    const auto sum_blocks = static_cast<unsigned>((count + kernels::kSumWarps - 1) / kernels::kSumWarps);
    kernels::plusplus_chunk_sums<<<sum_blocks, kernels::kSumWarps * 32, 0, stream_>>>(
        values, static_cast<std::int64_t>(n_), rows, static_cast<std::int64_t>(kSumChunk),
        static_cast<std::int64_t>(chunks_), sums_.get());
    CUDA_CHECK_LAUNCH();
    out.resize(count);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), sums_.get(), count * sizeof(double), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  const Dataset<T>& data_;
  std::size_t n_, d_, chunks_;
  cuda::Stream stream_;
  DeviceBuffer<T> x_;
  DeviceBuffer<double> closest_, mins_, centres_, sums_;
  std::vector<double> staging_;
  std::vector<std::size_t> last_cands_;  // the candidates whose rows mins_ holds, and their chunk sums
  std::vector<double> last_sums_;
  DeviceBuffer<std::int64_t> walk_chunks_, walk_cands_;
  DeviceBuffer<double> walk_r_;
};

}  // namespace

template <class T>
std::unique_ptr<PlusPlusSteps> gpu_plusplus_steps(const Dataset<T>& data, std::size_t max_trials) {
  return std::make_unique<GpuPlusPlus<T>>(data, max_trials);
}

template std::unique_ptr<PlusPlusSteps> gpu_plusplus_steps(const Dataset<float>&, std::size_t);
template std::unique_ptr<PlusPlusSteps> gpu_plusplus_steps(const Dataset<double>&, std::size_t);

}  // namespace km
