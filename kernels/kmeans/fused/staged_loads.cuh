// TILE, the staged loads (d 8-32 with d a constant, or the cells at d = 2): a warp's pass is 32 U
// consecutive objects, which cp.async brings into one of the warp's two buffers while the warp
// scores the pass in the other; that buffer then serves as the pass's stage. SHADOW: a buffer
// holds the pass's rows of the float copy (and after them the labels) in its first half, and
// serves as the stage (in T) as without it once they are in registers.
#pragma once

#include <cstdint>
#include <type_traits>
#include "kernels/gemm/6_tensor.cuh"
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/layouts.hpp"

namespace km::kernels {

template <class C>
struct StagedTile {
  using TileT = std::conditional_t<C::SHADOW, float, typename C::T>;
  static constexpr int TBT = C::TBE * static_cast<int>(sizeof(typename C::T) / sizeof(TileT));  // a buffer, in TileT
};

// TILE: the warp's 32 U objects from `from` into buffer `which` (object u * 32 + lane of its share
// of the block's pass), copied 16 bytes at a time: per coordinate 32 U sizeof(T) / 16 chunks, then
// the labels' 32 U * 4 / 16 = 8 U; past n, zeros (the host asks n % 4 == 0, so a chunk is wholly
// in or out, and rows 16-byte aligned).
template <class C>
__device__ __forceinline__ void issue_tile_copies(std::int64_t from, int which, const int& warp_u, const int& lane, const std::int64_t& n,
                                           const DeltaPass& p, const typename C::T* __restrict__ const& x,
                                           typename StagedTile<C>::TileT* const& ttiles, typename C::T* const& tiles,
                                           std::int32_t* __restrict__ const& labels) {
  using T = typename C::T;
  using TileT = typename StagedTile<C>::TileT;
  constexpr int U = C::U, MAXD = C::MAXD, TBE = C::TBE, TBT = StagedTile<C>::TBT;
  constexpr bool TILE = C::TILE, SHADOW = C::SHADOW;
  // A row of 32 U values is RC chunks, so a step of the warp copies 32 / RC rows; lane l always
  // takes chunk l % RC of row l / RC (+ 32 / RC each step): one base address a pass, then a
  // constant stride (at d = 16 in float 9 chunks a lane, 124 instructions a pass before).
  // (layouts.hpp: tile_chunk, the plan a CPU test checks covers every chunk once)
  constexpr int RC = tile_row_chunks(U, sizeof(TileT)), EC = 16 / static_cast<int>(sizeof(TileT));
  constexpr int RPS = RC <= 32 ? 32 / RC : 1, STEPS = tile_copy_steps(MAXD, U, sizeof(TileT));
  static_assert(!TILE || STEPS > 0, "the staged loads' copy plan");
  const std::int64_t wbase = from + warp_u * 32 * U;
  if constexpr (RC <= 32) {
    const TileChunk first = tile_chunk(MAXD, U, sizeof(TileT), 0, lane);
    const int r0 = first.row, q = first.col;
    const bool in = wbase + q * EC < n;  // (n % 4 == 0: a chunk is wholly in or out)
    const TileT* src;
    if constexpr (SHADOW) src = p.shadow + static_cast<std::int64_t>(r0) * n + (in ? wbase + q * EC : 0);
    else src = x + static_cast<std::int64_t>(r0) * n + (in ? wbase + q * EC : 0);
    TileT* dst = ttiles + which * TBT + r0 * 32 * U + q * EC;
    const std::int64_t stride = static_cast<std::int64_t>(RPS) * n;
#pragma unroll
    for (int r = 0; r < STEPS; ++r) gemm::cp_async<16>(dst + r * RPS * 32 * U, src + r * stride, in);
  } else {  // (d = 2 in double: a row is RC / 32 steps)
#pragma unroll
    for (int st = 0; st < STEPS; ++st) {
      const TileChunk c = tile_chunk(MAXD, U, sizeof(T), st, lane);
      const bool in = wbase + c.col * EC < n;
      gemm::cp_async<16>(tiles + which * TBE + c.row * 32 * U + c.col * EC,
                         x + static_cast<std::int64_t>(c.row) * n + (in ? wbase + c.col * EC : 0), in);
    }
  }
  if (lane < 8 * U) {  // the old labels: 32 U of 4 bytes
    const bool lin = wbase + lane * 4 < n;
    gemm::cp_async<16>(reinterpret_cast<std::int32_t*>(ttiles + which * TBT + MAXD * 32 * U) + lane * 4,
                       labels + (lin ? wbase + lane * 4 : 0), lin);
  }
}

}  // namespace km::kernels
