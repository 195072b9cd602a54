// kmeans_gpu._core.DeviceResult (dlpack_out.cpp): a result handed over in CUDA memory through
// DLPack, for KMeans(output="device") of arrays that describe themselves through DLPack alone.
#pragma once

#include <pybind11/pybind11.h>

namespace kmpy {

void add_dlpack_out(pybind11::module_& m);

}  // namespace kmpy
