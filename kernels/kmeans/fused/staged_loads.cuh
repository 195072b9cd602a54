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

// TILE: the pass's objects from the warp's buffer `cur`, after the next pass's copies into the
// other are issued (the one this warp used two passes ago, its reads and the movers' stage done:
// the pass's closing __syncwarp); the buffer then serves as the pass's stage. kDynamic: the
// next pass is the chunk taken a pass ago, and the one after is taken now (the kernel says how).
template <class C, class TileIssue>
__device__ __forceinline__ void load_staged_pass(const std::int64_t& base, const std::int64_t& step,
                                                 const bool& dynamic, int* next_chunk_s, const int& warp,
                                                 const int& warp_u, const int& lane, const int& warps_in_block,
                                                 const std::int64_t& n, const int& cur, TileIssue& tile_issue,
                                                 const DeltaPass& p, unsigned& chunk_count, std::int64_t& next_base,
                                                 typename C::T*& stage, typename C::T* const& tiles,
                                                 typename StagedTile<C>::TileT* const& ttiles,
                                                 std::int64_t (&idx)[C::U], bool (&has)[C::U],
                                                 float (&xsh)[C::SHADOW ? C::U : 1][C::MAXD],
                                                 typename C::T (&xr)[C::U][C::MAXD], int (&old)[C::U]) {
  using TileT = typename StagedTile<C>::TileT;
  constexpr int U = C::U, MAXD = C::MAXD, TBE = C::TBE, TBT = StagedTile<C>::TBT;
  constexpr bool SHADOW = C::SHADOW, kDynamic = C::kDynamic, kUniformBase = C::kUniformBase;
  std::int64_t following = base + step;
  if constexpr (kDynamic) {
    if (dynamic) {
      const unsigned chunk = kUniformBase
                                 ? __reduce_max_sync(0xffffffffu, static_cast<unsigned>(next_chunk_s[warp]))
                                 : static_cast<unsigned>(next_chunk_s[warp]);
      following = (static_cast<std::int64_t>(chunk) - warp_u) * 32 * U;
    }
    next_base = following;
  }
  if (kDynamic && dynamic ? following + warp_u * 32 * U < n : following < n) tile_issue(following, cur ^ 1);
  gemm::cp_async_commit();
  if (dynamic && lane == 0) {
    const unsigned g = blockIdx.x * warps_in_block + warp;
    chunk_count = atomicAdd(p.chunks + (g % kDeltaChunkCounters) * kDeltaChunkStride, 1u);  // (the pass after next)
  }
  // (SHADOW: the groups are this pass's buffer, the last pass's movers, the next buffer)
  if constexpr (SHADOW) gemm::cp_async_wait<2>();
  else gemm::cp_async_wait<1>();
  __syncwarp();  // every lane's copies landed and seen by the warp
  stage = tiles + cur * TBE;
  const TileT* tstage = ttiles + cur * TBT;
  const std::int32_t* lt = reinterpret_cast<const std::int32_t*>(tstage + MAXD * 32 * U);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    idx[u] = base + warp_u * 32 * U + u * 32 + lane;
    has[u] = idx[u] < n;
#pragma unroll
    for (int j = 0; j < MAXD; ++j) {
      if constexpr (SHADOW) xsh[u][j] = tstage[j * 32 * U + u * 32 + lane];
      else xr[u][j] = tstage[j * 32 * U + u * 32 + lane];
    }
    old[u] = has[u] ? lt[u * 32 + lane] : 0;
  }
  __syncwarp();  // every lane's reads done before the buffer serves as the stage (racecheck)
}
}  // namespace km::kernels
