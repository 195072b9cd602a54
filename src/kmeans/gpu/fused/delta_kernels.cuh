// The definitions behind delta_kernels.hpp, included only by the per-precision instantiation files
// (delta_kernels_float.cu, delta_kernels_double.cu). Each variant names the delta kernel's
// template arguments once (6_fused_delta.cuh: <T, MAXD, PACK, U, BALL, BOUNDS, CELLS, MMA, EXACT,
// TILE, SORTED, SHADOW, FILL>).
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

namespace detail {

constexpr bool no = false, yes = true;

// The plain kernel (FMA scores, no feature) at a width, with d fixed or not.
template <class T, bool PACK>
DeltaKernel<T> plain(int maxd, bool fixed) {
  using kernels::delta_unroll;
  using kernels::fused_delta;
  constexpr std::size_t E = sizeof(T);
  switch (maxd) {
    case 1: return fused_delta<T, 1, PACK, delta_unroll(1, E)>;
    case 2: return fused_delta<T, 2, PACK, delta_unroll(2, E)>;
    case 4:
      return fixed ? fused_delta<T, 4, PACK, delta_unroll(4, E), no, no, no, no, yes>
                   : fused_delta<T, 4, PACK, delta_unroll(4, E)>;
    case 8:
      return fixed ? fused_delta<T, 8, PACK, delta_unroll(8, E), no, no, no, no, yes>
                   : fused_delta<T, 8, PACK, delta_unroll(8, E)>;
    case 16:
      return fixed ? fused_delta<T, 16, PACK, delta_unroll(16, E), no, no, no, no, yes>
                   : fused_delta<T, 16, PACK, delta_unroll(16, E)>;
    default:
      return fixed ? fused_delta<T, 32, PACK, delta_unroll(32, E), no, no, no, no, yes>
                   : fused_delta<T, 32, PACK, delta_unroll(32, E)>;
  }
}

template <class T, bool PACK>
DeltaKernel<T> staged(int maxd, bool mma) {
  using kernels::delta_unroll;
  using kernels::fused_delta;
  constexpr std::size_t E = sizeof(T);
  if constexpr (PACK)
    if (mma)
      return maxd == 16 ? fused_delta<T, 16, yes, delta_unroll(16, E), no, no, no, yes, yes, yes>
                        : fused_delta<T, 32, yes, delta_unroll(32, E), no, no, no, yes, yes, yes>;
  return maxd == 16 ? fused_delta<T, 16, PACK, delta_unroll(16, E), no, no, no, no, yes, yes>
                    : fused_delta<T, 32, PACK, delta_unroll(32, E), no, no, no, no, yes, yes>;
}

template <class T, bool PACK>
DeltaKernel<T> bounds(int maxd) {
  using kernels::delta_bounds_unroll;
  using kernels::fused_delta;
  switch (maxd) {
    case 1: return fused_delta<T, 1, PACK, delta_bounds_unroll(1), no, yes>;
    case 2: return fused_delta<T, 2, PACK, delta_bounds_unroll(2), no, yes>;
    case 4: return fused_delta<T, 4, PACK, delta_bounds_unroll(4), no, yes>;
    case 8: return fused_delta<T, 8, PACK, delta_bounds_unroll(8), no, yes>;
    case 16: return fused_delta<T, 16, PACK, delta_bounds_unroll(16), no, yes>;
    default: return fused_delta<T, 32, PACK, delta_bounds_unroll(32), no, yes>;
  }
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
  using detail::no;
  using detail::yes;
  using kernels::delta_unroll;
  using kernels::fused_delta;
  constexpr std::size_t E = sizeof(T);
  if (maxd == 16)
    return fixed_width ? fused_delta<T, 16, yes, delta_unroll(16, E), no, no, no, yes, yes>
                       : fused_delta<T, 16, yes, delta_unroll(16, E), no, no, no, yes>;
  return fixed_width ? fused_delta<T, 32, yes, delta_unroll(32, E), no, no, no, yes, yes>
                     : fused_delta<T, 32, yes, delta_unroll(32, E), no, no, no, yes>;
}

template <class T>
DeltaKernel<T> delta_float_copy_kernel(int maxd) {
  using detail::no;
  using detail::yes;
  if constexpr (sizeof(T) == 8) {
    // (as many objects a lane as float's: the passes read floats)
    return maxd == 16 ? kernels::fused_delta<T, 16, yes, kernels::delta_unroll(16, 4), no, no, no, no, yes, yes, no, yes>
                      : nullptr;
  } else {
    (void)maxd;
    return nullptr;
  }
}

template <class T>
DeltaKernel<T> delta_copy_writer_kernel(int maxd) {
  using detail::no;
  using detail::yes;
  if constexpr (sizeof(T) == 8) {
    return maxd == 16 ? kernels::fused_delta<T, 16, yes, kernels::delta_unroll(16, 8), no, no, no, no, yes, yes, no,
                                             no, yes>
                      : nullptr;
  } else {
    (void)maxd;
    return nullptr;
  }
}

template <class T>
DeltaKernel<T> delta_bounds_kernel(int maxd, bool pack) {
  return pack ? detail::bounds<T, true>(maxd) : detail::bounds<T, false>(maxd);
}

template <class T>
DeltaKernel<T> delta_elkan_kernel(int maxd) {
  using detail::yes;
  return maxd == 1 ? kernels::fused_delta<T, 1, yes, kernels::delta_unroll(1), yes>
                   : kernels::fused_delta<T, 2, yes, kernels::delta_unroll(2), yes>;
}

template <class T>
DeltaKernel<T> delta_cells_kernel(bool staged, bool sorted) {
  using detail::no;
  using detail::yes;
  constexpr int U = kernels::delta_unroll(2);
  if (staged) return kernels::fused_delta<T, 2, yes, U, no, no, yes, no, no, yes>;
  if (sorted) return kernels::fused_delta<T, 2, yes, U, no, no, yes, no, no, no, yes>;
  return kernels::fused_delta<T, 2, yes, U, no, no, yes>;
}

// Every selector for one precision (delta_kernels_<T>.cu).
#define KM_INSTANTIATE_DELTA_KERNELS(T)                                  \
  template OnePassKernel<T> one_pass_kernel<T>(int, bool);               \
  template DeltaKernel<T> delta_kernel<T>(int, bool, bool);              \
  template DeltaKernel<T> delta_staged_kernel<T>(int, bool, bool);       \
  template DeltaKernel<T> delta_mma_kernel<T>(int, bool);                \
  template DeltaKernel<T> delta_float_copy_kernel<T>(int);               \
  template DeltaKernel<T> delta_copy_writer_kernel<T>(int);              \
  template DeltaKernel<T> delta_bounds_kernel<T>(int, bool);             \
  template DeltaKernel<T> delta_elkan_kernel<T>(int);                    \
  template DeltaKernel<T> delta_cells_kernel<T>(bool, bool);

}  // namespace km::gpu
