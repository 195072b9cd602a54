// GEMM 0 — cuBLAS ?gemm, the GPU reference every other kernel is checked and measured
// against (pedantic math: no TF32). Row-major through the operand swap: a row-major X is the
// column-major Xᵀ, so C = A·B is computed as Cᵀ = Bᵀ·Aᵀ with the operands exchanged. For nt
// cuBLAS adds in place (D = A·Bᵀ + D), so D must already hold C.
#pragma once

#include "kernels/gemm/launch.cuh"

namespace km::kernels::gemm {

inline cublasStatus_t cublas_gemm(cublasHandle_t h, cublasOperation_t tb, cublasOperation_t ta, int n, int m, int k,
                                  const double* alpha, const double* b, int ldb, const double* a, int lda,
                                  const double* beta, double* d, int ldc) {
  return cublasDgemm(h, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, d, ldc);
}
inline cublasStatus_t cublas_gemm(cublasHandle_t h, cublasOperation_t tb, cublasOperation_t ta, int n, int m, int k,
                                  const float* alpha, const float* b, int ldb, const float* a, int lda,
                                  const float* beta, float* d, int ldc) {
  return cublasSgemm(h, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, d, ldc);
}

template <class T>
void launch_cublas(const GemmArgs<T>& g, const GpuOptions&, cudaStream_t, cublasHandle_t h) {
  const T one = 1, beta = g.op == Op::nt ? T(1) : T(0);
  CUBLAS_CHECK(cublas_gemm(h, g.op == Op::nt ? CUBLAS_OP_T : CUBLAS_OP_N, g.op == Op::tn ? CUBLAS_OP_T : CUBLAS_OP_N,
                           g.n, g.m, g.k, &one, g.b, int(g.ldb), g.a, int(g.lda), &beta, g.d, int(g.ldc)));
}

}  // namespace km::kernels::gemm
