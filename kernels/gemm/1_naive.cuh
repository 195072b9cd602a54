// GEMM 1 — naive: one thread per output element, the grid's x over rows. A warp's threads
// hold consecutive rows, so each B load is one value broadcast and each A load (nn) is 32
// addresses k elements apart: the uncoalesced original of the reports.
#pragma once

#include "kernels/gemm/common.cuh"
#include "kernels/gemm/launch.cuh"

namespace km::kernels::gemm {

template <Op op, class T>
__global__ void gemm_naive(GemmArgs<T> g) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;  // row
  const int j = blockIdx.y * blockDim.y + threadIdx.y;  // column
  if (i >= g.m || j >= g.n) return;
  T sum = 0;
  for (int p = 0; p < g.k; ++p) sum += load_a<op>(g, i, p) * load_b<op>(g, p, j);
  store_d<op>(g, i, j, sum);
}


template <class T>
void launch_naive(const GemmArgs<T>& g, const GpuOptions& o, cudaStream_t s, cublasHandle_t) {
  const int w = o.tile;
  const dim3 grid = grid_2d(std::size_t(g.m), w, std::size_t(g.n), w, "naive");
  with_op(g.op, [&](auto op) { gemm_naive<decltype(op)::value, T><<<grid, dim3(w, w), 0, s>>>(g); });
}

}  // namespace km::kernels::gemm
