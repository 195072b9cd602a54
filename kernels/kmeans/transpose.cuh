// Layout change on the device: objects [N][d] -> [d][N] for the coordinate-major variants.
#pragma once

#include <cstdint>

namespace km::kernels {

// Tiled through shared memory so both the reads and the writes are coalesced. Launch with
// blocks of 32 x 8 threads over a grid of ceil(n/32) x ceil(d/32).
template <class T>
__global__ void transpose_to_coord_major(const T* __restrict__ in, T* __restrict__ out, std::int64_t n, int d) {
  __shared__ T tile[32][33];
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * 32;
  const int j0 = blockIdx.y * 32;
  for (int r = threadIdx.y; r < 32; r += blockDim.y) {
    const std::int64_t i = i0 + r;
    const int j = j0 + threadIdx.x;
    if (i < n && j < d) tile[r][threadIdx.x] = in[i * d + j];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < 32; r += blockDim.y) {
    const int j = j0 + r;
    const std::int64_t i = i0 + threadIdx.x;
    if (i < n && j < d) out[static_cast<std::int64_t>(j) * n + i] = tile[threadIdx.x][r];
  }
}

}  // namespace km::kernels
