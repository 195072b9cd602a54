// GEMM 4 — shared-static: the tiled kernel with the tile size W a compile-time constant in
// static shared memory, so the compiler unrolls the inner product and folds the indexing.
#pragma once

#include "kernels/gemm/common.cuh"
#include "kernels/gemm/launch.cuh"

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


template <int W, class T>
void launch_shared_static_w(const GemmArgs<T>& g, cudaStream_t s) {
  const dim3 grid = grid_2d(std::size_t(g.n), W, std::size_t(g.m), W, "shared-static");
  with_op(g.op, [&](auto op) { gemm_shared_static<decltype(op)::value, T, W><<<grid, dim3(W, W), 0, s>>>(g); });
}

template <class T>
void launch_shared_static(const GemmArgs<T>& g, const GpuOptions& o, cudaStream_t s, cublasHandle_t) {
  switch (o.tile) {
    case 4: launch_shared_static_w<4>(g, s); break;
    case 8: launch_shared_static_w<8>(g, s); break;
    case 16: launch_shared_static_w<16>(g, s); break;
    default: launch_shared_static_w<32>(g, s); break;
  }
}

}  // namespace km::kernels::gemm
