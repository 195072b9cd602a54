#include "kmeans/gpu/device_update.hpp"

#include <cmath>
#include <cub/device/device_reduce.cuh>

#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/update.cuh"
#include "kmeans/cpu_steps.hpp"

namespace km::gpu {

template <class T>
void DeviceUpdateEngine<T>::setup(const Dataset<T>& data, const std::vector<T>& initial) {
  const std::size_t k = initial.size() / data.d, d = data.d;
  this->k_ = k;
  this->d_ = d;
  const double largest = max_abs_value(data);
  const int exponent = kernels::fixed_point_exponent(largest * static_cast<double>(data.n));
  scale_ = std::ldexp(1.0, exponent);
  inv_scale_ = std::ldexp(1.0, -exponent);
  // The inertia is at most n * d * (2 max|x|)^2 (registry.cpp's range check keeps it finite).
  const int inertia_exponent = kernels::fixed_point_exponent(
      static_cast<double>(data.n) * static_cast<double>(d) * (2 * largest) * (2 * largest));
  this->inertia_scale_ = std::ldexp(1.0, inertia_exponent);
  this->inertia_inv_scale_ = std::ldexp(1.0, -inertia_exponent);
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
  const int k = static_cast<int>(this->k_), d = static_cast<int>(this->d_);
  this->timer_.begin(Phase::kernel, this->stream_);
  this->reset_changed();
  assign(true);
  kernels::update_centroids<T><<<k, 128, 0, this->stream_>>>(centroids_.get(), sums_.get(), counts_.get(), k, d,
                                                             this->layout_ == Layout::coord_major, inv_scale_,
                                                             shift_parts_.get());
  CUDA_CHECK_LAUNCH();
  std::size_t temp_bytes = reduce_temp_.size();
  CUDA_CHECK(cub::DeviceReduce::Sum(reduce_temp_.get(), temp_bytes, shift_parts_.get(), this->shift_.get(), k,
                                    this->stream_));
  after_update();
  this->timer_.end(this->stream_);
  stats.changed = this->read_changed(stats, &stats.shift);
}

template <class T>
void DeviceUpdateEngine<T>::final_labels(std::vector<std::int32_t>& out) {
  assign(false);
  this->download_labels(out);
}

template class DeviceUpdateEngine<float>;
template class DeviceUpdateEngine<double>;

}  // namespace km::gpu
