// The rungs that keep the whole loop on the GPU (offload, offload-block, fused's paths):
// the centroids, their double sums and counts live on the device; each iteration is one
// assignment-with-accumulation pass, update_centroids (kernels/kmeans/update.cuh), and one
// small read-back of the change count and the shift. A rung supplies its assignment. Every
// sum is exact integer (fixed-point) arithmetic and the shift is summed in a fixed order, so
// a run gives the same bits every time.
#pragma once

#include "kmeans/gpu/engine.hpp"

namespace km::gpu {

// The device memory this process may use: what is free (with the pool's idle bytes, less room
// for the runtime), or --device-memory (cap, when non-zero) when smaller.
std::size_t device_budget(std::size_t cap);

template <class T>
class DeviceUpdateEngine : public GpuEngine<T> {
 public:
  using GpuEngine<T>::GpuEngine;

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override;
  // Row-major rungs whose data and buffers fit the device (setup's test, less the rung's own
  // extra, which setup checks): the upload setup would make, made now.
  const T* stage(const Dataset<T>& data, std::size_t k) override;
  void iterate(IterationStats& stats) override;
  bool partable() const override { return true; }
  void set_whole(const Whole& whole) override { whole_ = whole; }
  bool checks_range() const override { return true; }
  // Whether its accumulation takes sample weights (offload's and offload-block's; fused routes
  // weighted fits to them): setup refuses weighted data otherwise, never ignores the weights.
  virtual bool takes_weights() const { return false; }
  void accumulate() override;
  Partials partials() override;
  void start_update() override;
  void finish_update(IterationStats& stats) override;
  // A batch's graph (engine.hpp): the stream where graphable() says the iteration has no host step.
  void* graph_stream() override { return graphable() ? static_cast<void*>(this->stream_.get()) : nullptr; }
  void queue_iteration() override;
  void collect_iteration(IterationStats& stats) override;
  void read_centroids(std::vector<T>& out) override { this->download_centroids(centroids_.get(), out); }
  void final_labels(std::vector<std::int32_t>& out) override;
  std::string path() const override { return streamed_ ? "streamed" : ""; }

  // Device bytes this engine allocates beyond the data and labels, for K and d.
  static std::size_t buffer_bytes(std::size_t k, std::size_t d) {
    return k * d * (sizeof(T) + sizeof(unsigned long long)) + k * (sizeof(unsigned long long) + sizeof(double));
  }

 protected:
  // One-time preparation before the data is uploaded (launch shapes, opt-ins); k_ is set.
  // Returns the device bytes it will allocate beyond buffer_bytes().
  virtual std::size_t prepare(const Dataset<T>&) { return 0; }
  // Allocations and work after the centroids are on the device.
  virtual void after_setup() {}
  // Assigns every object: with `accumulate`, counts changes into changed_ and adds each
  // object into sums_/counts_; without, only writes the labels (the final E-step).
  virtual void assign(bool accumulate) = 0;
  // Work after each update_centroids (e.g. the tensor path's centred centroids and norms).
  virtual void after_update() {}
  // Whether iterate() is accumulate() then apply() with no decision on the host between its
  // launches and nothing streamed: then queue_iteration() is that iteration (a batch's graph).
  virtual bool graphable() const { return false; }
  // update_centroids, the shift's sum and after_update, queued on the stream (start_update's work).
  void queue_update();
  // Out of core: x_, labels_ and n_ now hold another chunk of the rows (e.g. the tensor path's
  // per-object norms are recomputed).
  virtual void rows_changed() {}
  bool streamed() const { return streamed_ != nullptr; }
  // The sample weights of the rows now in x_ (nullptr unweighted): the accumulating kernels'
  // `weights` argument, with weight_scale_ (update.cuh: weighted_fixed).
  const T* weights() const { return weights_.get() ? weights_.get() + weights_offset_ : nullptr; }

  DeviceBuffer<T> centroids_;              // in layout_
  DeviceBuffer<unsigned long long> sums_;  // [k][d], 64-bit fixed point: value = sum * inv_scale_
  DeviceBuffer<unsigned long long> counts_;
  DeviceBuffer<double> shift_parts_;       // [k]: each cluster's squared shift (update.cuh: total_shift)
  double scale_ = 1, inv_scale_ = 1;       // 2^E and 2^-E, E from max|x| and N (set before prepare)
  double weight_scale_ = 1, inv_weight_ = 1;  // the counts' scale: 1 unweighted (fixed_point.hpp)
  bool keep_sums_ = false;                 // the update leaves sums_ and counts_ as they are (not cleared)
  Whole whole_;                            // the whole problem, when this engine holds a part

 private:
  // Out of core (data beyond --device-memory or the free memory): the rows stay in pinned host
  // memory and go through in chunks, two row-major staging buffers in flight on a copy stream
  // while the previous chunk is assigned; every chunk's labels stay on the device; the sums
  // carry across chunks (integers: the in-memory result bit for bit).
  struct Streamed;
  std::shared_ptr<Streamed> streamed_;
  DeviceBuffer<T> weights_;         // all n sample weights (out of core too: 1/d of the data), or none
  std::size_t weights_offset_ = 0;  // the first row of the chunk in x_
  void setup_streamed(const Dataset<T>& data, std::size_t extra_for_all, std::size_t budget, std::size_t forced_rows);
  void run_chunks(bool accumulate);
};

}  // namespace km::gpu
