// kmeans_gpu._core.DeviceResult: a NumPy result (centroids, labels, ...) copied into CUDA memory
// on a given GPU, which one DLPack consumer then owns: KMeans(output="device") for arrays that
// describe themselves through DLPack alone, such as JAX's, whose library takes it with its own
// from_dlpack (python/kmeans_gpu/_input.py: device_maker). CuPy and PyTorch results are made by
// their own libraries instead. The copy is finished before the object exists, so a consumer may
// read it on any stream.
#include "python/dlpack_out.hpp"

#include <cuda_runtime.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"

namespace py = pybind11;

namespace kmpy {

namespace {

// DLPack's structs as a consumer of a "dltensor" capsule reads them (dlpack.h; this layout is
// ABI-stable since DLPack 0.1).
struct DLDevice {
  std::int32_t device_type, device_id;
};
struct DLDataType {
  std::uint8_t code, bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr std::int32_t kDLCUDA = 2;
constexpr std::uint8_t kDLInt = 0, kDLFloat = 2;
constexpr const char* kCapsule = "dltensor";

// The values in CUDA memory and the tensor that describes them; the tensor's deleter frees both.
struct Owned {
  void* data = nullptr;
  int device = 0;
  std::vector<std::int64_t> shape, strides;  // (strides in elements, C order)
  DLManagedTensor tensor{};
};

// (A deleter cannot report: an error freeing the memory is dropped, as DLPack's producers do.)
void free_owned(DLManagedTensor* tensor) {
  auto* owned = static_cast<Owned*>(tensor->manager_ctx);
  int before = 0;
  if (owned->data && cudaGetDevice(&before) == cudaSuccess && cudaSetDevice(owned->device) == cudaSuccess) {
    cudaFree(owned->data);
    cudaSetDevice(before);
  }
  delete owned;
}

// A capsule nobody consumed (its name still "dltensor") frees its tensor; a consumer renames it
// "used_dltensor" and calls the deleter itself.
void free_unconsumed(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsule)) return;
  auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsule));
  if (tensor && tensor->deleter) tensor->deleter(tensor);
}

DLDataType dl_type(const py::dtype& dtype) {
  const char kind = dtype.kind();
  const auto bits = static_cast<std::uint8_t>(dtype.itemsize() * 8);
  if (kind == 'f' && (bits == 32 || bits == 64)) return {kDLFloat, bits, 1};
  if (kind == 'i' && (bits == 32 || bits == 64)) return {kDLInt, bits, 1};
  throw km::UsageError("internal: DeviceResult takes float32, float64, int32 or int64 values, not " +
                       py::str(static_cast<const py::handle&>(dtype)).cast<std::string>());
}

class DeviceResult {
 public:
  DeviceResult(const py::array& values, int device) : device_(device) {
    if (!km::gpu_info().present) throw km::DeviceError("output='device': no usable GPU: " + km::gpu_info().why_absent);
    const py::array c = py::array::ensure(values, py::array::c_style);
    if (!c) throw km::UsageError("internal: DeviceResult needs an array");
    auto owned = std::make_unique<Owned>();
    owned->device = device;
    owned->shape.assign(c.shape(), c.shape() + c.ndim());
    owned->strides.assign(owned->shape.size(), 1);
    for (std::size_t i = owned->shape.size(); i-- > 1;) owned->strides[i - 1] = owned->strides[i] * owned->shape[i];
    const DLDataType type = dl_type(c.dtype());
    const auto bytes = static_cast<std::size_t>(c.nbytes());
    int before = 0;
    CUDA_CHECK(cudaGetDevice(&before));
    CUDA_CHECK(cudaSetDevice(device));
    const cudaError_t made = cudaMalloc(&owned->data, bytes ? bytes : 1);
    const cudaError_t copied =
        made == cudaSuccess ? cudaMemcpy(owned->data, c.data(), bytes, cudaMemcpyHostToDevice) : made;
    const cudaError_t done = copied == cudaSuccess ? cudaStreamSynchronize(nullptr) : copied;  // (pageable: staged)
    cudaSetDevice(before);
    if (done != cudaSuccess) {
      if (owned->data) cudaFree(owned->data);
      owned->data = nullptr;
      CUDA_CHECK(done);
    }
    DLTensor& t = owned->tensor.dl_tensor;
    t.data = owned->data;
    t.device = {kDLCUDA, device};
    t.ndim = static_cast<std::int32_t>(c.ndim());
    t.dtype = type;
    t.shape = owned->shape.data();
    t.strides = owned->strides.data();
    t.byte_offset = 0;
    owned->tensor.manager_ctx = owned.get();
    owned->tensor.deleter = free_owned;
    owned_ = owned.release();
  }
  DeviceResult(const DeviceResult&) = delete;
  DeviceResult& operator=(const DeviceResult&) = delete;
  ~DeviceResult() {
    if (owned_) free_owned(&owned_->tensor);
  }

  py::tuple dlpack_device() const { return py::make_tuple(kDLCUDA, device_); }

  // The values, once: the capsule's consumer owns them from then on. `dl_device` (the array API's
  // argument), where given, must be where they are: no copy elsewhere is made.
  py::capsule dlpack(const py::object& dl_device) {
    if (!dl_device.is_none()) {
      const auto asked = dl_device.cast<std::pair<int, int>>();
      if (asked.first != kDLCUDA || asked.second != device_)
        throw py::buffer_error(km::strprintf("DeviceResult: its values are on CUDA device %d; device (%d, %d) was "
                                             "asked for",
                                             device_, asked.first, asked.second));
    }
    if (!owned_) throw py::buffer_error("DeviceResult: its values were already handed over through __dlpack__");
    PyObject* capsule = PyCapsule_New(&owned_->tensor, kCapsule, free_unconsumed);
    if (!capsule) throw py::error_already_set();
    owned_ = nullptr;
    return py::reinterpret_steal<py::capsule>(capsule);
  }

 private:
  Owned* owned_ = nullptr;
  int device_;
};

}  // namespace

void add_dlpack_out(py::module_& m) {
  py::class_<DeviceResult>(m, "DeviceResult",
                           "Values copied to CUDA memory on one GPU, handed over once through DLPack (__dlpack__).")
      .def(py::init<const py::array&, int>(), py::arg("values"), py::arg("device"))
      .def("__dlpack_device__", &DeviceResult::dlpack_device)
      .def(
          "__dlpack__",
          [](DeviceResult& self, const py::args&, const py::kwargs& kw) {
            return self.dlpack(kw.contains("dl_device") ? py::object(kw["dl_device"]) : py::object(py::none()));
          },
          "A 'dltensor' capsule of the values (any stream: the copy has finished).");
}

}  // namespace kmpy
