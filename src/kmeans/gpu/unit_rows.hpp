// The cosine metric's normalised objects for data already on the device (Dataset::on_device): made
// there, with the host's arithmetic (metric.hpp: unit_rows; kernels/kmeans/checks.cuh: unit_rows),
// so that a fit of a CuPy array or a PyTorch CUDA tensor reads the bits a fit of the same rows from
// the host reads, and the host never holds them.
#pragma once

#include "cuda/memory.hpp"
#include "io/dataset.hpp"

namespace km::gpu {

// A view of data's rows over their lengths, in `held` (allocated here: n x d values, after
// checking that the device has the memory).
template <class T>
Dataset<T> unit_rows_on_device(const Dataset<T>& data, cuda::DeviceBuffer<T>& held);

}  // namespace km::gpu
