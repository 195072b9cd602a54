// Rows a caller holds in CUDA memory (a CuPy array, a PyTorch CUDA tensor, a cudaMalloc'd buffer),
// as a Dataset the GPU rungs read in place (Dataset::device_values): the address is checked
// before anything reads it, and the device's pending work waited for. The Python module and the
// C++ library's Memory::device both come through here, with the same messages.
#pragma once

#include <cstddef>
#include <string>

#include "io/dataset.hpp"

namespace km {

// n x d values of T at `address`, named `what` in the errors: a UsageError where the address is
// null, not a multiple of sizeof(T), not CUDA device (or managed) memory, or another GPU's
// memory than the current device's; a DeviceError where no GPU can be used.
template <class T>
Dataset<T> device_view(const void* address, std::size_t n, std::size_t d, const std::string& what);

// Waits for all the current device's pending work: the producer's writes to rows read in place,
// queued on whatever stream (PyTorch's and JAX's array interfaces name none), are done before
// the engines' own non-blocking streams read them.
void wait_for_device();

}  // namespace km
