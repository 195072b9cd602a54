// shared: transpose with every centroid in shared memory (kernels/kmeans/3_shared.cuh).
#include "kernels/kmeans/3_shared.cuh"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/gpu/host_update.hpp"

namespace km::gpu {

template <class T>
class SharedEngine final : public HostUpdateEngine<T> {
 public:
  explicit SharedEngine(const Params& p) : HostUpdateEngine<T>(p, "shared", Layout::coord_major) {}

 private:
  void prepare_launch() override {
    bytes_ = kernels::centroids_bytes(this->k_, this->d_, sizeof(T));
    cuda::opt_in_shared(kernels::assign_shared<T>, bytes_, "--impl=shared");
  }
  void launch_assign(unsigned long long* changed) override {
    this->launch(kernels::assign_shared<T>, this->grid_for(this->n_), this->params_.block, bytes_,
                 this->device_centroids_.get(), changed);
  }

  std::size_t bytes_ = 0;
};

}  // namespace km::gpu

namespace km {
extern const Implementation shared_implementation = describe<gpu::SharedEngine>(
    "shared", "as transpose with all centroids in shared memory", Where::gpu,
    [](std::size_t k, std::size_t d, std::size_t elem, const GpuInfo& gpu) {
      return gpu::centroids_fit_shared("shared", k, d, elem, gpu);
    });
}  // namespace km
