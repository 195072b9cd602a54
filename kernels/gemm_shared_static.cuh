// GEMM 4 — shared-static: the tiled kernel with the tile size W a compile-time constant in
// static shared memory, so the compiler unrolls the inner product and folds the indexing.
#pragma once

#include "gemm_common.cuh"

namespace km::kernels::gemm {

template <Op op, class T, int W>
__global__ void __launch_bounds__(W * W) gemm_shared_static(GemmArgs<T> g) {
  __shared__ T as[W][W];
  __shared__ T bs[W][W];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int i = blockIdx.y * W + ty, j = blockIdx.x * W + tx;
  T sum = 0;
  for (int p0 = 0; p0 < g.k; p0 += W) {
    as[ty][tx] = (i < g.m && p0 + tx < g.k) ? load_a<op>(g, i, p0 + tx) : T(0);
    bs[ty][tx] = (p0 + ty < g.k && j < g.n) ? load_b<op>(g, p0 + ty, j) : T(0);
    __syncthreads();
#pragma unroll
    for (int p = 0; p < W; ++p) sum += as[ty][p] * bs[p][tx];
    __syncthreads();
  }
  if (i < g.m && j < g.n) store_d<op>(g, i, j, sum);
}

}  // namespace km::kernels::gemm
