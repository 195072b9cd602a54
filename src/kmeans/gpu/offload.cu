// offload: the whole loop on the GPU, global atomics (kernels/kmeans/4_offload.cuh); the
// final E-step by the shared rung's kernel. offload-block (offload_block.cu) derives from it.
#include "kmeans/gpu/offload.hpp"

#include "kernels/kmeans/3_shared.cuh"
#include "kernels/kmeans/4_offload.cuh"
#include "kernels/kmeans/layouts.hpp"

namespace km::gpu {

template <class T>
std::size_t OffloadEngine<T>::prepare(const Dataset<T>&) {
  const std::size_t bytes = kernels::centroids_bytes(this->k_, this->d_, sizeof(T));
  cuda::opt_in_shared(kernels::assign_shared<T>, bytes, "--impl=offload");
  cuda::opt_in_shared(kernels::assign_accumulate_global<T>, bytes, "--impl=offload");
  return 0;
}

template <class T>
void OffloadEngine<T>::assign(bool accumulate) {
  if (accumulate) return accumulate_pass();
  this->launch(kernels::assign_shared<T>, this->grid_for(this->n_), this->params_.block,
               kernels::centroids_bytes(this->k_, this->d_, sizeof(T)), this->centroids_.get(), nullptr);
}

template <class T>
void OffloadEngine<T>::accumulate_pass() {
  this->launch(kernels::assign_accumulate_global<T>, this->grid_for(this->n_), this->params_.block,
               kernels::centroids_bytes(this->k_, this->d_, sizeof(T)), this->centroids_.get(), this->changed_.get(),
               this->sums_.get(), this->counts_.get(), this->scale_, this->inertia_.get(), this->inertia_scale_,
               this->weights(), this->weight_scale_);
}

template class OffloadEngine<float>;
template class OffloadEngine<double>;

}  // namespace km::gpu

namespace km {
extern const Implementation offload_implementation = describe<gpu::OffloadEngine>(
    "offload", "whole loop on the GPU: global atomics accumulate the centroids, update_centroids kernel", Where::gpu,
    [](std::size_t k, std::size_t d, std::size_t elem, const GpuInfo& gpu) {
      return gpu::centroids_fit_shared("offload", k, d, elem, gpu);
    });
}  // namespace km
