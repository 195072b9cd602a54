#include "kmeans/gpu/engine.hpp"

#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/kmeans/checks.cuh"
#include "kernels/kmeans/kmeanspp.cuh"
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
bool GpuEngine<T>::reads_in_place(const Dataset<T>& data) const {
  // (every kernel's vector reads of the rows hold at cudaMalloc's alignment)
  return data.on_device() && layout_ == Layout::row_major &&
         reinterpret_cast<std::uintptr_t>(data.device_values) % cuda::kDeviceAlignment == 0;
}

template <class T>
std::size_t GpuEngine<T>::rows_bytes(const Dataset<T>& data) const {
  if (reads_in_place(data)) return 0;
  return data.n * data.d * sizeof(T) * (layout_ == Layout::coord_major ? 2 : 1);
}

template <class T>
void GpuEngine<T>::upload_data(const Dataset<T>& data, std::size_t extra_bytes) {
  data_ = &data;
  n_ = data.n;
  d_ = data.d;
  const std::size_t data_bytes = n_ * d_ * sizeof(T);
  // Data already on the device, row-major and aligned, is read where it is; otherwise the engine
  // holds its own copy (a coordinate-major one made on the device from a row-major upload).
  const bool borrow = reads_in_place(data);
  check_device_memory(rows_bytes(data) + n_ * sizeof(std::int32_t) + extra_bytes, std::string("--impl=") + name_,
                      "use --precision=float or fewer objects");
  rows_ = DeviceBuffer<T>();
  uploaded_ = nullptr;
  if (borrow) {
    x_.borrow(data.device_values);
    uploaded_ = &data;
    return;
  }
  x_ = device_buffer<T>(n_ * d_);
  const auto put = [&](T* to) {
    if (data.on_device())
      CUDA_CHECK(cudaMemcpyAsync(to, data.device_values, data_bytes, cudaMemcpyDeviceToDevice, stream_));
    else
      cuda::upload(to, data.values.data(), data_bytes, stream_);
  };
  if (layout_ == Layout::row_major) {
    put(x_.own());
  } else {
    DeviceBuffer<T> rows = device_buffer<T>(n_ * d_);
    put(rows.get());
    const dim3 grid(static_cast<unsigned>((n_ + 31) / 32), static_cast<unsigned>((d_ + 31) / 32));
    kernels::transpose_to_coord_major<T><<<grid, dim3(32, 8), 0, stream_>>>(
        rows.get(), x_.own(), static_cast<std::int64_t>(n_), static_cast<int>(d_));
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // before `rows` is freed
    // (Kept, the staging the check above counted: the engine frees it once it knows its use.)
    if (keep_rows(d_)) rows_ = std::move(rows);
  }
  uploaded_ = &data;
}

template <class T>
void GpuEngine<T>::release_data() {
  x_ = DeviceBuffer<T>();
  rows_ = DeviceBuffer<T>();
  uploaded_ = nullptr;
}

template <class T>
double GpuEngine<T>::device_largest() {
  DeviceBuffer<unsigned long long> out = device_buffer<unsigned long long>(2);
  unsigned long long host[2] = {};
  CUDA_CHECK(cudaMemsetAsync(out.get(), 0, 2 * sizeof(unsigned long long), stream_));
  const std::size_t count = n_ * d_;
  const int grid = static_cast<int>(std::min<std::size_t>((count + 255) / 256, 8ull * multiprocessor_count()));
  kernels::largest_magnitude<T><<<std::max(grid, 1), 256, 0, stream_>>>(x_.get(), static_cast<std::int64_t>(count),
                                                                          out.get());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpyAsync(host, out.get(), sizeof(host), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (host[1]) return std::numeric_limits<double>::quiet_NaN();
  double largest = 0;
  std::memcpy(&largest, &host[0], sizeof(double));
  return largest;
}

template <class T>
bool GpuEngine<T>::device_inertia(const std::vector<T>& centroids, double& out, Metric metric) {
  if (uploaded_ == nullptr || uploaded_ != data_ || n_ == 0) return false;  // out of core: the host sums it
  if (data_->weighted()) return false;  // the host's inertia() multiplies by the weights
  DeviceBuffer<T> c = device_buffer<T>(centroids.size());
  CUDA_CHECK(cudaMemcpyAsync(c.get(), centroids.data(), centroids.size() * sizeof(T), cudaMemcpyHostToDevice,
                             stream_));
  DeviceBuffer<double> distances = device_buffer<double>(n_);
  const auto terms = [&](auto term) {
    if (layout_ == Layout::coord_major)
      kernels::object_terms_coords<<<static_cast<unsigned>((n_ + 255) / 256), 256, 0, stream_>>>(
          x_.get(), static_cast<std::int64_t>(n_), static_cast<int>(d_), c.get(), labels_.get(), term,
          distances.get());
    else
      kernels::object_terms_rows<<<static_cast<unsigned>((n_ + kernels::kPlusPlusRows - 1) / kernels::kPlusPlusRows),
                                   kernels::kPlusPlusRows, 0, stream_>>>(x_.get(), static_cast<std::int64_t>(n_),
                                                                          static_cast<int>(d_), c.get(), labels_.get(),
                                                                          term, distances.get());
    CUDA_CHECK_LAUNCH();
  };
  if (metric == Metric::euclidean)
    terms(kernels::SquaredDistance{});
  else  // metric.cpp: objective
    terms(kernels::InnerProductTerm{metric == Metric::cosine ? 1.0 : 0.0});
  // inertia_chunks' chunks, each summed in object order by one lane; the chunks in order here.
  const std::size_t chunk = inertia_chunk(d_), chunks = (n_ + chunk - 1) / chunk;
  DeviceBuffer<double> sums = device_buffer<double>(chunks);
  kernels::plusplus_chunk_sums<<<static_cast<unsigned>((chunks + kernels::kSumWarps - 1) / kernels::kSumWarps),
                                 kernels::kSumWarps * 32, 0, stream_>>>(
      distances.get(), static_cast<std::int64_t>(n_), 1, static_cast<std::int64_t>(chunk),
      static_cast<std::int64_t>(chunks), sums.get());
  CUDA_CHECK_LAUNCH();
  std::vector<double> host(chunks);
  CUDA_CHECK(cudaMemcpyAsync(host.data(), sums.get(), chunks * sizeof(double), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  out = 0;
  for (double v : host) out += v;
  return true;
}

template <class T>
void GpuEngine<T>::setup_common(const Dataset<T>& data, std::size_t k, std::size_t extra_bytes) {
  k_ = k;
  if (uploaded_ != &data) {
    upload_data(data, extra_bytes);
  } else {
    check_device_memory(n_ * sizeof(std::int32_t) + extra_bytes, std::string("--impl=") + name_,
                        "use --precision=float or fewer objects");
  }
  labels_ = device_buffer<std::int32_t>(n_);
  CUDA_CHECK(cudaMemsetAsync(labels_.get(), 0xff, n_ * sizeof(std::int32_t), stream_));
  counters_ = device_buffer<Counters>(1);
  changed_.p = &counters_.get()->changed;
  shift_.p = &counters_.get()->shift;
  inertia_.p = &counters_.get()->inertia;
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

template <class T>
void GpuEngine<T>::transpose_rows(const T* rows_on_device, std::size_t rows) {
  const dim3 grid(static_cast<unsigned>((rows + 31) / 32), static_cast<unsigned>((d_ + 31) / 32));
  kernels::transpose_to_coord_major<T><<<grid, dim3(32, 8), 0, stream_>>>(rows_on_device, x_.own(),
                                                                         static_cast<std::int64_t>(rows),
                                                                         static_cast<int>(d_));
  CUDA_CHECK_LAUNCH();
}

template <class T>
void GpuEngine<T>::reset_changed() {
  CUDA_CHECK(cudaMemsetAsync(counters_.get(), 0, sizeof(Counters), stream_));
}

template <class T>
void GpuEngine<T>::queue_read_back(bool) {
  timer_.begin(Phase::d2h, stream_);
  CUDA_CHECK(cudaMemcpyAsync(counters_host_.get(), counters_.get(), sizeof(Counters), cudaMemcpyDeviceToHost,
                             stream_));
  timer_.end(stream_);
}

template <class T>
std::int64_t GpuEngine<T>::wait_read_back(IterationStats& stats, double* shift) {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  timer_.collect(stats);
  const Counters& c = *counters_host_.get();
  if (shift) *shift = c.shift;
  if (inertia_inv_scale_ != 0) stats.inertia = static_cast<double>(static_cast<long long>(c.inertia)) * inertia_inv_scale_;
  return static_cast<std::int64_t>(c.changed);
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

namespace km {

template <class T>
double device_largest_of(const T* x, std::size_t count) {
  cuda::Stream stream;
  cuda::DeviceBuffer<unsigned long long> out(2);
  unsigned long long host[2] = {};
  CUDA_CHECK(cudaMemsetAsync(out.get(), 0, 2 * sizeof(unsigned long long), stream));
  const int grid = static_cast<int>(std::min<std::size_t>((count + 255) / 256, 8ull * multiprocessor_count()));
  kernels::largest_magnitude<T><<<std::max(grid, 1), 256, 0, stream>>>(x, static_cast<std::int64_t>(count), out.get());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpyAsync(host, out.get(), sizeof(host), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (host[1]) return std::numeric_limits<double>::quiet_NaN();
  double largest = 0;
  std::memcpy(&largest, &host[0], sizeof(double));
  return largest;
}
template double device_largest_of(const float*, std::size_t);
template double device_largest_of(const double*, std::size_t);


}  // namespace km
