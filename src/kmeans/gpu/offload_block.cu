// offload-block: offload with block-private sums in shared memory, merged once per block
// (kernels/kmeans/5_offload_block.cuh), over one wave of resident blocks.
#include <algorithm>

#include "kernels/kmeans/5_offload_block.cuh"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/gpu/offload.hpp"

namespace km::gpu {

template <class T>
class OffloadBlockEngine final : public OffloadEngine<T> {
 public:
  explicit OffloadBlockEngine(const Params& p) : OffloadEngine<T>(p, "offload-block") {}

 private:
  std::size_t prepare(const Dataset<T>& data) override {
    OffloadEngine<T>::prepare(data);
    bytes_ = kernels::block_sums_layout<std::size_t>(this->k_, this->d_, sizeof(T)).bytes;
    cuda::opt_in_shared(kernels::assign_accumulate_block<T>, bytes_, "--impl=offload-block");
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernels::assign_accumulate_block<T>,
                                                             this->params_.block, bytes_));
    grid_ = std::max(1, std::min(per_sm * multiprocessor_count(), this->grid_for(data.n)));  // one wave
    return 0;
  }

  void accumulate_pass() override {
    this->launch(kernels::assign_accumulate_block<T>, grid_, this->params_.block, bytes_, this->centroids_.get(),
                 this->changed_.get(), this->sums_.get(), this->counts_.get(), this->scale_, this->inertia_.get(),
                 this->inertia_scale_, this->weights(), this->weight_scale_);
  }

  std::size_t bytes_ = 0;
  int grid_ = 1;
};

}  // namespace km::gpu

namespace km {
extern const Implementation offload_block_implementation = describe<gpu::OffloadBlockEngine>(
    "offload-block", "as offload, accumulating per block in shared memory and merging once per block", Where::gpu,
    [](std::size_t k, std::size_t d, std::size_t elem, const GpuInfo& gpu) {
      return gpu::fits_shared("offload-block", kernels::block_sums_layout<std::size_t>(k, d, elem).bytes, k, d, gpu);
    });
}  // namespace km
