// Shared host machinery of the GPU implementations: RAII device memory, a pinned view of
// the dataset, the device-memory check, CUDA-event phase timing, and a base engine that
// owns the stream, the labels and the change counter. Compiled by nvcc only.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/cuda_check.hpp"
#include "kmeans/engine.hpp"

namespace km::gpu {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count) CUDA_CHECK(cudaMalloc(&ptr_, count * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

// Host memory that the device can read at full speed: cudaMallocHost.
template <class T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t count = 1) { CUDA_CHECK(cudaMallocHost(&ptr_, count * sizeof(T))); }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

// Pins an existing (page-aligned) host range in place for a copy, then unpins it. A range
// the device only reads (an upload) is registered read-only; pass device_writes = true for
// a download target.
class PinnedRegion {
 public:
  PinnedRegion(const void* p, std::size_t bytes, bool device_writes = false);
  ~PinnedRegion();
  PinnedRegion(const PinnedRegion&) = delete;
  PinnedRegion& operator=(const PinnedRegion&) = delete;

 private:
  void* ptr_ = nullptr;
};

// Throws DeviceError before any allocation when `bytes` will not fit in free device memory.
void check_device_memory(std::size_t bytes, const std::string& impl);

// The device's opt-in limit of dynamic shared memory per block, in bytes.
std::size_t max_shared_bytes();
int multiprocessor_count();
std::string device_name();

enum class Phase { h2d = 0, kernel = 1, d2h = 2 };

// CUDA events around device phases of one iteration; resolved after the stream syncs.
class PhaseTimer {
 public:
  PhaseTimer();
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  void begin(Phase p, cudaStream_t s);
  void end(Phase p, cudaStream_t s);
  // Adds each used phase's elapsed time to stats and forgets it. Call after a sync.
  void collect(IterationStats& stats);

 private:
  static constexpr int kSlots = 8;
  struct Slot {
    cudaEvent_t start, stop;
    Phase phase;
  };
  std::array<Slot, kSlots> slots_{};
  int used_ = 0;
  int open_ = -1;
};

enum class Layout { row_major, coord_major };

// The part every GPU engine shares: the device copy of the data in the variant's layout,
// the labels, the change counter read back through one pinned scalar, the stream.
template <class T>
class GpuEngine : public Engine<T> {
 public:
  GpuEngine(const Params& params, std::string name, Layout layout)
      : params_(params), name_(std::move(name)), layout_(layout) {}
  ~GpuEngine() override;

  std::string device() const override { return device_name(); }

 protected:
  // Uploads the data (and transposes it on the device for coord_major), allocates the
  // labels (set to -1) and the counters. `extra_bytes`: what the variant allocates beyond.
  void setup_common(const Dataset<T>& data, std::size_t extra_bytes);
  // Clears the change counter on the stream.
  void reset_changed();
  // Copies the change counter (and, if given, a device double) back and waits for it.
  std::int64_t read_changed(IterationStats& stats, const double* device_shift = nullptr, double* shift = nullptr);
  void download_labels(std::vector<std::int32_t>& out);
  int grid_for(std::size_t items) const;

  Params params_;
  std::string name_;
  Layout layout_;
  const Dataset<T>* data_ = nullptr;
  std::size_t n_ = 0, d_ = 0, k_ = 0;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<T> x_;                       // n*d, in layout_
  DeviceBuffer<std::int32_t> labels_;       // n
  DeviceBuffer<unsigned long long> changed_;  // 1
  DeviceBuffer<double> shift_;              // 1
  PinnedBuffer<unsigned long long> changed_host_{1};
  PinnedBuffer<double> shift_host_{1};
  PhaseTimer timer_;
};

}  // namespace km::gpu
