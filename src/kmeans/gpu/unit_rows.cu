#include "kmeans/gpu/unit_rows.hpp"

#include <cstdint>

#include "common/errors.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "kernels/kmeans/checks.cuh"

namespace km::gpu {

template <class T>
Dataset<T> unit_rows_on_device(const Dataset<T>& data, cuda::DeviceBuffer<T>& held) {
  if (!data.on_device()) throw UsageError("internal: unit_rows_on_device needs data on the device");
  check_device_memory(data.n * data.d * sizeof(T), "the cosine metric's normalised copy of the data on the GPU",
                      "use fewer objects or float32");
  // From the pool (which the check above counts as free), on the legacy default stream: after
  // the caller's work there, and freed there once the fit, which waits for its engines, is over.
  held = cuda::DeviceBuffer<T>(data.n * data.d, cudaStreamLegacy);
  if (data.n > 0) {
    kernels::unit_rows<T><<<static_cast<unsigned>((data.n + 255) / 256), 256, 0, cudaStreamLegacy>>>(
        data.device_values, static_cast<std::int64_t>(data.n), static_cast<int>(data.d), held.get());
    CUDA_CHECK_LAUNCH();
  }
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));  // the engines read it on their own streams
  Dataset<T> unit;
  unit.n = data.n;
  unit.d = data.d;
  unit.source = data.source;
  unit.element = data.element;
  unit.device_values = held.get();
  return unit;
}

template Dataset<float> unit_rows_on_device(const Dataset<float>&, cuda::DeviceBuffer<float>&);
template Dataset<double> unit_rows_on_device(const Dataset<double>&, cuda::DeviceBuffer<double>&);

}  // namespace km::gpu
