#include "gpu/gpu_engine.hpp"

#include "../../kernels/common.cuh"

namespace km::gpu {

PinnedRegion::PinnedRegion(const void* p, std::size_t bytes, bool device_writes) {
  if (!p || !bytes) return;
  // Registration can fail (e.g. unsupported memory); the copy then runs pageable, slower
  // but correct, so the error is cleared rather than thrown.
  if (!device_writes && cudaHostRegister(const_cast<void*>(p), bytes, cudaHostRegisterReadOnly) == cudaSuccess)
    ptr_ = const_cast<void*>(p);
  else if (cudaGetLastError(), cudaHostRegister(const_cast<void*>(p), bytes, cudaHostRegisterDefault) == cudaSuccess)
    ptr_ = const_cast<void*>(p);
  else
    cudaGetLastError();
}

PinnedRegion::~PinnedRegion() {
  if (ptr_) cudaHostUnregister(ptr_);
}

void check_device_memory(std::size_t bytes, const std::string& impl) {
  std::size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  const std::size_t reserve = 64ull << 20;  // room for the runtime, cuBLAS workspaces
  if (bytes + reserve > free_bytes)
    throw DeviceError(strprintf("--impl=%s needs %.2f GiB of device memory but %.2f GiB of %.2f GiB are free; "
                                "use --precision=float or fewer objects",
                                impl.c_str(), bytes / 1073741824.0, free_bytes / 1073741824.0, total / 1073741824.0));
}

std::size_t max_shared_bytes() {
  int device = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<std::size_t>(optin);
}

int multiprocessor_count() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

std::string device_name() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

PhaseTimer::PhaseTimer() {
  for (auto& s : slots_) {
    CUDA_CHECK(cudaEventCreate(&s.start));
    CUDA_CHECK(cudaEventCreate(&s.stop));
  }
}

PhaseTimer::~PhaseTimer() {
  for (auto& s : slots_) {
    cudaEventDestroy(s.start);
    cudaEventDestroy(s.stop);
  }
}

void PhaseTimer::begin(Phase p, cudaStream_t s) {
  if (used_ >= kSlots) throw DeviceError("PhaseTimer: too many phases in one iteration");
  open_ = used_++;
  slots_[open_].phase = p;
  CUDA_CHECK(cudaEventRecord(slots_[open_].start, s));
}

void PhaseTimer::end(Phase, cudaStream_t s) { CUDA_CHECK(cudaEventRecord(slots_[open_].stop, s)); }

void PhaseTimer::collect(IterationStats& stats) {
  for (int i = 0; i < used_; ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, slots_[i].start, slots_[i].stop));
    double& sink = slots_[i].phase == Phase::h2d ? stats.h2d : slots_[i].phase == Phase::kernel ? stats.kernel : stats.d2h;
    sink += ms * 1e-3;
  }
  used_ = 0;
}

template <class T>
GpuEngine<T>::~GpuEngine() {
  if (stream_) cudaStreamDestroy(stream_);
}

template <class T>
void GpuEngine<T>::setup_common(const Dataset<T>& data, std::size_t extra_bytes) {
  data_ = &data;
  n_ = data.n;
  d_ = data.d;
  const std::size_t data_bytes = n_ * d_ * sizeof(T);
  // A coordinate-major copy is made on the device from a row-major upload: both at once.
  const std::size_t staging = layout_ == Layout::coord_major ? data_bytes : 0;
  check_device_memory(data_bytes + staging + n_ * sizeof(std::int32_t) + extra_bytes, name_);
  if (!stream_) CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));

  x_ = DeviceBuffer<T>(n_ * d_);
  {
    PinnedRegion pinned(data.values.data(), data_bytes);
    if (layout_ == Layout::row_major) {
      CUDA_CHECK(cudaMemcpyAsync(x_.get(), data.values.data(), data_bytes, cudaMemcpyHostToDevice, stream_));
    } else {
      DeviceBuffer<T> rows(n_ * d_);
      CUDA_CHECK(cudaMemcpyAsync(rows.get(), data.values.data(), data_bytes, cudaMemcpyHostToDevice, stream_));
      const dim3 grid(static_cast<unsigned>((n_ + 31) / 32), static_cast<unsigned>((d_ + 31) / 32));
      kernels::transpose_to_coord_major<T><<<grid, dim3(32, 8), 0, stream_>>>(rows.get(), x_.get(),
                                                                              static_cast<std::int64_t>(n_),
                                                                              static_cast<int>(d_));
      CUDA_CHECK_LAUNCH();
      CUDA_CHECK(cudaStreamSynchronize(stream_));  // before `rows` is freed
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // before the host range is unpinned
  }
  labels_ = DeviceBuffer<std::int32_t>(n_);
  CUDA_CHECK(cudaMemsetAsync(labels_.get(), 0xff, n_ * sizeof(std::int32_t), stream_));  // -1: all change at first
  changed_ = DeviceBuffer<unsigned long long>(1);
  shift_ = DeviceBuffer<double>(1);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

template <class T>
void GpuEngine<T>::reset_changed() {
  CUDA_CHECK(cudaMemsetAsync(changed_.get(), 0, sizeof(unsigned long long), stream_));
  CUDA_CHECK(cudaMemsetAsync(shift_.get(), 0, sizeof(double), stream_));
}

template <class T>
std::int64_t GpuEngine<T>::read_changed(IterationStats& stats, const double* device_shift, double* shift) {
  timer_.begin(Phase::d2h, stream_);
  CUDA_CHECK(cudaMemcpyAsync(changed_host_.get(), changed_.get(), sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                             stream_));
  if (device_shift)
    CUDA_CHECK(cudaMemcpyAsync(shift_host_.get(), device_shift, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  timer_.end(Phase::d2h, stream_);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  timer_.collect(stats);
  if (shift) *shift = *shift_host_.get();
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

template class GpuEngine<float>;
template class GpuEngine<double>;

}  // namespace km::gpu
