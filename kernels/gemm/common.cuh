// Device helpers shared by the GEMM kernels: operand access in each op's storage order,
// vector types, and the asynchronous global→shared copy (cp.async, sm_80+).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gemm/gemm.hpp"

namespace km::kernels::gemm {

using km::gemm::GemmArgs;
using km::gemm::Op;

// A(i, p) and B(p, j) of the product, whatever the storage (see gemm.hpp).
template <Op op, class T>
__device__ __forceinline__ T load_a(const GemmArgs<T>& g, int i, int p) {
  return op == Op::tn ? g.a[std::size_t(p) * g.lda + i] : g.a[std::size_t(i) * g.lda + p];
}
template <Op op, class T>
__device__ __forceinline__ T load_b(const GemmArgs<T>& g, int p, int j) {
  return op == Op::nt ? g.b[std::size_t(j) * g.ldb + p] : g.b[std::size_t(p) * g.ldb + j];
}
// Writes one result: D = sum (+ C for nt).
template <Op op, class T>
__device__ __forceinline__ void store_d(const GemmArgs<T>& g, int i, int j, T sum) {
  const std::size_t at = std::size_t(i) * g.ldc + j;
  if (op == Op::nt) sum += g.c[at];
  g.d[at] = sum;
}

// Whether A / B are stored with k as the contiguous index.
template <Op op>
constexpr bool a_k_contiguous = op != Op::tn;
template <Op op>
constexpr bool b_k_contiguous = op == Op::nt;

// N consecutive T as one access (16, 8 or 4 bytes).
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// cp.async of BYTES (4, 8 or 16) from global to shared; src_bytes = 0 writes zeros
// without reading (the zero padding of edge tiles).
template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, bool in_bounds) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = in_bounds ? BYTES : 0;
  if constexpr (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(BYTES), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

}  // namespace km::kernels::gemm
