// GEMM 3 — shared: W×W threads compute a W×W tile of the output; each step stages a W×W
// tile of A and of B in dynamic shared memory (zero-padded past the edges), so every
// element read from global memory is used W times. W comes from --tile at run time.
#pragma once

#include "kernels/gemm/common.cuh"
#include "kernels/gemm/launch.cuh"

namespace km::kernels::gemm {

template <Op op, class T>
__global__ void gemm_shared(GemmArgs<T> g) {
  extern __shared__ unsigned char gemm_shared_raw[];
  const int w = blockDim.x;
  T* as = reinterpret_cast<T*>(gemm_shared_raw);  // as[r * w + p]: A(row0 + r, p0 + p)
  T* bs = as + w * w;                              // bs[p * w + c]: B(p0 + p, col0 + c)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int i = blockIdx.y * w + ty, j = blockIdx.x * w + tx;
  T sum = 0;
  for (int p0 = 0; p0 < g.k; p0 += w) {
    as[ty * w + tx] = (i < g.m && p0 + tx < g.k) ? load_a<op>(g, i, p0 + tx) : T(0);
    bs[ty * w + tx] = (p0 + ty < g.k && j < g.n) ? load_b<op>(g, p0 + ty, j) : T(0);
    __syncthreads();
    for (int p = 0; p < w; ++p) sum += as[ty * w + p] * bs[p * w + tx];
    __syncthreads();
  }
  if (i < g.m && j < g.n) store_d<op>(g, i, j, sum);
}


template <class T>
void launch_shared(const GemmArgs<T>& g, const GpuOptions& o, cudaStream_t s, cublasHandle_t) {
  const int w = o.tile;
  const std::size_t smem = 2 * std::size_t(w) * w * sizeof(T);
  const dim3 grid = grid_2d(std::size_t(g.n), w, std::size_t(g.m), w, "shared");
  with_op(g.op, [&](auto op) { gemm_shared<decltype(op)::value, T><<<grid, dim3(w, w), smem, s>>>(g); });
}

}  // namespace km::kernels::gemm
