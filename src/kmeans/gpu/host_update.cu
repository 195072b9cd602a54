#include "kmeans/gpu/host_update.hpp"

#include <algorithm>

#include "kmeans/cpu_steps.hpp"

namespace km::gpu {

template <class T>
void HostUpdateEngine<T>::setup(const Dataset<T>& data, const std::vector<T>& initial) {
  const std::size_t k = initial.size() / data.d;
  this->setup_common(data, k, k * data.d * sizeof(T));
  prepare_launch();
  centroids_ = initial;
  device_centroids_ = DeviceBuffer<T>(initial.size());
  host_labels_ = PinnedBuffer<std::int32_t>(this->n_);
  staged_ = PinnedBuffer<T>(initial.size());
  sums_.assign(initial.size(), 0.0);
  carries_.assign(initial.size(), 0.0);
  counts_.assign(k, 0);
}

template <class T>
void HostUpdateEngine<T>::iterate(IterationStats& stats) {
  send_centroids();
  this->timer_.begin(Phase::kernel, this->stream_);
  this->reset_changed();
  launch_assign(this->changed_.get());
  this->timer_.end(this->stream_);
  this->timer_.begin(Phase::d2h, this->stream_);
  CUDA_CHECK(cudaMemcpyAsync(host_labels_.get(), this->labels_.get(), this->n_ * sizeof(std::int32_t),
                             cudaMemcpyDeviceToHost, this->stream_));
  this->timer_.end(this->stream_);
  stats.changed = this->read_changed(stats);  // syncs; adds the phases
  HostPhase cpu(stats.cpu);
  // The lab's CPU update: one pass over the objects in their labels' clusters.
  std::fill(sums_.begin(), sums_.end(), 0.0);
  std::fill(carries_.begin(), carries_.end(), 0.0);
  std::fill(counts_.begin(), counts_.end(), 0);
  const std::int32_t* labels = host_labels_.get();
  const std::size_t d = this->d_;
  double inertia = 0;  // in the same pass: the distance to the centroid the GPU chose, in seq's arithmetic
  for (std::size_t i = 0; i < this->n_; ++i) {
    const T* x = this->data_->row(i);
    const std::size_t label = static_cast<std::size_t>(labels[i]);
    const double w = static_cast<double>(this->data_->weight(i));
    inertia += w * static_cast<double>(squared_distance(x, &centroids_[label * d], d));
    add_to_cluster(x, w, d, &sums_[label * d], &carries_[label * d], counts_[label]);
  }
  stats.inertia = inertia;
  stats.shift = finalize_centroids(sums_.data(), carries_.data(), counts_.data(), this->k_, d, centroids_.data(),
                                   this->params_.metric != Metric::euclidean);
}

template <class T>
void HostUpdateEngine<T>::final_labels(std::vector<std::int32_t>& out) {
  IterationStats ignored;
  send_centroids();
  CUDA_CHECK(cudaStreamSynchronize(this->stream_));
  this->timer_.collect(ignored);
  launch_assign(nullptr);
  this->download_labels(out);
}

template <class T>
void HostUpdateEngine<T>::send_centroids() {
  T* staged = staged_.get();
  if (this->layout_ == Layout::coord_major)
    to_coord_major(centroids_.data(), this->k_, this->d_, staged, this->k_);
  else
    std::copy(centroids_.begin(), centroids_.end(), staged);
  this->timer_.begin(Phase::h2d, this->stream_);
  CUDA_CHECK(cudaMemcpyAsync(device_centroids_.get(), staged, centroids_.size() * sizeof(T), cudaMemcpyHostToDevice,
                             this->stream_));
  this->timer_.end(this->stream_);
}

template class HostUpdateEngine<float>;
template class HostUpdateEngine<double>;

}  // namespace km::gpu
