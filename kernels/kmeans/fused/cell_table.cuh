// CELLS (d = 2, K <= 64, by default from K = 8 in float, 16 in double: cells.hpp): a cell table
// first. Each iteration delta_cells labels each cell of a grid over the data's range with the
// centroid seq provably gives every point of it (or kCellMixed); an object in a labelled cell
// takes that label from one shared-memory byte instead of K scores. The objects of mixed cells and
// beyond the grid, and the movers, wait in a per-warp ring and are scored (summed) 32 at a time,
// one a lane. Measured (H100, 256 MB, d = 2): 0.73x the time without it at K = 16 in float, 0.89x
// in double, 0.56-0.60x at K = 64; slower below K = 8 (float) / 16 (double), so off there. Where
// x and the labels are 16-byte aligned the whole passes are lean (the kernel). SORTED: from 1024
// objects a cell, in the cells' sorted order (DeltaPass::work, cell_order.cuh), only the chunks of
// cells whose label changed or that are mixed are read (H200, 2^24 x 2, K = 16: 0.54x the time in
// double, 0.62x in float).
#pragma once

#include <cstdint>
#include <type_traits>
#include "kernels/kmeans/cell_order.cuh"
#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/fused/delta_pass.cuh"
#include "kernels/kmeans/fused/protocol.cuh"
#include "kernels/kmeans/nearest.cuh"
#include "kernels/kmeans/update.cuh"

namespace km::kernels {

// CELLS: the cell table for the centroids [2][k] (k <= 64), a warp per cell (cells.hpp:
// cell_label_warp, cell_label's byte). (Launched as a dependent of the last delta kernel, it
// waits for it; it does not trigger its own dependent early: where all its blocks triggered at
// their start, the delta kernel behind it took 1.21-1.25x the time in double (H100, 2^24 x 2,
// K = 16; level in float), where triggering as its blocks exit took 0.98x.)
template <class T>
__global__ void delta_cells(const T* __restrict__ centroids, int k, CellGrid g, unsigned char* __restrict__ out,
                            unsigned long long* __restrict__ candidates, unsigned short* __restrict__ masks,
                            const unsigned* release, unsigned acquire_value, CellSkip skip) {
  __shared__ T cs[2 * 64];
  if (acquire_value) block_acquire(release, acquire_value);
  else dependent_wait();
  for (int t = threadIdx.x; t < 2 * k; t += blockDim.x) cs[t] = centroids[t];
  __syncthreads();
  const int cell = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32), lane = threadIdx.x & 31;
  if (cell >= g.side * g.side) return;  // (the whole warp)
  unsigned long long mask = 0;
  const unsigned char label = cell_label_warp(cs, k, cell % g.side, cell / g.side, g, lane, &mask);
  unsigned char before = kCellMixed;
  if (lane == 0) {
    before = out[cell];  // (the last table's byte: no kernel reads the table now)
    out[cell] = label;
    if (candidates) candidates[cell] = mask;
    if (masks) masks[cell] = static_cast<unsigned short>(mask);  // (K <= 16)
  }
  // SORTED (cell_order.cuh): the cell's chunks for the delta kernel to read.
  if (skip.work)
    list_cell_chunks<T>(skip, g, cell, lane, static_cast<unsigned char>(__shfl_sync(0xffffffffu, label, 0)),
                        static_cast<unsigned char>(__shfl_sync(0xffffffffu, before, 0)), cs, k);
}


// The warp's ring (64 U entries, at the start of the queue's room): the objects of mixed cells
// (and beyond the grid) and the movers of labelled cells wait there until 32 are there, then a
// round scores (or sums) one a lane, every lane busy: at ~5% of the objects (128 x 128 cells,
// K = 16) a pass of 128 had a round with ~6 lanes busy before (ncu: 17% of the kernel's
// instructions), and at ~3% movers a movers' round with ~4 (9%). Fewer than 32 wait between
// passes and a pass adds at most 32 U (an object is one or the other), so the ring's 64 U entries
// never overflow. An entry: (index, kind << 30 | (old label + 1) << 16 | new label or cell): kind
// 0, an object to score (the general loop); kind 2, a mover of a labelled cell, summed in the
// round without a score, its move counted there; kind 1 (the lean passes, which count an object's
// lookup once a pass, not once an object), the low 16 bits its cell (side <= 256): a mover where
// the cell's byte is a label, else an object of a mixed cell, its lookup taken back. Where the
// plan made room (p.ring_xy), each entry's coordinates beside it, after the ring.
template <class C>
struct CellRing {
  using XY = std::conditional_t<sizeof(typename C::T) == 8, double2, float2>;
  static constexpr int kHardRing = 64 * C::U;
  static constexpr unsigned kMoverEntry = 0x80000000u, kLeanHardEntry = 0x40000000u;
};


// One round of the warp's ring: up to 32 entries, one a lane (an object to score against every
// centroid or its cell's candidates, or a mover to sum).
template <class C, class Centre, class ScoreOne, class ScoreSome, class AddMoves>
__device__ __forceinline__ void cell_ring_round(
    int& hard_pending, int& hard_head, const int& lane, uint2* const& hard_ring, unsigned char* const& cells_s,
    const bool& ring_xy, typename CellRing<C>::XY* const& hard_xy, const typename C::T* __restrict__ const& x,
    const std::int64_t& n, const int& d, Centre& centre, ScoreOne& score_one, ScoreSome& score_some,
    const DeltaPass& p, unsigned short* const& masks_s, const int& mask, unsigned& lookups, unsigned& moves,
    unsigned& rechecks, const float& r2, typename C::T* const& s, const int& k, const bool& count_inertia,
    unsigned long long& my_inertia, std::int32_t* __restrict__ const& labels, AddMoves& add_moves) {
  using T = typename C::T;
  using XY = typename CellRing<C>::XY;
  constexpr int MAXD = C::MAXD, kHardRing = CellRing<C>::kHardRing;
  constexpr bool CELLS = C::CELLS;
  constexpr unsigned kMoverEntry = CellRing<C>::kMoverEntry, kLeanHardEntry = CellRing<C>::kLeanHardEntry;
  const int taken = min(hard_pending, 32);
  const bool mine = lane < taken;
  const uint2 e = mine ? hard_ring[(hard_head + lane) & (kHardRing - 1)] : make_uint2(0u, 0u);
  const std::int64_t i = e.x;
  const int was = static_cast<int>((e.y >> 16) & 0x3fffu) - 1;
  // A lean pass's entry (kLeanHardEntry) names the cell: a mover where its byte is a label.
  const bool lean = CELLS && (e.y & kLeanHardEntry) != 0;
  int moved_to = static_cast<int>(e.y & 0xffffu);
  if constexpr (CELLS)
    if (mine && lean) moved_to = cells_s[e.y & 0xffffu];
  const bool mixed = lean && moved_to == kCellMixed;
  const bool mover = (e.y & kMoverEntry) != 0 || (lean && !mixed);
  T v[MAXD];
  float vf[MAXD], nv = 0;
  if (ring_xy) {
    const XY c = mine ? hard_xy[(hard_head + lane) & (kHardRing - 1)] : XY{0, 0};
    v[0] = c.x;
    v[MAXD - 1] = c.y;
  }
#pragma unroll
  for (int j = 0; j < MAXD; ++j) {
    if (!ring_xy) v[j] = mine && j < d ? x[j * n + i] : T(0);
    vf[j] = static_cast<float>(v[j] - centre(j));
    nv = fmaf(vf[j], vf[j], nv);
  }
  float b = INFINITY, sc = INFINITY;
  // A lean pass's object of a mixed cell: its cell's candidates alone (cells.hpp:
  // cell_label_warp; at K = 16 and 64 x 64 cells mostly 2 or 3 of the 16); others every centroid.
  // (Up to K = 16 the masks from shared memory, p.cell_masks: from L2 each round's load cost
  // what the scores saved.)
  const bool some = CELLS && (p.candidates || p.cell_masks) && mixed;
  if (__any_sync(0xffffffffu, mine && !mover && !some)) score_one(vf[0], vf[MAXD - 1], b, sc);
  if (mine && some) {
    if (p.cell_masks) score_some(vf[0], vf[MAXD - 1], static_cast<unsigned>(masks_s[e.y & 0xffffu]), b, sc);
    else score_some(vf[0], vf[MAXD - 1], p.candidates[e.y & 0xffffu], b, sc);
  }
  int label = __float_as_int(b) & mask;
  T dist = 0;
  if (mine && mixed) --lookups;
  int to = -1;  // the lane's move (add_moves): to `to` from `was`
  if (mine && mover) {
    ++moves;
    to = moved_to;
  } else if (mine) {
    if (!(sc - b > p.factor * (nv + r2) + p.tiny)) {
      ++rechecks;  // too close to call in float: seq's arithmetic over every centroid
      label = nearest_in_registers<T, MAXD>(v, s, d, k, dist);
    } else {
#pragma unroll
      for (int j = 0; j < MAXD; ++j)
        if (j < d) dist = fused_square_add(v[j] - s[j * k + label], dist);
    }
    if (count_inertia) my_inertia += to_fixed(static_cast<double>(dist), p.inertia_scale);
    if (was != label) {
      labels[i] = label;
      ++moves;
      to = label;
    }
  }
  add_moves(v, to, was);
  __syncwarp();  // the ring's slots are read before they are written again
  hard_head = (hard_head + taken) & (kHardRing - 1);
  hard_pending -= taken;
}

}  // namespace km::kernels
