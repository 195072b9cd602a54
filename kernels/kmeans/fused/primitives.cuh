// Small device helpers of the delta kernel's steps.
#pragma once

#include <type_traits>

#include "kernels/gemm/6_tensor.cuh"

namespace km::kernels {

// *to = v in shared memory where q != 0: one st.shared under a predicate, so that the compiler
// cannot turn it into a branch and the lanes with q == 0 move no bytes. (uint2, float2.)
__device__ __forceinline__ void predicated_shared_store(unsigned q, uint2* to, uint2 v) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p st.shared.v2.u32 [%1], {%2, %3};\n\t}" ::"r"(q),
               "r"(static_cast<unsigned>(__cvta_generic_to_shared(to))), "r"(v.x), "r"(v.y)
               : "memory");
}
__device__ __forceinline__ void predicated_shared_store(unsigned q, float2* to, float2 v) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p st.shared.v2.f32 [%1], {%2, %3};\n\t}" ::"r"(q),
               "r"(static_cast<unsigned>(__cvta_generic_to_shared(to))), "f"(v.x), "f"(v.y)
               : "memory");
}

// U consecutive values from p (16-byte aligned, U sizeof(V) a multiple of 16) in 16-byte loads,
// straight into the values' registers.
template <int U, class V>
__device__ __forceinline__ void load_run(const V* p, V (&v)[U]) {
  static_assert(U * sizeof(V) % 16 == 0, "whole 16-byte loads");
  if constexpr (sizeof(V) == 8) {
#pragma unroll
    for (int q = 0; q < U / 2; ++q) {
      const double2 w = reinterpret_cast<const double2*>(p)[q];
      v[2 * q] = w.x;
      v[2 * q + 1] = w.y;
    }
  } else {
#pragma unroll
    for (int q = 0; q < U / 4; ++q) {
      const float4 w = reinterpret_cast<const float4*>(p)[q];
      v[4 * q] = w.x;
      v[4 * q + 1] = w.y;
      v[4 * q + 2] = w.z;
      v[4 * q + 3] = w.w;
    }
  }
}

// count elements over the block: store(t, load(t)), B loads in flight a thread before their
// stores. (As plain loops, a load and its store an iteration, the prologue's copies waited one
// L2 round trip an element: at d = 32, K = 64, 8 centroid values and 9 row values a thread were
// most of the kernel's first 8.4 us (H100, globaltimer), and the last block's 8 held sums a
// thread most of its 6 us update.)
template <int B, class L, class S>
__device__ __forceinline__ void block_batched(int count, L load, S store) {
  for (int t0 = static_cast<int>(threadIdx.x); t0 < count; t0 += B * static_cast<int>(blockDim.x)) {
    decltype(load(0)) v[B];
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int t = t0 + b * static_cast<int>(blockDim.x);
      if (t < count) v[b] = load(t);
    }
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int t = t0 + b * static_cast<int>(blockDim.x);
      if (t < count) store(t, v[b]);
    }
  }
}

// f(std::integral_constant<int, m>) with m = min(slots, U), at least 1: the round's filled slots
// as a constant, so each count gets its own unrolled loop.
template <int U, class F>
__device__ __forceinline__ void with_slots(int slots, F&& f) {
  if constexpr (U == 1) {
    f(std::integral_constant<int, 1>{});
  } else {
    if (slots >= U) f(std::integral_constant<int, U>{});
    else with_slots<U - 1>(slots, f);
  }
}

// MMA's operands and products: the GEMM ladder's TF32 m16n8k8 (the centroids' operands by
// cvt.rna, the objects' by convert_half_up: one integer add, the same rounding as read).
using Tf32Mma = gemm::MmaTf32m16n8k8;

}  // namespace km::kernels
