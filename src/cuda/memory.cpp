#include "cuda/memory.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "io/dataset.hpp"

namespace km::cuda {

PinnedRegion::PinnedRegion(const void* p, std::size_t bytes, bool device_writes) {
  if (!p || !bytes) return;
  // Registration can fail (e.g. unsupported memory); the copy then runs pageable, slower
  // but correct, so the error is cleared rather than thrown.
  void* q = const_cast<void*>(p);
  if (!device_writes && cudaHostRegister(q, bytes, cudaHostRegisterReadOnly) == cudaSuccess)
    ptr_ = q;
  else if (cudaGetLastError(), cudaHostRegister(q, bytes, cudaHostRegisterDefault) == cudaSuccess)
    ptr_ = q;
  else
    cudaGetLastError();
}

PinnedRegion::~PinnedRegion() {
  if (ptr_) cudaHostUnregister(ptr_);
}

namespace {

// The staging ring: host memory from aligned_alloc, pinned with cudaHostRegister (portable:
// any device may read it). Registering 48 MiB costs a few ms; cudaHostAlloc of the same took
// 20 ms. Never freed (the process's exit releases it; freeing at static destruction could
// run after the CUDA runtime is gone).
struct StagingRing {
  unsigned char* buffer[kStagingBuffers] = {};
  bool ready = false;
  bool failed = false;  // pinning failed once: uploads pin in place instead
  std::mutex mutex;
};

StagingRing& staging_ring() {
  static StagingRing* ring = new StagingRing;
  return *ring;
}

bool ensure_ring(StagingRing& ring) {
  if (ring.ready || ring.failed) return ring.ready;
  for (auto& b : ring.buffer) {
    b = static_cast<unsigned char*>(std::aligned_alloc(4096, kStagingBytes));
    if (!b || cudaHostRegister(b, kStagingBytes, cudaHostRegisterPortable) != cudaSuccess) {
      cudaGetLastError();
      ring.failed = true;
      return false;
    }
  }
  ring.ready = true;
  return true;
}

// dst[0, len) = src[0, len) with every thread of the host (64-byte aligned slices).
void parallel_copy(unsigned char* dst, const unsigned char* src, std::size_t len) {
#if defined(_OPENMP)
#pragma omp parallel
  {
    const std::size_t t = static_cast<std::size_t>(omp_get_thread_num()),
                      nt = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t lo = len * t / nt / 64 * 64, hi = t + 1 == nt ? len : len * (t + 1) / nt / 64 * 64;
    if (hi > lo) std::memcpy(dst + lo, src + lo, hi - lo);
  }
#else
  std::memcpy(dst, src, len);
#endif
}

// The pinned slots' arena: 256 slots of kPinnedSlotBytes in one cudaMallocHost, a free list.
struct SlotArena {
  static constexpr std::size_t kSlots = 256;
  std::mutex mutex;
  unsigned char* base = nullptr;
  std::vector<void*> free;
  bool failed = false;
};

SlotArena& slot_arena() {
  static SlotArena* arena = new SlotArena;  // never freed, as the staging ring
  return *arena;
}

}  // namespace

namespace {

cudaMemPool_t current_pool() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  return pool;
}

}  // namespace

void retain_pool_memory() {
  static std::mutex mutex;
  static std::vector<int> done;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  if (std::find(done.begin(), done.end(), device) != done.end()) return;
  std::uint64_t keep = ~std::uint64_t{0};
  CUDA_CHECK(cudaMemPoolSetAttribute(current_pool(), cudaMemPoolAttrReleaseThreshold, &keep));
  done.push_back(device);
}

std::size_t pool_idle_bytes() {
  cudaMemPool_t pool = current_pool();
  std::uint64_t reserved = 0, used = 0;
  CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return reserved > used ? static_cast<std::size_t>(reserved - used) : 0;
}

void trim_device_pools() {
  int count = 0, previous = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  CUDA_CHECK(cudaGetDevice(&previous));
  for (int device = 0; device < count; ++device) {
    CUDA_CHECK(cudaSetDevice(device));
    trim_current_pool();
  }
  CUDA_CHECK(cudaSetDevice(previous));
}

void trim_current_pool() {
  CUDA_CHECK(cudaDeviceSynchronize());  // frees still queued on a stream reach the pool first
  CUDA_CHECK(cudaMemPoolTrimTo(current_pool(), 0));
}

void* acquire_pinned_slot() {
  SlotArena& a = slot_arena();
  {
    const std::lock_guard<std::mutex> lock(a.mutex);
    if (!a.base && !a.failed) {
      void* p = nullptr;
      if (cudaMallocHost(&p, SlotArena::kSlots * kPinnedSlotBytes) == cudaSuccess) {
        a.base = static_cast<unsigned char*>(p);
        for (std::size_t i = SlotArena::kSlots; i-- > 0;) a.free.push_back(a.base + i * kPinnedSlotBytes);
      } else {
        cudaGetLastError();
        a.failed = true;
      }
    }
    if (!a.free.empty()) {
      void* p = a.free.back();
      a.free.pop_back();
      return p;
    }
  }
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, kPinnedSlotBytes));
  return p;
}

void release_pinned_slot(void* p) {
  if (!p) return;
  SlotArena& a = slot_arena();
  const std::lock_guard<std::mutex> lock(a.mutex);
  auto* q = static_cast<unsigned char*>(p);
  if (a.base && q >= a.base && q < a.base + SlotArena::kSlots * kPinnedSlotBytes)
    a.free.push_back(p);
  else
    cudaFreeHost(p);
}

void upload(void* device, const void* host, std::size_t bytes, cudaStream_t stream) {
  if (!bytes) return;
  if (bytes <= (std::size_t{4} << 20)) {  // small: the driver's own staging is quick enough
    CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  StagingRing& ring = staging_ring();
  std::unique_lock<std::mutex> lock(ring.mutex);
  if (!ensure_ring(ring)) {
    lock.unlock();
    PinnedRegion pinned(host, bytes);
    CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  Event done[kStagingBuffers];  // buffer b's last copy has finished reading it
  const auto* src = static_cast<const unsigned char*>(host);
  auto* dst = static_cast<unsigned char*>(device);
  std::size_t chunk = 0;
  for (std::size_t off = 0; off < bytes; off += kStagingBytes, ++chunk) {
    const std::size_t b = chunk % kStagingBuffers, len = std::min(kStagingBytes, bytes - off);
    if (chunk >= kStagingBuffers) CUDA_CHECK(cudaEventSynchronize(done[b].get()));
    parallel_copy(ring.buffer[b], src + off, len);
    CUDA_CHECK(cudaMemcpyAsync(dst + off, ring.buffer[b], len, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaEventRecord(done[b].get(), stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));  // before the ring is handed to the next upload
}

}  // namespace km::cuda

namespace km {

template <class T>
void copy_row(const Dataset<T>& data, std::size_t i, T* out) {
  if (!data.on_device()) {
    std::copy_n(data.row(i), data.d, out);
    return;
  }
  CUDA_CHECK(cudaMemcpy(out, data.device_values + i * data.d, data.d * sizeof(T), cudaMemcpyDeviceToHost));
}
template void copy_row(const Dataset<float>&, std::size_t, float*);
template void copy_row(const Dataset<double>&, std::size_t, double*);

}  // namespace km
