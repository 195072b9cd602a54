// GEMM 2 — coalesced: the naive kernel with the grid's x over columns, so a warp reads 32
// consecutive B elements (nn, tn) and writes 32 consecutive outputs in one transaction.
#pragma once

#include "kernels/gemm/common.cuh"
#include "kernels/gemm/launch.cuh"

namespace km::kernels::gemm {

template <Op op, class T>
__global__ void gemm_coalesced(GemmArgs<T> g) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;  // column
  const int i = blockIdx.y * blockDim.y + threadIdx.y;  // row
  if (i >= g.m || j >= g.n) return;
  T sum = 0;
  for (int p = 0; p < g.k; ++p) sum += load_a<op>(g, i, p) * load_b<op>(g, p, j);
  store_d<op>(g, i, j, sum);
}


template <class T>
void launch_coalesced(const GemmArgs<T>& g, const GpuOptions& o, cudaStream_t s, cublasHandle_t) {
  const int w = o.tile;
  const dim3 grid = grid_2d(std::size_t(g.n), w, std::size_t(g.m), w, "coalesced");
  with_op(g.op, [&](auto op) { gemm_coalesced<decltype(op)::value, T><<<grid, dim3(w, w), 0, s>>>(g); });
}

}  // namespace km::kernels::gemm
