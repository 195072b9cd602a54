// The one-pass path's kernels in float (delta_kernels.cuh).
#include "kmeans/gpu/fused/delta_kernels.cuh"

namespace km::gpu {
KM_INSTANTIATE_DELTA_KERNELS(float)
}  // namespace km::gpu
