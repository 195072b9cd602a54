// The first three rungs (naive, transpose, shared) as the lab has them: the GPU assigns,
// the labels come back every iteration and the CPU computes the new centroids and sends
// them down. A rung supplies only its assignment launch (and, for shared, its limits).
#pragma once

#include <memory>

#include "kmeans/gpu/engine.hpp"

namespace km::gpu {

template <class T>
class HostUpdateEngine : public GpuEngine<T> {
 public:
  using GpuEngine<T>::GpuEngine;

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override;
  void iterate(IterationStats& stats) override;
  void read_centroids(std::vector<T>& out) override { out = centroids_; }
  void final_labels(std::vector<std::int32_t>& out) override;

 protected:
  // Launches the assignment of every object against device_centroids_ (in the layout),
  // counting changes into `changed` unless it is null.
  virtual void launch_assign(unsigned long long* changed) = 0;
  // One-time preparation of the launch (shared-memory opt-in); k_ and d_ are set.
  virtual void prepare_launch() {}

  DeviceBuffer<T> device_centroids_;

 private:
  void send_centroids();  // staged in the layout, timed as h2d

  std::vector<T> centroids_;  // [k][d]
  PinnedBuffer<std::int32_t> host_labels_;
  PinnedBuffer<T> staged_;
  std::vector<double> sums_;
  std::vector<double> carries_;  // the sums' rounding errors (add_to_cluster)
  std::vector<double> counts_;  // weight totals (object counts unweighted)
};

}  // namespace km::gpu
