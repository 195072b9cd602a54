// RAII device and host memory for every GPU code path (k-means engines, GEMM, the probe).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda/check.hpp"

namespace km::cuda {

// The current device's stream-ordered pool (cudaMallocAsync's default pool) keeps what is freed
// into it (release threshold: unlimited), so the next fit's buffers come back without a
// cudaMalloc, and a free costs no device-wide synchronisation. pool_idle_bytes() is what it
// holds unused (usable by the next pooled allocations: the memory checks count it as free);
// trim_device_pools() hands it back to the driver on every device.
void retain_pool_memory();
std::size_t pool_idle_bytes();
void trim_device_pools();
void trim_current_pool();  // the current device's, after waiting for it

// The alignment of cudaMalloc's and the pools' allocations, which the kernels' vector reads
// of a buffer's start rely on.
constexpr std::size_t kDeviceAlignment = 256;

// Device memory for `count` elements of T (uninitialised). With a stream: from the current
// device's pool, allocated and freed in that stream's order (only for buffers that stream
// alone uses, and that die before it).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count) CUDA_CHECK(cudaMalloc(&ptr_, count * sizeof(T)));
  }
  DeviceBuffer(std::size_t count, cudaStream_t stream) : count_(count), stream_(stream) {
    if (count) {
      retain_pool_memory();
      CUDA_CHECK(cudaMallocAsync(&ptr_, count * sizeof(T), stream));
    }
  }
  ~DeviceBuffer() {
    if (!ptr_) return;
    if (stream_)
      cudaFreeAsync(ptr_, stream_);
    else
      cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_), stream_(o.stream_) {
    o.ptr_ = nullptr;
    o.count_ = 0;
    o.stream_ = nullptr;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    std::swap(stream_, o.stream_);
    return *this;
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
  cudaStream_t stream_ = nullptr;  // pooled: freed in this stream's order
};

// The objects' rows as the kernels read them: the owner's own DeviceBuffer, or rows already in
// device memory that it borrows (the caller's, alive and unchanged for as long as it is used).
// get() is const, so a kernel that would write the rows does not compile against a borrowed
// buffer; own() is the owned buffer, to fill (null when borrowed).
template <class T>
class DeviceRows {
 public:
  DeviceRows() = default;
  DeviceRows& operator=(DeviceBuffer<T>&& own) {
    own_ = std::move(own);
    ptr_ = own_.get();
    return *this;
  }
  void borrow(const T* rows) {
    own_ = DeviceBuffer<T>();
    ptr_ = rows;
  }
  // Swaps the owned buffer with `other` (streamed chunks take turns in a staging buffer; never
  // rows read in place, which are not streamed).
  void swap(DeviceBuffer<T>& other) {
    if (borrowed()) throw DeviceError("internal: borrowed rows swapped with a staging buffer");
    std::swap(own_, other);
    ptr_ = own_.get();
  }
  const T* get() const { return ptr_; }
  T* own() const { return own_.get(); }
  bool borrowed() const { return ptr_ != nullptr && own_.get() == nullptr; }

 private:
  DeviceBuffer<T> own_;
  const T* ptr_ = nullptr;
};

// Host memory that the device reads and writes at full speed: cudaMallocHost.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t count) {
    if (count) CUDA_CHECK(cudaMallocHost(&ptr_, count * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(o.ptr_) { o.ptr_ = nullptr; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    return *this;
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

// A small block of pinned host memory (up to kPinnedSlotBytes) from a process-wide pinned
// arena, returned to it on destruction: a device -> host copy of a few counters every iteration
// needs pinned memory, and a cudaMallocHost per engine costs a fraction of a millisecond per fit.
// Falls back to cudaMallocHost when the arena is used up.
constexpr std::size_t kPinnedSlotBytes = 256;
void* acquire_pinned_slot();
void release_pinned_slot(void* p);
template <class T>
class PinnedSlot {
  static_assert(sizeof(T) <= kPinnedSlotBytes, "a pinned slot holds a few counters");

 public:
  PinnedSlot() : ptr_(static_cast<T*>(acquire_pinned_slot())) {}
  ~PinnedSlot() { release_pinned_slot(ptr_); }
  PinnedSlot(const PinnedSlot&) = delete;
  PinnedSlot& operator=(const PinnedSlot&) = delete;
  T* get() const { return ptr_; }

 private:
  T* ptr_;
};

// Pins an existing (page-aligned) host range in place for a copy, then unpins it. A range
// the device only reads (an upload) is registered read-only; pass device_writes = true for
// a download target. If the range cannot be pinned the copy runs pageable: slower, correct.
class PinnedRegion {
 public:
  PinnedRegion(const void* p, std::size_t bytes, bool device_writes = false);
  ~PinnedRegion();
  PinnedRegion(const PinnedRegion&) = delete;
  PinnedRegion& operator=(const PinnedRegion&) = delete;

 private:
  void* ptr_ = nullptr;
};

// Copies `bytes` of pageable host memory (a Dataset, a NumPy array) to `device` on `stream`
// and returns when the copy is done. Small copies go straight from pageable memory; larger
// ones through a process-wide ring of pinned staging buffers (kStagingBuffers x
// kStagingBytes, pinned on first use and kept for the process): all the host's threads fill
// one buffer while the previous ones cross the link. On an H200 box (16 cores) 376 MB took
// 7.4 ms this way, against 20-28 ms pinning the range in place (the registration alone
// 12-19 ms), 55 ms pageable, and 20 ms to cudaHostAlloc the three buffers, which is why they
// are kept. Uploads from several threads take turns.
void upload(void* device, const void* host, std::size_t bytes, cudaStream_t stream);
constexpr std::size_t kStagingBuffers = 3, kStagingBytes = std::size_t{16} << 20;

// An event without timing (ordering between streams), destroyed with its owner.
class Event {
 public:
  Event() { CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// A non-blocking stream, destroyed with its owner.
class Stream {
 public:
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// A cuBLAS handle on a stream in pedantic math: no TF32, no reduced-precision reductions,
// so float stays IEEE float.
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t s) {
    CUBLAS_CHECK(cublasCreate(&h_));
    CUBLAS_CHECK(cublasSetStream(h_, s));
    CUBLAS_CHECK(cublasSetMathMode(h_, CUBLAS_PEDANTIC_MATH));
  }
  ~CublasHandle() {
    if (h_) cublasDestroy(h_);
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  operator cublasHandle_t() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

// Opts `kernel` in to `bytes` of dynamic shared memory per block (needed above 48 KiB), or
// throws DeviceError naming `what` and the device's limit. Callers check the problem's
// shape first (the registries' supports()), so this is the last line of defence.
template <class Kernel>
void opt_in_shared(Kernel kernel, std::size_t bytes, const char* what);

}  // namespace km::cuda

#include "cuda/device.hpp"

namespace km::cuda {

template <class Kernel>
void opt_in_shared(Kernel kernel, std::size_t bytes, const char* what) {
  // The kernel's static shared memory counts against the same limits as the dynamic bytes.
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const std::size_t total = bytes + attr.sharedSizeBytes;
  const std::size_t limit = max_shared_bytes();
  if (total > limit)
    throw DeviceError(strprintf("%s needs %zu bytes of shared memory per block; this device allows %zu", what, total,
                                limit));
  if (total > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace km::cuda
