// naive: the first GPU rung (kernels/kmeans/1_naive.cuh); the CPU updates the centroids.
#include "kernels/kmeans/1_naive.cuh"
#include "kmeans/gpu/host_update.hpp"

namespace km::gpu {

template <class T>
class NaiveEngine final : public HostUpdateEngine<T> {
 public:
  explicit NaiveEngine(const Params& p) : HostUpdateEngine<T>(p, "naive", Layout::row_major) {}

 private:
  void launch_assign(unsigned long long* changed) override {
    this->launch(kernels::assign_naive<T>, this->grid_for(this->n_), this->params_.block, 0,
                 this->device_centroids_.get(), changed);
  }
};

}  // namespace km::gpu

namespace km {
extern const Implementation naive_implementation = describe<gpu::NaiveEngine>(
    "naive", "GPU, one thread per object, row-major data; labels to the CPU, which updates the centroids", Where::gpu,
    [](std::size_t k, std::size_t d, std::size_t, const GpuInfo&) { return gpu::fits_int_indexing(k, d); });
}  // namespace km
