#include "kmeans/gpu/engine.hpp"

#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/transpose.cuh"
#include "kmeans/cpu_steps.hpp"

namespace km::gpu {

Support fits_int_indexing(std::size_t k, std::size_t d) {
  if (k * d >= (1ull << 31)) return {false, strprintf("K*d = %zu is too large (limit 2^31)", k * d)};
  return {};
}

Support fits_shared(const char* impl, std::size_t bytes, std::size_t k, std::size_t d, const GpuInfo& gpu) {
  if (bytes > gpu.shared_optin)
    return {false, strprintf("--impl=%s needs %zu bytes of shared memory for K=%zu x d=%zu, above this GPU's limit "
                             "of %zu per block; use --impl=fused",
                             impl, bytes, k, d, gpu.shared_optin)};
  return fits_int_indexing(k, d);
}

Support centroids_fit_shared(const char* impl, std::size_t k, std::size_t d, std::size_t elem, const GpuInfo& gpu) {
  return fits_shared(impl, kernels::centroids_bytes(k, d, elem), k, d, gpu);
}

template <class T>
void GpuEngine<T>::setup_common(const Dataset<T>& data, std::size_t k, std::size_t extra_bytes) {
  data_ = &data;
  n_ = data.n;
  d_ = data.d;
  k_ = k;
  const std::size_t data_bytes = n_ * d_ * sizeof(T);
  // A coordinate-major copy is made on the device from a row-major upload: both at once.
  const std::size_t staging = layout_ == Layout::coord_major ? data_bytes : 0;
  check_device_memory(data_bytes + staging + n_ * sizeof(std::int32_t) + extra_bytes,
                      std::string("--impl=") + name_, "use --precision=float or fewer objects");

  x_ = DeviceBuffer<T>(n_ * d_);
  {
    cuda::PinnedRegion pinned(data.values.data(), data_bytes);
    if (layout_ == Layout::row_major) {
      CUDA_CHECK(cudaMemcpyAsync(x_.get(), data.values.data(), data_bytes, cudaMemcpyHostToDevice, stream_));
    } else {
      DeviceBuffer<T> rows(n_ * d_);
      CUDA_CHECK(cudaMemcpyAsync(rows.get(), data.values.data(), data_bytes, cudaMemcpyHostToDevice, stream_));
      const dim3 grid(static_cast<unsigned>((n_ + 31) / 32), static_cast<unsigned>((d_ + 31) / 32));
      kernels::transpose_to_coord_major<T><<<grid, dim3(32, 8), 0, stream_>>>(
          rows.get(), x_.get(), static_cast<std::int64_t>(n_), static_cast<int>(d_));
      CUDA_CHECK_LAUNCH();
      CUDA_CHECK(cudaStreamSynchronize(stream_));  // before `rows` is freed
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // before the host range is unpinned
  }
  labels_ = DeviceBuffer<std::int32_t>(n_);
  CUDA_CHECK(cudaMemsetAsync(labels_.get(), 0xff, n_ * sizeof(std::int32_t), stream_));
  changed_ = DeviceBuffer<unsigned long long>(1);
  shift_ = DeviceBuffer<double>(1);
  inertia_ = DeviceBuffer<unsigned long long>(1);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

template <class T>
void GpuEngine<T>::transpose_rows(const T* rows_on_device, std::size_t rows) {
  const dim3 grid(static_cast<unsigned>((rows + 31) / 32), static_cast<unsigned>((d_ + 31) / 32));
  kernels::transpose_to_coord_major<T><<<grid, dim3(32, 8), 0, stream_>>>(rows_on_device, x_.get(),
                                                                         static_cast<std::int64_t>(rows),
                                                                         static_cast<int>(d_));
  CUDA_CHECK_LAUNCH();
}

template <class T>
void GpuEngine<T>::reset_changed() {
  CUDA_CHECK(cudaMemsetAsync(changed_.get(), 0, sizeof(unsigned long long), stream_));
  CUDA_CHECK(cudaMemsetAsync(shift_.get(), 0, sizeof(double), stream_));
  CUDA_CHECK(cudaMemsetAsync(inertia_.get(), 0, sizeof(unsigned long long), stream_));
}

template <class T>
void GpuEngine<T>::queue_read_back(bool shift) {
  timer_.begin(Phase::d2h, stream_);
  CUDA_CHECK(cudaMemcpyAsync(changed_host_.get(), changed_.get(), sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                             stream_));
  if (shift)
    CUDA_CHECK(cudaMemcpyAsync(shift_host_.get(), shift_.get(), sizeof(double), cudaMemcpyDeviceToHost, stream_));
  if (inertia_inv_scale_ != 0)
    CUDA_CHECK(cudaMemcpyAsync(inertia_host_.get(), inertia_.get(), sizeof(unsigned long long),
                               cudaMemcpyDeviceToHost, stream_));
  timer_.end(stream_);
}

template <class T>
std::int64_t GpuEngine<T>::wait_read_back(IterationStats& stats, double* shift) {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  timer_.collect(stats);
  if (shift) *shift = *shift_host_.get();
  if (inertia_inv_scale_ != 0)
    stats.inertia = static_cast<double>(static_cast<long long>(*inertia_host_.get())) * inertia_inv_scale_;
  return static_cast<std::int64_t>(*changed_host_.get());
}

template <class T>
void GpuEngine<T>::download_labels(std::vector<std::int32_t>& out) {
  out.resize(n_);
  CUDA_CHECK(cudaMemcpyAsync(out.data(), labels_.get(), n_ * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

template <class T>
int GpuEngine<T>::grid_for(std::size_t items) const {
  const std::size_t blocks = (items + params_.block - 1) / params_.block;
  if (blocks > 0x7fffffffull) throw DeviceError("too many objects for one grid");
  return static_cast<int>(blocks);
}

template <class T>
void GpuEngine<T>::upload_centroids(const std::vector<T>& host, T* device) {
  std::vector<T> staged(host);
  if (layout_ == Layout::coord_major) to_coord_major(host.data(), k_, d_, staged.data(), k_);
  CUDA_CHECK(cudaMemcpyAsync(device, staged.data(), k_ * d_ * sizeof(T), cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

template <class T>
void GpuEngine<T>::download_centroids(const T* device, std::vector<T>& host) {
  std::vector<T> staged(k_ * d_);
  CUDA_CHECK(cudaMemcpyAsync(staged.data(), device, k_ * d_ * sizeof(T), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  host.resize(k_ * d_);
  if (layout_ == Layout::coord_major)
    from_coord_major(staged.data(), k_, d_, k_, host.data());
  else
    host = std::move(staged);
}

template class GpuEngine<float>;
template class GpuEngine<double>;

}  // namespace km::gpu
