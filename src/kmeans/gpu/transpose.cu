// transpose: naive with coordinate-major data (kernels/kmeans/2_transpose.cuh).
#include "kernels/kmeans/2_transpose.cuh"
#include "kmeans/gpu/host_update.hpp"

namespace km::gpu {

template <class T>
class TransposeEngine final : public HostUpdateEngine<T> {
 public:
  explicit TransposeEngine(const Params& p) : HostUpdateEngine<T>(p, "transpose", Layout::coord_major) {}

 private:
  void launch_assign(unsigned long long* changed) override {
    this->launch(kernels::assign_transpose<T>, this->grid_for(this->n_), this->params_.block, 0,
                 this->device_centroids_.get(), changed);
  }
};

}  // namespace km::gpu

namespace km {
extern const Implementation transpose_implementation = describe<gpu::TransposeEngine>(
    "transpose", "as naive with coordinate-major data [d][N]: coalesced loads", Where::gpu,
    [](std::size_t k, std::size_t d, std::size_t, const GpuInfo&) { return gpu::fits_int_indexing(k, d); });
}  // namespace km
