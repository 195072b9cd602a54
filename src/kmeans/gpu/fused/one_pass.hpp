// fused's one-pass path (docs/fused.md): the engine around the delta kernel
// (kernels/kmeans/6_fused_delta.cuh). Its set-up (the plan's kernels, launch shapes, the cell
// table, the float copy) is one_pass_setup.cu; its iterations (the launch-ahead
// protocol with kernels/kmeans/fused/protocol.cuh, each launch's arguments, the final E-step)
// one_pass_iterate.cu.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kmeans/6_fused_delta.cuh"
#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/gpu/device_update.hpp"
#include "kmeans/gpu/fused/delta_kernels.hpp"
#include "kmeans/gpu/fused_plan.hpp"

namespace km::gpu {

template <class T>
class FusedOnePass final : public DeviceUpdateEngine<T> {
 public:
  explicit FusedOnePass(const Params& p) : DeviceUpdateEngine<T>(p, "fused", Layout::coord_major) {}

  // The row-major upload kept for the float copy's kernel (double, d = 16: SHADOW), whose movers
  // and close calls read their rows of x there, one 128-byte line an object, not a 32-byte
  // sector in each of d rows of x [d][n]; after_setup frees it where the copy is not made.
  // Kept only where the device has room for as much again beside it (the copy, the bounds, the
  // initialisation's buffers, which the upload's check counted on its going) and no cap was
  // given (FusedConfig::copy_rows off: from x [d][n]).
  bool keep_rows(std::size_t d) const override;

  // The whole problem here and in device memory: one launch per iteration, the update in its
  // last block (6_fused_delta.cuh); otherwise the shared steps (partials for NCCL/MPI, chunks).
  //
  // Launched ahead: before this iteration's counters are read, the next iteration's kernel is
  // queued behind it, gated by the stop rule, which this iteration's last block evaluates as the
  // driver will (driver.cpp: should_stop) and leaves in gate_: where it says stop, the next kernel
  // returns at once, touching nothing. So the device never waits for the host between iterations
  // (the host's wake-up, its launch and the launch's latency: 4-8 us an iteration on an H100,
  // where the lab's iterations take 90-180 us). Not where the counters are not mapped
  // (FusedConfig::launch_ahead off: never).
  //
  // The launched-ahead kernel (and at d = 2 the cell table's before it) goes as a programmatic
  // dependent launch: its blocks start as the last kernel's leave, ask their first pass of x into
  // L2 and wait, so the launch and the blocks' start overlap the last block's update. They wait
  // not for that kernel's end (griddepcontrol.wait, 1.9-2.6 us after its last block's counters)
  // but for a flag its last block sets once the centroids, the gate, the tallies and the done
  // count are written, before its counters go to the host (release/acquire at GPU scope, as
  // cooperative groups' grid barrier: 0.98-0.99x the time at d = 16 and 32, level at d = 2,
  // where the delta kernel still waits for the cell table's kernel to end). No event goes between
  // the kernels (one would serialise them again): the host
  // spins on the counters' sequence number and times the kernel phase from the kernels'
  // %globaltimer stamps, from the last kernel's end to this one's (its start where it was not
  // launched ahead). H100, 10 iterations, wall per iteration against events and no PDL:
  // 0.93-0.98x on the lab's rows (FusedConfig::dependent_launch off: plain launches;
  // iteration_events: events around each kernel, and with them no overlap).
  void iterate(IterationStats& stats) override;

  // An iteration's inertia summed from the objects, about the centroids its last block left in
  // previous_ where its algebraic inertia's bound failed (the labels are that iteration's: no
  // kernel has run since, or the one launched ahead returned at its gate).
  void inertia_from_objects(IterationStats& stats);

  // Whether iteration `it` + 1 can be queued before iteration `it`'s counters are read.
  bool ahead_allowed(int it) const {
    return ahead_wanted_ && mapped_ && it < this->params_.loops;
  }


  // Queues iteration `it`'s kernel (gated: it returns at once where the last one said stop) and
  // the events around it, its counters going to slot it % 2.
  void launch_iteration(int it, bool gated);

  // Waits for an iteration's counters where no event marks its kernel: spins on the sequence
  // number its last block writes last, asking the stream now and then (every 2^14 reads, some
  // tens of microseconds) whether a kernel failed or all ended without it.
  void wait_counters(const typename GpuEngine<T>::Counters* host, unsigned long long want);


  // The float copy is written by the kernel of the iteration before the first that could read it
  // (FILL: the staged kernel reading x stores the x'' it forms anyway, its centre the copy's z,
  // and sums Q): the third, or the second where shadow_after_ >= 1 (shadow_on: the copy cannot
  // run at the third otherwise, the first iteration moving every object). By default only with
  // at least 3 iterations left after it. The writer costs ~the copy's write, 0.016-0.018 ms at
  // 2^21 x 16, K = 16 (H200), about what one iteration with the copy saves; a copy made between two
  // iterations (reading x again) cost ~0.17 ms and needed 14 iterations left.
  bool fill_start(int it) const {
    if (!shadow_ || shadow_made_ || shadow_over_) return false;
    if (it != (shadow_after_ >= 1 ? 2 : 3)) return false;
    return shadow_forced_ || this->params_.loops - it >= 3;
  }

  // The copy's kernel runs from iteration `it` on once the copy is written (by an earlier
  // iteration) and few objects moved (shadow_after_ of them, 25% by default) in the iteration
  // before last (known when `it` is launched ahead): where many move, each mover reads its row of
  // x as well. Once stopped (the bounds took over, or an algebraic inertia's bound failed) it
  // stays off.
  bool shadow_on(int it) const {
    if (!shadow_made_ || shadow_live_ || shadow_over_ || it < 3) return false;
    const std::size_t before_last = changed_log_[static_cast<std::size_t>(it - 2)];
    return static_cast<double>(before_last) <= shadow_after_ * static_cast<double>(this->n_);
  }

  // The report's path after "one-pass": the delta kernel's variant where it is not the plain one
  // ("d fixed", "mma", "cells", "lean", "sorted"), after "streamed" where the data are.
  std::string path() const override;
  std::vector<std::pair<std::string, std::string>> plan() const override { return plan_.fields(); }

  // the one-pass kernel's threads per block (the staged kernel's where it ran)
  int block() const override { return delta_ && tile_used_ ? tile_block_ : block_; }

  void finish_update(IterationStats& stats) override;

 private:
  std::size_t prepare(const Dataset<T>& data) override;

  void after_setup() override;

  // The cell grid over the data's range, when the whole problem is on this device; where its
  // proofs do not hold (cells.hpp: cell_grid), the kernel without the table.
  void start_cells();

  // The cell table's sorted order (cell_order.cuh, cells.hpp: owned_chunks): once per fit, the
  // objects sorted by their cell (CUB's stable radix sort of the lean passes' own lookup), x and
  // the labels copied in that order, each cell's first object and its single chunks' sums. Each
  // iteration the table's kernel then lists the chunks to read: a cell whose label held from one
  // table to the next keeps its objects' labels (none of them can move), and its single chunks'
  // inertia follows from those sums, so its objects are not read. The labels go back to the
  // objects' order after the final E-step (assign). Where the copies fit beside the rest (no
  // --device-memory cap: the cap stays the cap) and the lean dynamic passes run (launch_delta);
  // By default where the cells hold 1024 objects each on average
  // (8 chunks): H200, 10 iterations, at 1024 a cell 0.83x the time in double, 0.93x in float
  // (2^22 x 2, K = 16), 0.79x / 0.87x (2^24 x 2, K = 64); at 256 a cell, where about half a cell's
  // objects lie in its shared chunks, 1.15x / 1.15x (2^20 x 2, K = 16) and 1.11x / 1.04x (2^22 x 2,
  // K = 64) slower. FusedConfig::sorted: off, or on wherever it can.
  void start_sorted();

  kernels::DeltaPass delta_pass() const;

  void launch_delta(const kernels::DeltaPass& p);

  // A launch on the engine's stream; for a launched-ahead iteration (launch_iteration), as a
  // programmatic dependent launch (6_fused_delta.cuh: dependent_wait): its blocks start as the
  // kernel before's leave, and wait for its end after what needs nothing from it.
  template <class... Params, class... Args>
  void launch_dependent(void (*kernel)(Params...), int grid, int block, std::size_t bytes, Args... args) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(grid));
    config.blockDim = dim3(static_cast<unsigned>(block));
    config.dynamicSmemBytes = bytes;
    config.stream = this->stream_;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = dependent_now_ ? 1 : 0;
    CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
    CUDA_CHECK_LAUNCH();
  }

  void assign(bool accumulate) override;

  OnePassKernel<T> kernel_ = nullptr;
  DeltaKernel<T> delta_kernel_ = nullptr, sorted_kernel_ = nullptr;
  DeltaKernel<T> tile_kernel_ = nullptr;  // the staged loads' kernel, where they apply (prepare)
  std::size_t tile_bytes_ = 0;
  unsigned tile_offset_ = 0;  // (with the cell table: the buffers' start)
  int tile_grid_ = 1, tile_block_ = 128;
  bool tile_used_ = false;  // the last launch took it (the report's path: "staged")
  bool delta_ = false;
  std::vector<std::size_t> changed_log_;  // objects moved in iteration i (0: n)
  // Launching ahead (iterate): each iteration's events and counters in slot it % 2 (the second's
  // pinned copy is ahead_counters_), the stop rule's verdict for the next kernel in gate_.
  struct IterationSlot {
    cuda::EventPair kernel;
    typename GpuEngine<T>::Counters* host = nullptr;    // where the host reads them
    typename GpuEngine<T>::Counters* mapped = nullptr;  // the device's view (null: not mapped)
    bool ahead = false;   // queued behind the last iteration's kernel
    bool sorted = false;  // in the cells' sorted order (its skipped objects counted)
    bool shadow = false;  // the staged kernel from the float copy (its inertia by algebra)
    unsigned long long seq = 0;  // the sequence number its last block writes
  };
  IterationSlot slots_[2];
  unsigned long long seq_ = 0, last_end_ns_ = 0;
  bool events_ = false;  // events around each iteration's kernel (else the device's stamps)
  bool dependent_wanted_ = true, dependent_now_ = false;
  // The launched-ahead kernel prefetches its first pass into L2 while it waits (without: 1.02-1.03x
  // the time on the lab rows, H100).
  static constexpr int kPrefetchFirst = 1;
  cuda::PinnedSlot<typename GpuEngine<T>::Counters> ahead_counters_;
  DeviceBuffer<unsigned> gate_;
  // Released early (6_fused_delta.cuh: DeltaPass::release): the flag, the value the last kernel
  // launched releases it with.
  DeviceBuffer<unsigned> release_;
  unsigned release_seq_ = 0, last_release_ = 0;
  bool dynamic_chunks_ = true;           // the staged kernel's passes taken as the warps come to them
  FusedPlan plan_;                       // this shape's plan (prepare)
  DeviceBuffer<unsigned> chunks_;        // their counters (kernels::kDeltaChunkCounters)
  // SORTED (start_sorted): x and the labels in the cells' order, each cell's first object in it,
  // its single chunks' sums, the table kernel's list of chunks to read and its length.
  bool sorted_live_ = false;
  bool table_held_ = false;  // every label follows the table in cells_ (a delta kernel read it)
  DeviceBuffer<T> xs_;
  DeviceBuffer<std::int32_t> ls_;
  DeviceBuffer<unsigned> order_, starts_, work_, work_count_;
  DeviceBuffer<kernels::CellSums> cell_stats_;
  unsigned whole_chunks_ = 0;
  bool lean_cells_ = true;  // the cell table's lean passes (launch_delta)
  bool lean_used_ = false;  // the last launch took them (the report's path: "lean")
  int iteration_ = 0;
  bool ahead_ = false;  // the next iteration's kernel is queued
  bool ahead_wanted_ = true;
  double stop_changed_ = 0, stop_shift_ = -1;  // the driver's stop rule's limits (stop_limits)
  double q_guard_ = 1e-11;
  DeviceBuffer<double> inertia_parts_, previous_;  // the float copy's algebraic inertia
  // SHADOW (6_fused_delta.cuh): the staged kernel in double from a float copy of x - z. shadow_:
  // the copy's room is there; shadow_made_: its writer (FILL) is queued; shadow_live_: the
  // copy's kernel runs (from the iteration after the writer until the bounds start or an
  // algebraic inertia's bound fails: shadow_over_); shadow_ran_: it ran in this fit (the report's
  // path: "float copy").
  DeltaKernel<T> shadow_kernel_ = nullptr, fill_kernel_ = nullptr;
  int shadow_grid_ = 1, shadow_block_ = 128, fill_grid_ = 1, fill_block_ = 128;
  std::size_t shadow_bytes_ = 0;
  bool shadow_ = false, shadow_live_ = false, shadow_ran_ = false, shadow_over_ = false, shadow_made_ = false;
  double shadow_after_ = 0.25;
  bool shadow_forced_ = false;  // FusedConfig::float_copy_after given: no rule on the iterations left
  DeviceBuffer<float> shadow_x_;
  DeviceBuffer<unsigned long long> shadow_q_;  // the copy's Q (fill_q, then held_q[0])
  DeviceBuffer<double> shadow_z_;              // the copy's z (fill_z, then z)
  int bits_ = 0;
  float factor_ = 0, tiny_ = 0, mma_factor_ = 0;
  float dist_factor_ = 0, dist_tiny_ = INFINITY, dist_eta_ = 0;  // (DeltaPass: the scores' inertia addends; off)
  bool mma_ = false;  // the delta kernel's scores on the tensor cores
  bool exact_ = false;  // the delta kernel with d a constant (d fills its register width)
  // The cell table (d = 2): its side (0: none), grid and buffer; live once the grid holds.
  int cells_side_ = 0;
  bool cells_live_ = false;
  kernels::CellGrid cell_grid_;
  DeviceBuffer<unsigned char> cells_;
  DeviceBuffer<unsigned long long> candidates_;  // each cell's candidates (start_cells; may be empty)
  DeviceBuffer<unsigned short> cell_masks_;      // ... as 16 bits, up to K = 16 (may be empty)
  bool cell_masks_planned_ = false;              // the plan left room for them in shared memory
  DeltaKernel<T> cells_fallback_ = nullptr;
  DeviceBuffer<unsigned long long> held_sums_, held_counts_, tallies_;
  DeviceBuffer<unsigned> done_;
  typename GpuEngine<T>::Counters* mapped_ = nullptr;  // the device's view of the pinned counters
  int grid_ = 1, block_ = 128;
  std::size_t bytes_ = 0;
};

}  // namespace km::gpu
