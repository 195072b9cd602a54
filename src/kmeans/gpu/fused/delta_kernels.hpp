// The one-pass path's kernels by variant: which instantiation of the classic kernel
// (6_fused_one_pass.cuh) and of the delta kernel (6_fused_delta.cuh) a plan's variant runs. The
// instantiations live in delta_kernels_float.cu and delta_kernels_double.cu (one translation unit
// per precision, so that the build compiles them in parallel); the engine (one_pass_*.cu) only
// takes their addresses.
#pragma once

#include <cstdint>

#include "kernels/kmeans/fused/delta_pass.cuh"

namespace km::gpu {

// The classic one-pass kernel's signature (6_fused_one_pass.cuh).
template <class T>
using OnePassKernel = void (*)(const T*, const T*, std::int64_t, int, int, std::int32_t*, unsigned long long*,
                               unsigned long long*, unsigned long long*, double, unsigned long long*, double);

// The delta kernel's signature (6_fused_delta.cuh).
template <class T>
using DeltaKernel = void (*)(const T*, T*, std::int64_t, int, int, std::int32_t*, kernels::DeltaPass);

// The classic kernel for a register width (the smallest power of two >= d) and the accumulation
// mode (owner lanes or fixed-point shared atomics).
template <class T>
OnePassKernel<T> one_pass_kernel(int maxd, bool owner);

// The delta kernel for a register width, with the centroid's index packed into the scores (K <= 64)
// or not; `fixed_width`: d is the width itself (4, 8, 16 or 32), whose kernel tests no coordinate
// against d.
template <class T>
DeltaKernel<T> delta_kernel(int maxd, bool pack, bool fixed_width);

// With the staged loads (cp.async, two buffers a warp) at widths 16 and 32 with d filling them, the
// scores with FMAs or (mma, index packed) on the tensor cores.
template <class T>
DeltaKernel<T> delta_staged_kernel(int maxd, bool pack, bool mma);

// With the scores on the tensor cores (widths 16 and 32, K <= 64).
template <class T>
DeltaKernel<T> delta_mma_kernel(int maxd, bool fixed_width);

// In double, the staged kernel from the float copy of x - z (d = 16, FMA scores), and the staged
// kernel reading x that writes the copy; nullptr in float.
template <class T>
DeltaKernel<T> delta_float_copy_kernel(int maxd);
template <class T>
DeltaKernel<T> delta_copy_writer_kernel(int maxd);

// With Elkan's test first (widths 1 and 2, index packed).
template <class T>
DeltaKernel<T> delta_elkan_kernel(int maxd);

// With the cell table at d = 2: the general loop, the staged loads, or the cells' sorted order.
template <class T>
DeltaKernel<T> delta_cells_kernel(bool staged, bool sorted);

}  // namespace km::gpu
