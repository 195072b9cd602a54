// The definitions behind delta_kernels.hpp, included only by the per-precision instantiation files
// (delta_kernels_float.cu, delta_kernels_double.cu). Each variant the engine runs is a named
// DeltaTraits (kernels/kmeans/fused/traits.cuh) below; the selectors return fused_delta<variant>.
#pragma once

#include "kernels/kmeans/6_fused_delta.cuh"
#include "kernels/kmeans/6_fused_one_pass.cuh"
#include "kmeans/gpu/fused/delta_kernels.hpp"

namespace km::gpu {

template <class T>
OnePassKernel<T> one_pass_kernel(int maxd, bool owner) {
  using kernels::fused_one_pass;
  if (owner) return maxd == 8 ? fused_one_pass<T, 8, true> : fused_one_pass<T, 16, true>;
  switch (maxd) {
    case 1: return fused_one_pass<T, 1, false>;
    case 2: return fused_one_pass<T, 2, false>;
    case 4: return fused_one_pass<T, 4, false>;
    case 8: return fused_one_pass<T, 8, false>;
    case 16: return fused_one_pass<T, 16, false>;
    default: return fused_one_pass<T, 32, false>;
  }
}

// The delta kernel's variants by name: DeltaTraits through DeltaVariant's feature flags
// (kernels/kmeans/fused/traits.cuh), at a register width W (1, 2, 4, 8, 16, 32), with the
// centroid's index packed into the scores (PACK, K <= 64) or not.
namespace variant {

using kernels::delta_unroll;
using kernels::DeltaVariant;
using kernels::kDeltaBall;
using kernels::kDeltaCells;
using kernels::kDeltaExact;
using kernels::kDeltaFill;
using kernels::kDeltaMma;
using kernels::kDeltaShadow;
using kernels::kDeltaSorted;
using kernels::kDeltaTile;

// FMA scores, no feature; Exact: d is W itself (no coordinate tested against d).
template <class T, int W, bool PACK>
using Plain = DeltaVariant<T, W, PACK, delta_unroll(W, sizeof(T))>;
template <class T, int W, bool PACK>
using Exact = DeltaVariant<T, W, PACK, delta_unroll(W, sizeof(T)), kDeltaExact>;
// The staged loads (cp.async, two buffers a warp), d filling W (16 or 32); StagedMma: the scores on
// the tensor cores.
template <class T, int W, bool PACK>
using Staged = DeltaVariant<T, W, PACK, delta_unroll(W, sizeof(T)), kDeltaExact | kDeltaTile>;
template <class T, int W>
using StagedMma = DeltaVariant<T, W, true, delta_unroll(W, sizeof(T)), kDeltaMma | kDeltaExact | kDeltaTile>;
// The scores on the tensor cores (W 16 or 32, index packed); MmaExact: d is W itself.
template <class T, int W>
using Mma = DeltaVariant<T, W, true, delta_unroll(W, sizeof(T)), kDeltaMma>;
template <class T, int W>
using MmaExact = DeltaVariant<T, W, true, delta_unroll(W, sizeof(T)), kDeltaMma | kDeltaExact>;
// In double at d = 16: the staged passes from the float copy of x - z (as many objects a lane as
// float's: the passes read floats), and the staged kernel reading x that writes the copy.
template <class T>
using FromFloatCopy = DeltaVariant<T, 16, true, delta_unroll(16, 4), kDeltaExact | kDeltaTile | kDeltaShadow>;
template <class T>
using FloatCopyWriter = DeltaVariant<T, 16, true, delta_unroll(16, 8), kDeltaExact | kDeltaTile | kDeltaFill>;
// Elkan's test first (W 1 or 2, index packed).
template <class T, int W>
using Elkan = DeltaVariant<T, W, true, delta_unroll(W), kDeltaBall>;
// The cell table at d = 2: the general loop, the staged loads, the cells' sorted order.
template <class T>
using Cells = DeltaVariant<T, 2, true, delta_unroll(2), kDeltaCells>;
template <class T>
using CellsStaged = DeltaVariant<T, 2, true, delta_unroll(2), kDeltaCells | kDeltaTile>;
template <class T>
using CellsSorted = DeltaVariant<T, 2, true, delta_unroll(2), kDeltaCells | kDeltaSorted>;

}  // namespace variant

namespace detail {

using kernels::fused_delta;
using namespace variant;

// The plain kernel (FMA scores, no feature) at a width; at widths 16 and 32 with d fixed or not
// (fused_plan.cpp: d fixed only where it fills width 16 or 32).
template <class T, bool PACK>
DeltaKernel<T> plain(int maxd, bool fixed) {
  switch (maxd) {
    case 1: return fused_delta<Plain<T, 1, PACK>>;
    case 2: return fused_delta<Plain<T, 2, PACK>>;
    case 4: return fused_delta<Plain<T, 4, PACK>>;
    case 8: return fused_delta<Plain<T, 8, PACK>>;
    case 16: return fixed ? fused_delta<Exact<T, 16, PACK>> : fused_delta<Plain<T, 16, PACK>>;
    default: return fixed ? fused_delta<Exact<T, 32, PACK>> : fused_delta<Plain<T, 32, PACK>>;
  }
}

template <class T, bool PACK>
DeltaKernel<T> staged(int maxd, bool mma) {
  if constexpr (PACK)
    if (mma) return maxd == 16 ? fused_delta<StagedMma<T, 16>> : fused_delta<StagedMma<T, 32>>;
  return maxd == 16 ? fused_delta<Staged<T, 16, PACK>> : fused_delta<Staged<T, 32, PACK>>;
}

}  // namespace detail

template <class T>
DeltaKernel<T> delta_kernel(int maxd, bool pack, bool fixed_width) {
  return pack ? detail::plain<T, true>(maxd, fixed_width) : detail::plain<T, false>(maxd, fixed_width);
}

template <class T>
DeltaKernel<T> delta_staged_kernel(int maxd, bool pack, bool mma) {
  return pack ? detail::staged<T, true>(maxd, mma) : detail::staged<T, false>(maxd, false);
}

template <class T>
DeltaKernel<T> delta_mma_kernel(int maxd, bool fixed_width) {
  using kernels::fused_delta;
  using namespace variant;
  if (maxd == 16) return fixed_width ? fused_delta<MmaExact<T, 16>> : fused_delta<Mma<T, 16>>;
  return fixed_width ? fused_delta<MmaExact<T, 32>> : fused_delta<Mma<T, 32>>;
}

template <class T>
DeltaKernel<T> delta_float_copy_kernel(int maxd) {
  if constexpr (sizeof(T) == 8) {
    return maxd == 16 ? kernels::fused_delta<variant::FromFloatCopy<T>> : nullptr;
  } else {
    (void)maxd;
    return nullptr;
  }
}

template <class T>
DeltaKernel<T> delta_copy_writer_kernel(int maxd) {
  if constexpr (sizeof(T) == 8) {
    return maxd == 16 ? kernels::fused_delta<variant::FloatCopyWriter<T>> : nullptr;
  } else {
    (void)maxd;
    return nullptr;
  }
}

template <class T>
DeltaKernel<T> delta_elkan_kernel(int maxd) {
  using kernels::fused_delta;
  return maxd == 1 ? fused_delta<variant::Elkan<T, 1>> : fused_delta<variant::Elkan<T, 2>>;
}

template <class T>
DeltaKernel<T> delta_cells_kernel(bool staged, bool sorted) {
  using kernels::fused_delta;
  if (staged) return fused_delta<variant::CellsStaged<T>>;
  if (sorted) return fused_delta<variant::CellsSorted<T>>;
  return fused_delta<variant::Cells<T>>;
}

// Every selector for one precision (delta_kernels_<T>.cu).
#define KM_INSTANTIATE_DELTA_KERNELS(T)                                  \
  template OnePassKernel<T> one_pass_kernel<T>(int, bool);               \
  template DeltaKernel<T> delta_kernel<T>(int, bool, bool);              \
  template DeltaKernel<T> delta_staged_kernel<T>(int, bool, bool);       \
  template DeltaKernel<T> delta_mma_kernel<T>(int, bool);                \
  template DeltaKernel<T> delta_float_copy_kernel<T>(int);               \
  template DeltaKernel<T> delta_copy_writer_kernel<T>(int);              \
  template DeltaKernel<T> delta_elkan_kernel<T>(int);                    \
  template DeltaKernel<T> delta_cells_kernel<T>(bool, bool);

}  // namespace km::gpu
