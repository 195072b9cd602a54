#include "kmeans/device_view.hpp"

#include <cuda_runtime.h>

#include <cstdint>

#include "common/errors.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"

namespace km {

template <class T>
Dataset<T> device_view(const void* address, std::size_t n, std::size_t d, const std::string& what) {
  check_shape(static_cast<std::int64_t>(n), static_cast<std::int64_t>(d), sizeof(T), what);
  const std::string where_named = what + " in GPU memory";
  if (address == nullptr) throw UsageError(where_named + ": a null pointer");
  if (reinterpret_cast<std::uintptr_t>(address) % sizeof(T) != 0)
    throw UsageError(where_named + ": its address is not a multiple of its values' size; copy it on the device");
  if (!gpu_info().present) throw DeviceError(where_named + ", but no usable GPU: " + gpu_info().why_absent);
  // Memory of another GPU (or none the runtime knows) would fault inside a kernel: named here.
  cudaPointerAttributes where{};
  int current = 0;
  CUDA_CHECK(cudaGetDevice(&current));
  if (cudaPointerGetAttributes(&where, address) != cudaSuccess ||
      (where.type != cudaMemoryTypeDevice && where.type != cudaMemoryTypeManaged)) {
    cudaGetLastError();
    throw UsageError(where_named + ": its address is not CUDA device memory");
  }
  if (where.type == cudaMemoryTypeDevice && where.device != current)
    throw UsageError(strprintf("%s is in the memory of GPU %d, but the fit runs on GPU %d (the current device): "
                               "make that GPU current (cudaSetDevice(%d); CuPy: cupy.cuda.Device(%d).use(); "
                               "PyTorch: torch.cuda.set_device(%d)) or move %s",
                               what.c_str(), where.device, current, where.device, where.device, where.device,
                               what.c_str()));
  Dataset<T> data;
  data.n = n;
  data.d = d;
  data.source = where_named;
  data.element = sizeof(T) == 4 ? "float32" : "float64";
  data.device_values = static_cast<const T*>(address);
  return data;
}

void wait_for_device() { CUDA_CHECK(cudaDeviceSynchronize()); }

template Dataset<float> device_view(const void*, std::size_t, std::size_t, const std::string&);
template Dataset<double> device_view(const void*, std::size_t, std::size_t, const std::string&);

}  // namespace km
