#include "kmeans/gpu/device_update.hpp"

#include <cmath>
#include <cstdlib>

#include "common/progress.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/update.cuh"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/registry.hpp"

namespace km::gpu {

template <class T>
struct DeviceUpdateEngine<T>::Streamed {
  const Dataset<T>* data = nullptr;  // all the rows, in host memory
  Dataset<T> first_rows;             // a view of the first chunk: what the engine was set up with
  std::size_t chunk = 0, chunks = 0;
  std::vector<DeviceBuffer<std::int32_t>> labels;  // each chunk's labels
  DeviceBuffer<T> stage[2];                        // row-major chunks in flight
  cuda::Stream copy;
  cuda::Event loaded[2], consumed[2];
  std::unique_ptr<cuda::PinnedRegion> pinned;
  cuda::EventPair copies;  // the iteration's copies on the copy stream: the h2d phase
  std::size_t rows(std::size_t c) const { return std::min(chunk, data->n - c * chunk); }
};

std::size_t device_budget(std::size_t cap) {
  std::size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  free_bytes += cuda::pool_idle_bytes();  // an earlier fit's buffers, kept for reuse
  const std::size_t reserve = 256ull << 20;
  const std::size_t usable = free_bytes > reserve ? free_bytes - reserve : 0;
  return cap ? std::min(cap, usable) : usable;
}

template <class T>
const T* DeviceUpdateEngine<T>::stage(const Dataset<T>& data, std::size_t k) {
  if (this->layout_ != Layout::row_major) return nullptr;
  if (this->uploaded_ != &data) {
    // A part of the rows (the whole problem is larger), or streamed on request.
    if ((whole_.n != 0 && whole_.n != data.n) || this->params_.stream_rows) return nullptr;
    const std::size_t need = this->rows_bytes(data) + data.n * sizeof(std::int32_t) + buffer_bytes(k, data.d);
    if (need > device_budget(this->params_.device_memory)) return nullptr;  // out of core
    this->upload_data(data, buffer_bytes(k, data.d));
  }
  CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // the initialisation reads it on its own stream
  return this->x_.get();
}

template <class T>
void DeviceUpdateEngine<T>::setup(const Dataset<T>& data, const std::vector<T>& initial) {
  const std::size_t k = initial.size() / data.d, d = data.d;
  if (data.weighted() && !takes_weights())
    throw DeviceError(strprintf("internal: --impl=%s's path got sample weights it does not sum", this->name_));
  this->k_ = k;
  this->d_ = d;
  const std::size_t budget = device_budget(this->params_.device_memory);
  const std::size_t weight_bytes = data.weighted() ? data.n * sizeof(T) : 0;
  const std::size_t data_bytes = this->rows_bytes(data) + weight_bytes;  // (0 for rows read in place)
  // Params::stream_rows = R streams in chunks of R rows whatever the memory (for the tests).
  const std::size_t forced = this->params_.stream_rows;
  // Data already on the device is read in place or copied beside itself, never streamed from the host.
  const auto refuse_out_of_core = [&] {
    if (data.on_device())
      throw DeviceError(strprintf("--impl=%s: the data on the GPU (%.2f GiB) and the engine's buffers do "
                                  "not fit its memory (%.2f GiB usable); copy the data to the host, which streams it",
                                  this->name_, data.n * d * sizeof(T) / 1073741824.0, budget / 1073741824.0));
  };
  if (whole_.n == 0) {
    // The range check, left to this engine (checks_range): when the data fits, on the device
    // right after the upload (the host then reads the data once, for the copy: on Fashion-MNIST
    // the host pass was 9 ms of a 90 ms fit); out of core, on the host.
    double largest = 0;
    if (!forced && data_bytes + data.n * sizeof(std::int32_t) + buffer_bytes(k, d) <= budget) {
      if (this->uploaded_ != &data) this->upload_data(data, buffer_bytes(k, d));  // else stage() did
      largest = this->device_largest();
    } else {
      refuse_out_of_core();
      largest = max_abs_value(data);
    }
    if (std::isnan(largest)) {  // the host names the object and coordinate
      if (data.on_device())
        throw InputError(strprintf("%s: a value is NaN or infinite (NaN/Inf are not allowed)",
                                   data.source.empty() ? "the data" : data.source.c_str()));
      check_finite(data, data.source.empty() ? std::string("the data") : data.source);
      throw InputError("the data changed while it was being read (the device saw a NaN or infinity the host "
                       "did not)");
    }
    check_arithmetic_range<T>(largest, data.n, d);
    const WeightRange w = check_weights(data);
    whole_ = {data.n, largest, w.max, w.min};
  }
  const FixedScales scales = fixed_scales(whole_.max_abs, whole_.n, d,
                                          centroid_reach(initial.data(), initial.size() / d, d, this->unit()),
                                          whole_.max_weight, whole_.min_weight);
  scale_ = scales.sum;
  inv_scale_ = scales.inv_sum;
  weight_scale_ = scales.weight;
  inv_weight_ = scales.inv_weight;
  this->inertia_scale_ = scales.inertia;
  this->inertia_inv_scale_ = scales.inv_inertia;
  const std::size_t extra = prepare(data);
  if (forced || data_bytes + data.n * sizeof(std::int32_t) + buffer_bytes(k, d) + extra > budget) {
    refuse_out_of_core();
    this->release_data();  // uploaded for the range check, but the engine's buffers do not fit beside it
    setup_streamed(data, extra, budget, forced);
  } else {
    this->setup_common(data, k, buffer_bytes(k, d) + extra);
  }
  centroids_ = this->template device_buffer<T>(k * d);
  sums_ = this->template device_buffer<unsigned long long>(k * d);
  counts_ = this->template device_buffer<unsigned long long>(k);
  shift_parts_ = this->template device_buffer<double>(k);
  if (data.weighted()) {
    weights_ = this->template device_buffer<T>(data.n);
    CUDA_CHECK(cudaMemcpyAsync(weights_.get(), data.weights.data(), data.n * sizeof(T), cudaMemcpyHostToDevice,
                               this->stream_));
  }
  this->upload_centroids(initial, centroids_.get());
  CUDA_CHECK(cudaMemsetAsync(sums_.get(), 0, k * d * sizeof(unsigned long long), this->stream_));
  CUDA_CHECK(cudaMemsetAsync(counts_.get(), 0, k * sizeof(unsigned long long), this->stream_));
  after_setup();
  CUDA_CHECK(cudaStreamSynchronize(this->stream_));
}

template <class T>
void DeviceUpdateEngine<T>::setup_streamed(const Dataset<T>& data, std::size_t extra_for_all, std::size_t budget,
                                           std::size_t forced_rows) {
  // The staging buffers are plain cudaMalloc (a copy stream writes them): what the pool keeps
  // idle goes back to the driver first.
  cuda::trim_current_pool();
  const std::size_t n = data.n, d = data.d, k = this->k_, row = d * sizeof(T);
  // Per row of a chunk: two staging rows, the engine's own copy (coordinate-major rungs
  // transpose into it) and its per-object buffers; per row of the data: its label.
  const std::size_t fixed =
      buffer_bytes(k, d) + n * (sizeof(std::int32_t) + (data.weighted() ? sizeof(T) : 0)) + (8ull << 20);
  const std::size_t per_row = 3 * row + (extra_for_all + n - 1) / n;
  const std::size_t room = budget > fixed ? (budget - fixed) / per_row : 0;
  const std::size_t chunk = forced_rows ? std::min(n, forced_rows) : std::min(n, room / 4096 * 4096);
  if (chunk < 4096 && !forced_rows)
    throw DeviceError(strprintf("--impl=%s: %.2f GiB of device memory cannot stream %zu objects x %zu coordinates "
                                "(the labels and a chunk of 4,096 rows need %.2f GiB); raise --device-memory or use "
                                "fewer objects",
                                this->name_, budget / 1073741824.0, n, d,
                                (fixed + 4096 * per_row) / 1073741824.0));
  auto st = std::make_shared<Streamed>();
  st->data = &data;
  st->chunk = chunk;
  st->chunks = (n + chunk - 1) / chunk;
  st->first_rows.n = chunk;
  st->first_rows.d = d;
  st->first_rows.values = HostBuffer<T>::borrow(data.values.data(), chunk * d);
  st->first_rows.source = data.source;
  prepare(st->first_rows);  // launch shapes and buffers for a chunk
  this->setup_common(st->first_rows, k, buffer_bytes(k, d) + extra_for_all / n * chunk);
  this->data_ = &data;
  for (std::size_t c = 0; c < st->chunks; ++c) {
    st->labels.emplace_back(st->rows(c));
    CUDA_CHECK(cudaMemsetAsync(st->labels.back().get(), 0xff, st->rows(c) * sizeof(std::int32_t), this->stream_));
  }
  for (auto& b : st->stage) b = DeviceBuffer<T>(chunk * d);
  st->pinned = std::make_unique<cuda::PinnedRegion>(data.values.data(), n * row);
  streamed_ = std::move(st);
}

// Every chunk through the engine's assignment: chunk c + 1 is copied while chunk c is assigned.
template <class T>
void DeviceUpdateEngine<T>::run_chunks(bool accumulate) {
  Streamed& st = *streamed_;
  const std::size_t d = this->d_;
  cudaStream_t s = this->stream_, copy = st.copy;
  auto issue_copy = [&](std::size_t c) {
    const int b = static_cast<int>(c % 2);
    CUDA_CHECK(cudaStreamWaitEvent(copy, st.consumed[b].get(), 0));  // its previous chunk is done with
    CUDA_CHECK(cudaMemcpyAsync(st.stage[b].get(), st.data->row(c * st.chunk), st.rows(c) * d * sizeof(T),
                               cudaMemcpyHostToDevice, copy));
    CUDA_CHECK(cudaEventRecord(st.loaded[b].get(), copy));
  };
  st.copies.start(copy);
  issue_copy(0);
  for (std::size_t c = 0; c < st.chunks; ++c) {
    if (c + 1 < st.chunks) issue_copy(c + 1);
    if (c + 1 == st.chunks) st.copies.stop(copy);
    const int b = static_cast<int>(c % 2);
    const std::size_t rows = st.rows(c);
    CUDA_CHECK(cudaStreamWaitEvent(s, st.loaded[b].get(), 0));
    if (this->layout_ == Layout::coord_major) {
      this->transpose_rows(st.stage[b].get(), rows);
      CUDA_CHECK(cudaEventRecord(st.consumed[b].get(), s));
    } else {
      this->x_.swap(st.stage[b]);
    }
    this->n_ = rows;
    weights_offset_ = c * st.chunk;
    std::swap(this->labels_, st.labels[c]);
    rows_changed();
    assign(accumulate);
    std::swap(this->labels_, st.labels[c]);
    if (this->layout_ == Layout::row_major) {
      this->x_.swap(st.stage[b]);
      CUDA_CHECK(cudaEventRecord(st.consumed[b].get(), s));
    }
    // On a terminal, one engine (--gpus' parts queue side by side) waits for the chunk before
    // this one, this one still queued, and shows how far the pass is.
    if (progress::shown() && c > 0 && this->params_.gpus <= 1) {
      CUDA_CHECK(cudaEventSynchronize(st.consumed[b ^ 1].get()));
      const double mb = static_cast<double>(d * sizeof(T)) / 1e6;
      progress::part(accumulate ? "iterations" : "labelling", mb * c * st.chunk, mb * st.data->n, "MB");
    }
  }
  this->n_ = st.chunk;
  weights_offset_ = 0;
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
  if (streamed_)
    run_chunks(true);
  else
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
  this->timer_.begin(Phase::kernel, this->stream_);
  queue_update();
  this->timer_.end(this->stream_);
  this->queue_read_back(true);
}

template <class T>
void DeviceUpdateEngine<T>::queue_update() {
  const int k = static_cast<int>(this->k_), d = static_cast<int>(this->d_);
  kernels::update_centroids<T><<<k, kernels::coordinate_threads(d), 0, this->stream_>>>(
      centroids_.get(), sums_.get(), counts_.get(), k, d, this->layout_ == Layout::coord_major, inv_scale_,
      shift_parts_.get(), keep_sums_, this->unit(), inv_weight_);
  CUDA_CHECK_LAUNCH();
  kernels::total_shift<><<<1, 1024, 0, this->stream_>>>(shift_parts_.get(), k, this->shift_.get());
  CUDA_CHECK_LAUNCH();
  after_update();
}

template <class T>
void DeviceUpdateEngine<T>::queue_iteration() {
  if (!graphable()) throw DeviceError(strprintf("internal: --impl=%s's iteration cannot be queued", this->name_));
  this->reset_changed();
  assign(true);
  queue_update();
  CUDA_CHECK(cudaMemcpyAsync(this->counters_host_.get(), this->counters_.get(), sizeof(typename GpuEngine<T>::Counters),
                             cudaMemcpyDeviceToHost, this->stream_));
}

template <class T>
void DeviceUpdateEngine<T>::collect_iteration(IterationStats& stats) {
  const auto& c = *this->counters_host_.get();
  stats.changed = static_cast<std::int64_t>(c.changed);
  stats.shift = c.shift;
  if (this->inertia_inv_scale_ != 0)
    stats.inertia = static_cast<double>(static_cast<long long>(c.inertia)) * this->inertia_inv_scale_;
}

template <class T>
void DeviceUpdateEngine<T>::finish_update(IterationStats& stats) {
  stats.changed = this->wait_read_back(stats, &stats.shift);
  if (streamed_) stats.h2d += streamed_->copies.seconds();  // the copy stream's span, beside the kernels
}

template <class T>
void DeviceUpdateEngine<T>::final_labels(std::vector<std::int32_t>& out) {
  if (!streamed_) {
    assign(false);
    this->download_labels(out);
    return;
  }
  run_chunks(false);
  const Streamed& st = *streamed_;
  out.resize(st.data->n);
  for (std::size_t c = 0; c < st.chunks; ++c)
    CUDA_CHECK(cudaMemcpyAsync(out.data() + c * st.chunk, st.labels[c].get(), st.rows(c) * sizeof(std::int32_t),
                               cudaMemcpyDeviceToHost, this->stream_));
  CUDA_CHECK(cudaStreamSynchronize(this->stream_));
}

template class DeviceUpdateEngine<float>;
template class DeviceUpdateEngine<double>;

}  // namespace km::gpu
