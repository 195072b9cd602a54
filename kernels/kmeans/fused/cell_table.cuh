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
#include "kernels/kmeans/fused/primitives.cuh"
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


// The lean passes (where the host vouches for 16-byte aligned x and labels: p.vector_cells): one
// whole pass of the warp's 32 U objects, a lane U consecutive ones from pa (coordinate 0), pb
// (coordinate 1) and pl (labels; held, their old values), i0 the first one's index, each
// coordinate's and the labels' U values in one or two 16-byte loads (B_WHOLE: the second
// coordinate's row 16-byte aligned, n sizeof(T) % 16 == 0; else one load a value: level in time,
// H100). Per object the cell (one FMA toward zero a coordinate, no test: cells.hpp,
// cell_in_range), its byte, the distance to that centroid for the inertia; then the objects of
// mixed cells (scored in the ring's round against the cell's candidates) and the movers (summed
// there) go to the warp's ring, the lane's count in three ballots. The same labels, sums and
// inertia, bit for bit, as the general loop, whose per-object flags, lists and 12 loads a pass made
// it ~157 instructions an object in float (ncu; now ~51 M warp instructions an iteration against
// 82 M, H200, 2^24 x 2, K = 16), and the L1 (the shared-memory pipe), not the issue, is the
// kernel's busiest unit (ncu: 69% in float, 88% in double; DRAM 46% / 53%). An inertia by algebra
// in double-double that took every addend away (17% fewer instructions) was no faster.
template <class C, bool B_WHOLE, class CPair, class HardRound>
__device__ __forceinline__ void lean_cell_pass(
    const typename C::T* pa, const typename C::T* pb, std::int32_t* pl, const int4 held, const unsigned i0,
    unsigned& lookups, const typename C::T& lo0, const typename C::T& lo1, const typename C::T& inv0,
    const typename C::T& inv1, const int& side, unsigned char* const& cells_s, CPair& cpair, const DeltaPass& p,
    const float& inertia_scale_f, unsigned long long& my_inertia, const unsigned& below, const int& lane,
    int& hard_head,
    int& hard_pending, uint2* const& hard_ring, const bool& ring_xy, typename CellRing<C>::XY* const& hard_xy,
    HardRound& hard_round) {
  using T = typename C::T;
  using XY = typename CellRing<C>::XY;
  constexpr int U = C::U, kHardRing = CellRing<C>::kHardRing;
  constexpr unsigned kLeanHardEntry = CellRing<C>::kLeanHardEntry;
        T a[U], b[U];
        const int o[U] = {held.x, held.y, held.z, held.w};
        load_run<U>(pa, a);
        if constexpr (B_WHOLE) {
          load_run<U>(pb, b);
        } else {
#pragma unroll
          for (int u = 0; u < U; ++u) b[u] = pb[u];
        }
        lookups += U;  // (less the lean entries of mixed cells, in the rounds)
        unsigned queued = 0, entry[U];  // bit u: object u to the ring, as (i0 + u, entry[u])
#pragma unroll
        for (int u = 0; u < U; ++u) {
          // (cells.hpp: cell_in_range, its constants hoisted)
          const int cell =
              cell_index_in_range<T>(b[u] - lo1, inv1, side) * side + cell_index_in_range<T>(a[u] - lo0, inv0, side);
          const int lab = cells_s[cell];
          const bool settled = lab != kCellMixed;
          // seq's distance to its centroid (the general loop's arithmetic), its fixed-point addend
          // the general loop's bits: in float dist 2^E exactly (a power of two; p.vector_cells
          // asks 2^E < 2^126), rounded to an integer as to_fixed rounds the same value in double.
          using Pair = std::conditional_t<sizeof(T) == 8, double2, float2>;
          const Pair cc = reinterpret_cast<const Pair*>(cpair)[settled ? lab : 0];
          const T dist = fused_square_add(b[u] - cc.y, fused_square_add(a[u] - cc.x, T(0)));
          unsigned long long addend;
          if constexpr (sizeof(T) == 8) addend = to_fixed(dist, p.inertia_scale);
          else addend = static_cast<unsigned long long>(__float2ll_rn(dist * inertia_scale_f));
          // (Masked, not branched on: the addend is formed for every object; H100, 2^24 x 2,
          // K = 16: 0.977x the time in float, level in double.)
          my_inertia += addend & (0ull - static_cast<unsigned long long>(settled));
          // To the ring where the cell's byte is not the old label: a mover of a labelled cell
          // (its label stored here, its move counted in the round that sums it) or an object
          // of a mixed cell (kCellMixed is no label). The entry is the same either way, the
          // cell and the old label (kLeanHardEntry): the round reads the cell's byte again, so
          // that a pass forms one word an object, not a choice of two.
          const bool to_ring = lab != o[u];
          if (to_ring && settled) pl[u] = lab;
          queued |= to_ring ? 1u << u : 0u;
          entry[u] = kLeanHardEntry + (static_cast<unsigned>(o[u] + 1) << 16) + static_cast<unsigned>(cell);
        }
        // The pass's queued objects into the ring, each lane's after those of the lanes below:
        // its count (0 ... U <= 7) in three ballots, not a ballot an object (13 instructions an
        // object where most warps queue one).
        static_assert(U <= 7, "a lane's count in three ballots");
        const int mine = __popc(queued);
        const unsigned c0 = __ballot_sync(0xffffffffu, mine & 1), c1 = __ballot_sync(0xffffffffu, mine & 2),
                       c2 = __ballot_sync(0xffffffffu, mine & 4);
        int at = hard_head + hard_pending + __popc(c0 & below) + 2 * __popc(c1 & below) + 4 * __popc(c2 & below);
        // The queued objects' entries into the ring without a branch: a branch an object ran
        // in nearly every pass (some lane queues most objects' u) with ~3 lanes of 32 and its
        // bookkeeping (~50 instructions a pass). In float by predicated stores (st.shared
        // under a predicate: the lanes not queueing move no bytes); in double every lane
        // stores, those not queueing to a spare slot (free: fewer than 32 entries wait before
        // a pass and it adds at most 32 U, so from head + 32 + 32 U on the slots are free).
        // H200, 2^24 x 2, K = 16-64, against the spare slots: in float 0.976-0.995x the time
        // (ncu: L1/TEX 80% -> 69% busy), in double 1.001-1.017x though L1/TEX went 88% -> 79%.
        static_assert(kHardRing - 32 >= 32 + 32 * U, "a spare ring slot a lane");
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const unsigned q = queued >> u & 1u;
          if constexpr (sizeof(T) == 4) {
            const int slot = at & (kHardRing - 1);
            predicated_shared_store(q, hard_ring + slot, make_uint2(i0 + u, entry[u]));
            if (ring_xy) predicated_shared_store(q, hard_xy + slot, XY{a[u], b[u]});
          } else {
            const int slot = (q ? at : hard_head + kHardRing - 32 + lane) & (kHardRing - 1);
            hard_ring[slot] = make_uint2(i0 + u, entry[u]);
            if (ring_xy) hard_xy[slot] = XY{a[u], b[u]};
          }
          at += static_cast<int>(q);
        }
        hard_pending += __popc(c0) + 2 * __popc(c1) + 4 * __popc(c2);
        __syncwarp();
        while (hard_pending >= 32) hard_round();
}
// CELLS: the lean passes over the whole passes from `start` (the dynamic ones, given p.chunks,
// over the whole chunks: chunk c is objects c 32 U ... + 32 U - 1, a warp's first two chunks g and
// g + G, then 2 G + v C + g % C for the v-th count of counter g % C, taken a pass ahead; SORTED:
// the v-th pass reads chunk work[v] of the listed ones), leaving `start` where the general loop
// takes over. B_WHOLE: the second coordinate's row 16-byte aligned; two copies of the loops, so
// that a pass issues only its own loads (a run-time test issued the other kind's four loads
// predicated off, ~2% of the pass).
template <class C, bool B_WHOLE, class CPair, class HardRound>
__device__ __forceinline__ void lean_cell_passes(
    unsigned& lookups, const typename C::T& lo0, const typename C::T& lo1, const typename C::T& inv0,
    const typename C::T& inv1, const int& side, unsigned char* const& cells_s, CPair& cpair, const DeltaPass& p,
    const float& inertia_scale_f, unsigned long long& my_inertia, const unsigned& below, const int& lane,
    int& hard_head, int& hard_pending, uint2* const& hard_ring, const bool& ring_xy,
    typename CellRing<C>::XY* const& hard_xy, HardRound& hard_round, const typename C::T* __restrict__ const& x,
    const std::int64_t& n, std::int32_t* __restrict__ const& labels, const int& warp, const int& warps_in_block,
    std::int64_t& start, const std::int64_t& step, const int& first, const std::int64_t& whole) {
  using T = typename C::T;
  constexpr int U = C::U;
  constexpr bool kLeanDynamic = C::kLeanDynamic;
          // One whole pass of the warp's 32 U objects: the lane's U from pa (coordinate 0), pb
      // (coordinate 1) and pl (labels; held, their old values), i0 the first one's index.
      auto lean_pass = [&](const T* pa, const T* pb, std::int32_t* pl, const int4 held, const unsigned i0) {
        lean_cell_pass<C, B_WHOLE>(pa, pb, pl, held, i0, lookups, lo0, lo1, inv0, inv1, side, cells_s, cpair, p,
                                           inertia_scale_f, my_inertia, below, lane, hard_head, hard_pending,
                                           hard_ring, ring_xy, hard_xy, hard_round);
      };
      bool taken = false;  // (the dynamic passes ran)
      // (The lane's pointers at chunk c from its pointers at chunk 0, one 32 x 32-bit
      // multiply-add each: the ring's indices are 32-bit, so n < 2^32 and c < 2^32 / (32 U).)
      const std::int32_t lane_first = lane * U;
      const T* const xa0 = x + lane_first;
      const T* const xb0 = xa0 + n;
      std::int32_t* const la0 = labels + lane_first;
      if constexpr (kLeanDynamic) {
        if (p.chunks != nullptr && p.done != nullptr) {
          taken = true;
          // The warps take their passes as they come to them (as the staged kernel in double,
          // below): chunk c is objects c 32 U ... + 32 U - 1, a warp's first two chunks g and g + G
          // (the grid's warp g of G), then 2 G + v C + g % C for the v-th count of counter g % C,
          // taken a pass ahead. The whole chunks here; the rest (under 32 U objects) in the general
          // loop below, by block 0.
          const unsigned whole_chunks = static_cast<unsigned>(n / (32 * U));
          // SORTED (p.work): the v-th pass reads chunk work[v] of the listed ones, not chunk v.
          const unsigned* const work = p.work;
          const unsigned chunks = work ? __ldcg(p.work_count) : whole_chunks;
          const auto chunk_at = [work](unsigned v) { return work ? __ldcg(work + v) : v; };
          const unsigned g = blockIdx.x * warps_in_block + warp, grid_warps = gridDim.x * warps_in_block;
          unsigned* const counter = p.chunks + (g % kDeltaChunkCounters) * kDeltaChunkStride;
          unsigned c = g, following = g + grid_warps;
          unsigned count = 0;
          if (lane == 0 && following < chunks) count = atomicAdd(counter, 1u);
          unsigned at = c < chunks ? chunk_at(c) : 0u, at_following = following < chunks ? chunk_at(following) : 0u;
          int4 ahead = c < chunks ? *reinterpret_cast<const int4*>(la0 + at * std::uint64_t{32 * U}) : make_int4(0, 0, 0, 0);
          while (c < chunks) {
            const std::uint64_t i = at * std::uint64_t{32 * U};
            const int4 now = ahead;
            if (following < chunks) ahead = *reinterpret_cast<const int4*>(la0 + at_following * std::uint64_t{32 * U});
            lean_pass(xa0 + i, xb0 + i, la0 + i, now, static_cast<unsigned>(i) + lane_first);
            c = following;
            at = at_following;
            if (c < chunks) {  // (its count was taken with it: the chunk after it)
              following = 2 * grid_warps + __shfl_sync(0xffffffffu, count, 0) * kDeltaChunkCounters +
                          g % kDeltaChunkCounters;
              if (lane == 0 && following < chunks) count = atomicAdd(counter, 1u);
              if (following < chunks) at_following = chunk_at(following);
            }
          }
          start = blockIdx.x == 0 ? static_cast<std::int64_t>(whole_chunks) * 32 * U : n;
        }
      }
      if (!taken) {
        // (Pointers stepped, not formed from the index each pass: 64-bit products and adds.)
        const T* xa = x + start + first;
        const T* xb = xa + n;
        std::int32_t* la = labels + start + first;
        const std::int64_t lstep = step;
        // The labels one pass ahead (4 registers): their load sits a pass before its use. Issued
        // with the coordinates', nvcc and ptxas placed it after the objects' lookups, just before
        // the first use: a second memory round trip a pass (ncu, float: 15% of the stall samples
        // on that use). (All three one pass ahead: 1.04-1.09x the time, H200, 2^24 x 2.)
        int4 ahead = start <= whole ? *reinterpret_cast<const int4*>(la) : make_int4(0, 0, 0, 0);
        for (; start <= whole; start += step, xa += lstep, xb += lstep, la += lstep) {
          const int4 now = ahead;
          if (start + step <= whole) ahead = *reinterpret_cast<const int4*>(la + lstep);
          lean_pass(xa, xb, la, now, static_cast<unsigned>(start + first));
        }
      }
}

}  // namespace km::kernels
