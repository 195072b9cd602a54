// k-means||'s rounds on the tensor cores (tensor_nearest.cu): for every object, the nearest of
// m given rows by the CPU's k-means|| distance (cpu_steps.hpp: squared_distance_double, the
// direct sum in double in coordinate order), the first row on ties. The candidates come from
// fused's tensor path (TF32 keys on the objects' centred copy, never the N x m matrix; its
// bound, margin.hpp), and the close calls are re-checked in that double arithmetic, so the
// labels are the CPU's, bit for bit, without cuBLAS (whose first call in a process cost 40-130 ms
// of a cold initialisation).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "io/dataset.hpp"
#include "kmeans/centred_rows.hpp"

namespace km::gpu {

template <class T>
class TensorNearest {
 public:
  virtual ~TensorNearest() = default;
  // labels[i] = the nearest of `rows` ([m][d], row-major in T, on the device) to object i, on
  // the stream given at make. With `ceiling` (n distances on the device), only where that row's
  // distance is below ceiling[i]: elsewhere labels[i] is -1 or any row (the wgmma kernel leaves
  // out the rows that cannot beat it, margin.hpp: "A ceiling"; the others ignore it).
  virtual void nearest(const T* rows, int m, std::int32_t* labels, const double* ceiling = nullptr) = 0;
  // The objects re-checked by the last call, in two counts: against their listed candidates,
  // and against every row (waits for the stream).
  virtual void rechecked(unsigned long long& listed, unsigned long long& all) = 0;
};

// For `data` on the device (x, row-major [n][d]) with every |x| at most max_abs (-inf: not known;
// then bounded by |x - mu| + |mu| from the centred copy's norms, once made); null where the path
// does not apply: no TF32 tensor cores (before sm_80), max_abs above 2^48 (float's range for the
// keys, as fused's double on TF32 candidates), or no room for the float copy. With `centred`
// (the engine's centred copy of these rows, centred_rows.hpp) it reads that copy, which must
// outlive it, instead of making its own: the same operands, norms and mean, so the same labels.
template <class T>
std::unique_ptr<TensorNearest<T>> make_tensor_nearest(const Dataset<T>& data, const T* x, double max_abs,
                                                      cudaStream_t stream, const CentredRows* centred = nullptr);

// Loads the kernels make_tensor_nearest's rounds launch for d coordinates (CUDA's lazy loading
// would load each at its first launch), on `stream`.
template <class T>
void preload_tensor_nearest(std::size_t d, cudaStream_t stream);

// This device's tensor cores against an operand made by one integer add (the fused delta kernel's
// objects, gemm::MmaTf32m16n8k8::convert_half_up): for each x, the value an m16n8k8 TF32 mma reads
// (its product with 1, exact) from those bits and from cvt.rna.tf32's; the number that differ.
std::size_t tf32_half_up_mismatches(const std::vector<float>& xs);

}  // namespace km::gpu
