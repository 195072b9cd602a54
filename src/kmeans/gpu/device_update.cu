#include "kmeans/gpu/device_update.hpp"

#include <cmath>
#include <cub/device/device_reduce.cuh>

#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/update.cuh"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/fixed_point.hpp"

namespace km::gpu {

template <class T>
void DeviceUpdateEngine<T>::setup(const Dataset<T>& data, const std::vector<T>& initial) {
  const std::size_t k = initial.size() / data.d, d = data.d;
  this->k_ = k;
  this->d_ = d;
  if (whole_.n == 0) whole_ = {data.n, max_abs_value(data)};
  const FixedScales scales = fixed_scales(whole_.max_abs, whole_.n, d);
  scale_ = scales.sum;
  inv_scale_ = scales.inv_sum;
  this->inertia_scale_ = scales.inertia;
  this->inertia_inv_scale_ = scales.inv_inertia;
  const std::size_t extra = prepare(data);
  this->setup_common(data, k, buffer_bytes(k, d) + extra);
  centroids_ = DeviceBuffer<T>(k * d);
  sums_ = DeviceBuffer<unsigned long long>(k * d);
  counts_ = DeviceBuffer<unsigned long long>(k);
  shift_parts_ = DeviceBuffer<double>(k);
  // The shift's total: CUB's reduction (a fixed tree, no atomics: the same bits every run).
  std::size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, shift_parts_.get(), this->shift_.get(), static_cast<int>(k),
                                    this->stream_));
  reduce_temp_ = DeviceBuffer<unsigned char>(temp_bytes);
  this->upload_centroids(initial, centroids_.get());
  CUDA_CHECK(cudaMemsetAsync(sums_.get(), 0, k * d * sizeof(unsigned long long), this->stream_));
  CUDA_CHECK(cudaMemsetAsync(counts_.get(), 0, k * sizeof(unsigned long long), this->stream_));
  after_setup();
  CUDA_CHECK(cudaStreamSynchronize(this->stream_));
}

template <class T>
void DeviceUpdateEngine<T>::iterate(IterationStats& stats) {
  accumulate();
  this->apply(stats);
}

template <class T>
void DeviceUpdateEngine<T>::accumulate() {
  this->timer_.begin(Phase::kernel, this->stream_);
  this->reset_changed();
  assign(true);
  this->timer_.end(this->stream_);
}

template <class T>
Partials DeviceUpdateEngine<T>::partials() {
  return {{{sums_.get(), this->k_ * this->d_}, {counts_.get(), this->k_}, {this->changed_.get(), 1},
           {this->inertia_.get(), 1}},
          current_device(),
          static_cast<void*>(this->stream_.get())};
}

template <class T>
void DeviceUpdateEngine<T>::start_update() {
  const int k = static_cast<int>(this->k_), d = static_cast<int>(this->d_);
  this->timer_.begin(Phase::kernel, this->stream_);
  kernels::update_centroids<T><<<k, 128, 0, this->stream_>>>(centroids_.get(), sums_.get(), counts_.get(), k, d,
                                                             this->layout_ == Layout::coord_major, inv_scale_,
                                                             shift_parts_.get());
  CUDA_CHECK_LAUNCH();
  std::size_t temp_bytes = reduce_temp_.size();
  CUDA_CHECK(cub::DeviceReduce::Sum(reduce_temp_.get(), temp_bytes, shift_parts_.get(), this->shift_.get(), k,
                                    this->stream_));
  after_update();
  this->timer_.end(this->stream_);
  this->queue_read_back(true);
}

template <class T>
void DeviceUpdateEngine<T>::finish_update(IterationStats& stats) {
  stats.changed = this->wait_read_back(stats, &stats.shift);
}

template <class T>
void DeviceUpdateEngine<T>::final_labels(std::vector<std::int32_t>& out) {
  assign(false);
  this->download_labels(out);
}

template class DeviceUpdateEngine<float>;
template class DeviceUpdateEngine<double>;

}  // namespace km::gpu
