// The delta kernel's arguments beyond the ladder's (6_fused_delta.cuh): what the host
// (src/kmeans/gpu/fused/one_pass_iterate.cu) fills in for each launch; the device side of the protocol
// (gate, release flag, sequence number) is fused/protocol.cuh.
#pragma once

#include <cmath>

#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/layouts.hpp"

namespace km::kernels {

constexpr int kDeltaThreads = kDeltaMaxThreads;  // the most threads per block (launch bounds)

struct DeltaPass {
  float factor = 0, tiny = 0;  // the filter's test (margin.hpp: filter_bound)
  int index_bits = 0;          // > 0: the index rides in the score's low bits
  double scale = 1;            // 2^E of the fixed-point sums
  // This rank's sums [k][d] and counts [k], kept across iterations (two's complement).
  unsigned long long* held_sums = nullptr;
  unsigned long long* held_counts = nullptr;
  // The iteration's tallies the blocks add to (null: not counted, the final E-step).
  unsigned long long* changed = nullptr;
  unsigned long long* inertia = nullptr;
  unsigned long long* rechecked = nullptr;  // objects redone in seq's arithmetic
  double inertia_scale = 0;
  // The last block (counted in *done, which it resets) copies the held sums to sums_out /
  // counts_out when they are given (the engine's partials, all-reduced or updated by others),
  // and with `update` applies the update itself: centroid = sum / count (unchanged when the
  // cluster is empty, as update_centroids), writes the shift and moves the tallies to the
  // *_out counters, clearing them for the next iteration.
  unsigned* done = nullptr;
  unsigned long long* sums_out = nullptr;
  unsigned long long* counts_out = nullptr;
  bool update = false;
  bool unit = false;  // ... re-normalising each centroid (the cosine and dot metrics: update_centroids)
  double inv_scale = 1;
  double* shift_parts = nullptr;  // [k]: each cluster's squared shift, as update_centroids'
  double* shift_out = nullptr;
  unsigned long long* changed_out = nullptr;
  unsigned long long* inertia_out = nullptr;
  unsigned long long* rechecked_out = nullptr;
  // Each cluster's sum of q = |x - z|^2 (64-bit fixed point at inertia_scale, z fixed for the
  // fit), kept like the held sums: the iteration's inertia follows from them, Q, S and n.
  // (SHADOW: held_q[0] is the copy's Q, the sum over every object, and z the copy's.)
  unsigned long long* held_q = nullptr;
  const double* z = nullptr;
  double q_guard = 1e-11;               // the largest error bound / inertia accepted
  double* inertia_parts = nullptr;      // [2k] scratch: each cluster's inertia, its error bound
  double* previous = nullptr;           // [k][d]: the centroids of an iteration whose bound failed
  unsigned long long* skipped = nullptr;      // objects the sorted cells kept without reading them
  unsigned long long* skipped_out = nullptr;
  // CELLS: this iteration's cell table (side^2 labels, delta_cells) and its grid; null: none
  // (every object scored).
  const unsigned char* cells = nullptr;
  CellGrid grid;
  // Per cell its candidates (delta_cells: cell_label_warp's mask), for the lean passes' objects
  // of mixed cells; null: every centroid scored.
  const unsigned long long* candidates = nullptr;
  // The same up to K = 16 as 16 bits a cell, which the kernel copies after its table into shared
  // memory (the plan's cell_masks); null: none (the rounds then read `candidates`, if given).
  const unsigned short* cell_masks = nullptr;
  // CELLS: the ring's entries have their coordinates beside them (the plan's ring_xy).
  bool ring_xy = false;
  unsigned long long* looked_up = nullptr;      // objects labelled from the table
  unsigned long long* looked_up_out = nullptr;
  // MMA: `factor` is the tensor-core scores' (wider); an object they cannot call is scored again
  // with FMAs and this factor (filter_bound without mma) before seq's arithmetic decides.
  float fma_factor = 0;
  int prefetch = 0;  // the warp's next pass prefetched into L1 before its scores (not TILE)
  unsigned long long* rescored = nullptr;  // objects scored again with FMAs
  unsigned long long* rescored_out = nullptr;
  unsigned tile_offset = 0;  // TILE with CELLS: where the warps' buffers start in shared memory
  // Launched ahead (one_pass_iterate.cu: iterate): where *gate is nonzero the kernel returns after its
  // prologue, having written nothing. The last block leaves its verdict on the driver's stop rule
  // (changed <= stop_changed, or shift <= stop_shift where that is >= 0) in *gate_out, for the
  // kernel queued behind it, and in *stopped_out.
  const unsigned* gate = nullptr;
  unsigned* gate_out = nullptr;
  double stop_changed = -1, stop_shift = -1;
  unsigned long long* stopped_out = nullptr;
  // Without events around the kernel (one_pass_iterate.cu: launch_iteration), device stamps of
  // %globaltimer (ns): block 0 writes its start to *start_ns_out once the kernel before has
  // ended, the last block its end to *end_ns_out and, after the counters and a system fence,
  // `seq` to *seq_out, which the host spins on before reading the rest.
  unsigned long long* start_ns_out = nullptr;
  unsigned long long* end_ns_out = nullptr;
  unsigned long long* seq_out = nullptr;
  unsigned long long seq = 0;
  // Launched as a programmatic dependent: the block's first pass of x (which no kernel writes)
  // asked into L2 before the wait for the kernel before.
  int prefetch_first = 0;  // (passes)
  // Released early (one_pass_iterate.cu: launch_iteration): the last block, once the centroids, the gate,
  // the tallies and *done are ready for the next kernel, writes `release_value` to *release
  // (fenced: cooperative groups' grid barrier's pattern); a kernel given `acquire_value` waits
  // for that value there (one thread a block, an acquire load, then the block's barrier)
  // instead of for the kernel before to end (griddepcontrol.wait), or after it where
  // `wait_grid` (the cell table's kernel between the two).
  unsigned* release = nullptr;
  unsigned release_value = 0, acquire_value = 0;
  bool wait_grid = false;
  // CELLS: the lean passes may run: x and labels 16-byte aligned, so a lane's U objects' values
  // are whole 16-byte loads (the second coordinate's too where n sizeof(T) % 16 == 0, else one
  // load a value).
  bool vector_cells = false;
  // TILE in double, with `done`: kDeltaChunkCounters counts (kDeltaChunkStride apart, each on its
  // own L2 line) of the passes the warps took beyond their first two, zero at the kernel's start,
  // reset by the last block; null: a fixed share of passes a warp. (Last of the original fields,
  // so that the fields before it keep their offsets.)
  unsigned* chunks = nullptr;
  // In float with the FMA scores (kApproxDist): the inertia's addend of an object the filter
  // called is nx + its winner's score where fl(dist_factor (nx + r2) + dist_tiny) <= fl(dist_eta a)
  // (margin.hpp: approx_dist_bound, dist_eta its eta_test); dist_tiny = inf (the default): the
  // distance in T always (0 <= 0 would take every addend unproved).
  float dist_factor = 0, dist_tiny = INFINITY, dist_eta = 0;
  // SORTED (CELLS, the lean dynamic passes; one_pass_setup.cu: start_sorted, cell_order.cuh): x and labels
  // in the order of the objects' cells, and the whole chunks to read this iteration listed by the
  // cell table's kernel in work[0 ... *work_count); the rest lie in cells whose label held (their
  // objects keep their labels; their inertia and count went to the tallies there). The last block
  // resets *work_count for the next table. Null: every chunk.
  const unsigned* work = nullptr;
  unsigned* work_count = nullptr;
  // SHADOW (double, the staged kernel; one_pass.hpp: fill_start): x - z rounded to float, [d][n] as
  // x, z = p.z fixed for the fit: the passes stage these instead of x, whose rows only the close
  // calls and the movers read.
  const float* shadow = nullptr;
  // SHADOW: x row-major, [n][d] (d = MAXD here), where the movers and the close calls read their
  // rows: one 128-byte line an object at d = 16, where x [d][n] costs a 32-byte sector in each
  // of d rows (ncu: ~0.7 KB of DRAM reads a mover). Null: from x.
  const double* rows = nullptr;
  // FILL (the staged kernel in double reading x, one iteration before SHADOW's first; one_pass.hpp:
  // fill_start): each object's x - centre rounded to float into fill_out ([d][n], the copy), the
  // centre (the centroids' mean) into fill_z by block 0, and the objects' q = |x - centre|^2 in
  // fixed point at inertia_scale added to *fill_q (zero before): Q, the copy's total.
  float* fill_out = nullptr;
  double* fill_z = nullptr;
  unsigned long long* fill_q = nullptr;
};

}  // namespace km::kernels
