// offload's engine, shared with offload-block, which changes only the accumulating pass.
#pragma once

#include "kmeans/gpu/device_update.hpp"

namespace km::gpu {

template <class T>
class OffloadEngine : public DeviceUpdateEngine<T> {
 public:
  explicit OffloadEngine(const Params& p, const char* name = "offload")
      : DeviceUpdateEngine<T>(p, name, Layout::coord_major) {}

 protected:
  bool takes_weights() const override { return true; }
  std::size_t prepare(const Dataset<T>& data) override;
  void assign(bool accumulate) final;
  // The assignment that also accumulates sums_/counts_ and counts changes.
  virtual void accumulate_pass();
};

}  // namespace km::gpu
