// The part every GPU engine shares: the device copy of the data in the variant's layout,
// the labels, the change counter and the centroid shift read back through pinned scalars,
// the stream and the phase timer; centroid upload/download in the variant's layout; and
// the limits every GPU variant has. Compiled by nvcc only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "cuda/timer.hpp"
#include "kmeans/implementation.hpp"

namespace km::gpu {

using cuda::DeviceBuffer;
using cuda::Phase;
using cuda::PinnedBuffer;

// Objects (and, for most variants, centroids) row-major [n][d] or coordinate-major [d][n].
enum class Layout { row_major, coord_major };

// Every GPU variant indexes K*d with int.
Support fits_int_indexing(std::size_t k, std::size_t d);
// `bytes` of shared memory per block against the device's opt-in limit.
Support fits_shared(const char* impl, std::size_t bytes, std::size_t k, std::size_t d, const GpuInfo& gpu);
// Every centroid in shared memory (shared, offload).
Support centroids_fit_shared(const char* impl, std::size_t k, std::size_t d, std::size_t elem, const GpuInfo& gpu);

template <class T>
class GpuEngine : public Engine<T> {
 public:
  GpuEngine(const Params& params, const char* name, Layout layout)
      : params_(params), name_(name), layout_(layout) {}

  std::string device() const override { return device_name(); }
  bool on_gpu() const override { return true; }
  bool final_inertia(const std::vector<T>& centroids, double& inertia) override {
    if (data_ != nullptr && !data_->on_device()) {  // no room for the objects' terms: the host sums its data
      try {
        check_device_memory(n_ * sizeof(double) * 2 + centroids.size() * sizeof(T), "the objective", "");
      } catch (const DeviceError&) {
        return false;
      }
    }
    return device_inertia(centroids, inertia, params_.metric);
  }

 protected:
  // Uploads the data (transposed on the device for coord_major), allocates the labels (set
  // to -1: every object changes in the first iteration) and the counters. First checks
  // that the data, its staging copy and `extra_bytes` (the variant's own buffers) fit.
  // (The upload is skipped when upload_data() has already put this data on the device.)
  void setup_common(const Dataset<T>& data, std::size_t k, std::size_t extra_bytes);
  // The upload alone (n_, d_ set; labels and counters not yet): for engines that check the
  // data's range on the device before they choose their buffers. release_data() undoes it.
  void upload_data(const Dataset<T>& data, std::size_t extra_bytes);
  void release_data();
  // Whether upload_data reads `data`'s rows where they are (data already on the device, row-major
  // and aligned as cudaMalloc's) rather than copying them; and the device bytes its copy of the
  // rows takes (0 read in place; coordinate-major: the copy and its row-major staging).
  bool reads_in_place(const Dataset<T>& data) const;
  std::size_t rows_bytes(const Dataset<T>& data) const;
  // coord_major engines: whether the row-major upload is kept past its transpose (rows_), for
  // data of d coordinates. fused: the float copy's kernel reads its movers' rows there.
  virtual bool keep_rows(std::size_t /*d*/) const { return false; }
  // max |x| over the uploaded data, or NaN when some value is NaN or infinite.
  double device_largest();
  // The objective of the uploaded data for `centroids` ([k][d]) and the labels on the device
  // (final_labels) under `metric`, the CPU's objective() bit for bit (Euclidean: inertia());
  // false when the data is not on the device.
  bool device_inertia(const std::vector<T>& centroids, double& out, Metric metric = Metric::euclidean);
  // Clears the change counter and the shift on the stream.
  void reset_changed();
  // Copies the change counter (and the shift, if asked, and the iteration's inertia when the
  // kernels sum it: inertia_inv_scale_ != 0) back, waits, collects the phases.
  std::int64_t read_changed(IterationStats& stats, double* shift = nullptr) {
    queue_read_back(shift != nullptr);
    return wait_read_back(stats, shift);
  }
  // The same in two steps: queue the copies; then wait for them and collect the phases.
  void queue_read_back(bool shift);
  std::int64_t wait_read_back(IterationStats& stats, double* shift);
  void download_labels(std::vector<std::int32_t>& out);
  // Out of core: `rows` row-major rows on the device into x_, in layout_ (n_ = rows), on the stream.
  void transpose_rows(const T* rows_on_device, std::size_t rows);
  // Blocks of params_.block threads covering `items`.
  int grid_for(std::size_t items) const;
  // Launches an assignment kernel of the ladder's signature (objects, centroids, n, d, k,
  // labels, change counter, then `extra`: the accumulating kernels' sums and counts).
  template <class Kernel, class... Extra>
  void launch(Kernel kernel, int grid, int block, std::size_t shared_bytes, const T* centroids,
              unsigned long long* changed, Extra... extra) {
    kernel<<<grid, block, shared_bytes, stream_>>>(x_.get(), centroids, static_cast<std::int64_t>(n_),
                                                   static_cast<int>(d_), static_cast<int>(k_), labels_.get(),
                                                   changed, extra...);
    CUDA_CHECK_LAUNCH();
  }
  // Device memory for the engine's own use on stream_, from the device's pool (freed in the
  // stream's order when the engine goes; memory.hpp).
  template <class U>
  DeviceBuffer<U> device_buffer(std::size_t count) const {
    return DeviceBuffer<U>(count, stream_.get());
  }
  // Centroids [k][d] on the host <-> `device` in layout_ ([k][d] or [d][k]), synchronously.
  void upload_centroids(const std::vector<T>& host, T* device);
  void download_centroids(const T* device, std::vector<T>& host);

  // The update re-normalises the centroids (the cosine and dot metrics: kernels/kmeans/unit_norm.hpp).
  bool unit() const { return params_.metric != Metric::euclidean; }

  const Params params_;
  const char* const name_;
  const Layout layout_;
  const Dataset<T>* data_ = nullptr;
  const Dataset<T>* uploaded_ = nullptr;  // whose rows x_ holds, all of them (not out of core)
  std::size_t n_ = 0, d_ = 0, k_ = 0;
  cuda::Stream stream_;
  // n*d, in layout_: the engine's copy, or the caller's rows already on the device, borrowed
  // where they are row-major and aligned as cudaMalloc's (upload_data).
  cuda::DeviceRows<T> x_;
  DeviceBuffer<T> rows_;                      // n*d row-major, where keep_rows asked (else empty)
  DeviceBuffer<std::int32_t> labels_;         // n
  // The iteration's counters, one block on the device and one pinned copy on the host, so that
  // they are cleared by one memset and read back by one copy (and the setup makes one pinned
  // allocation, not three: each cudaMallocHost costs a fraction of a millisecond).
  struct Counters {
    unsigned long long changed;  // objects whose label changed
    double shift;                // the summed squared centroid shift
    unsigned long long inertia;  // the iteration's inertia, 64-bit fixed point
    unsigned long long queued[2];  // fused's tensor path: objects queued for re-checks (some, all)
    unsigned long long looked_up;  // fused's one pass at d = 2: objects labelled from the cell table
    unsigned long long rescored;   // fused's one pass, tensor-core scores: objects scored again with FMAs
    unsigned long long stopped;    // fused's one pass: its last block's verdict on the stop rule (1: stop)
    // fused's one pass: device stamps (%globaltimer, ns) of its start and end, and the sequence
    // number its last block writes last (the host spins on it where no event marks the kernel).
    unsigned long long start_ns, end_ns, seq;
  };
  template <class U>
  struct Slot {  // one counter's device address, used like a DeviceBuffer's get()
    U* p = nullptr;
    U* get() const { return p; }
  };
  DeviceBuffer<Counters> counters_;
  Slot<unsigned long long> changed_;
  Slot<double> shift_;
  Slot<unsigned long long> inertia_;
  cuda::PinnedSlot<Counters> counters_host_;
  double inertia_scale_ = 0, inertia_inv_scale_ = 0;  // set by engines whose kernels sum the inertia
  cuda::PhaseTimer timer_;
};

}  // namespace km::gpu
