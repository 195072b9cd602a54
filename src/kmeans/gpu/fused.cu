// fused: the fastest rung. Two paths, chosen per shape by kernels/kmeans/layouts.hpp's
// fused_one_pass() (a measured crossover):
//   one pass  (small K*d) kernels/kmeans/6_fused_delta.cuh: assignment in one read of the
//             data, only the objects that move accumulated, the update in the last block
//             (6_fused_one_pass.cuh, the previous kernel, with KMEANS_ONE_PASS=classic);
//   tensor    (any shape) kernels/kmeans/6_fused_tensor.cuh: distances and arg-min on the
//             tensor cores (FP64 DMMA / TF32), never writing the N×K matrix, seq's labels
//             exactly through a proven margin and a re-check of the close calls; then a
//             radix sort by label and the sums cluster by cluster.
// FusedEngine picks the path at setup and forwards to it.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <cmath>
#include <limits>
#include <optional>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/kmeans/6_fused_tensor.cuh"
#include "kernels/kmeans/6_fused_one_pass.cuh"
#include "kernels/kmeans/6_fused_delta.cuh"
#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/checks.cuh"
#include "kernels/kmeans/margin.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/gpu/fused_plan.hpp"
#include "kmeans/gpu/device_update.hpp"
#include "kmeans/gpu/fused_wgmma.hpp"
#include "kmeans/gpu/tensor_kernels.hpp"

namespace km::gpu {

// This GPU's facts for the plan (without a GPU, an H100's).
DeviceFacts device_facts() {
  const GpuInfo& gpu = gpu_info();
  DeviceFacts f;
  if (gpu.present) {
    f.shared_optin = gpu.shared_optin;
    f.compute_capability = gpu.compute_capability;
  }
  return f;
}

template <class T>
using OnePassKernel = void (*)(const T*, const T*, std::int64_t, int, int, std::int32_t*, unsigned long long*,
                               unsigned long long*, unsigned long long*, double, unsigned long long*, double);

// The instantiation for a register width (the smallest power of two >= d) and the
// accumulation mode (owner lanes or fixed-point shared atomics).
template <class T>
OnePassKernel<T> one_pass_kernel(int maxd, bool owner) {
  if (owner) return maxd == 8 ? kernels::fused_one_pass<T, 8, true> : kernels::fused_one_pass<T, 16, true>;
  switch (maxd) {
    case 1: return kernels::fused_one_pass<T, 1, false>;
    case 2: return kernels::fused_one_pass<T, 2, false>;
    case 4: return kernels::fused_one_pass<T, 4, false>;
    case 8: return kernels::fused_one_pass<T, 8, false>;
    case 16: return kernels::fused_one_pass<T, 16, false>;
    default: return kernels::fused_one_pass<T, 32, false>;
  }
}

template <class T>
using DeltaKernel = void (*)(const T*, T*, std::int64_t, int, int, std::int32_t*, kernels::DeltaPass);

// The instantiation for a register width and index packing; `exact`: d is the width itself
// (4, 8, 16 or 32), whose kernel tests no coordinate against d.
template <class T, bool PACK>
DeltaKernel<T> delta_kernel_for(int maxd, bool exact) {
  using kernels::delta_unroll;
  using kernels::fused_delta;
  constexpr std::size_t E = sizeof(T);
  switch (maxd) {
    case 1: return fused_delta<T, 1, PACK, delta_unroll(1, E)>;
    case 2: return fused_delta<T, 2, PACK, delta_unroll(2, E)>;
    case 4:
      return exact ? fused_delta<T, 4, PACK, delta_unroll(4, E), false, false, false, false, true>
                   : fused_delta<T, 4, PACK, delta_unroll(4, E)>;
    case 8:
      return exact ? fused_delta<T, 8, PACK, delta_unroll(8, E), false, false, false, false, true>
                   : fused_delta<T, 8, PACK, delta_unroll(8, E)>;
    case 16:
      return exact ? fused_delta<T, 16, PACK, delta_unroll(16, E), false, false, false, false, true>
                   : fused_delta<T, 16, PACK, delta_unroll(16, E)>;
    default:
      return exact ? fused_delta<T, 32, PACK, delta_unroll(32, E), false, false, false, false, true>
                   : fused_delta<T, 32, PACK, delta_unroll(32, E)>;
  }
}

// The same with the staged loads (TILE: cp.async, two buffers a warp) at register widths 16 and
// 32 with d filling them (EXACT), the scores with FMAs or (MMA, index packed) on the tensor cores.
template <class T, bool PACK>
DeltaKernel<T> delta_tile_kernel_for(int maxd, bool mma) {
  using kernels::delta_unroll;
  using kernels::fused_delta;
  constexpr std::size_t E = sizeof(T);
  if constexpr (PACK)
    if (mma)
      return maxd == 16 ? fused_delta<T, 16, true, delta_unroll(16, E), false, false, false, true, true, true>
                        : fused_delta<T, 32, true, delta_unroll(32, E), false, false, false, true, true, true>;
  return maxd == 16 ? fused_delta<T, 16, PACK, delta_unroll(16, E), false, false, false, false, true, true>
                    : fused_delta<T, 32, PACK, delta_unroll(32, E), false, false, false, false, true, true>;
}

// The same with the scores on the tensor cores (MMA; register widths 16 and 32, K <= 64).
template <class T>
DeltaKernel<T> delta_mma_kernel_for(int maxd, bool exact) {
  using kernels::delta_unroll;
  using kernels::fused_delta;
  constexpr std::size_t E = sizeof(T);
  if (maxd == 16)
    return exact ? fused_delta<T, 16, true, delta_unroll(16, E), false, false, false, true, true>
                 : fused_delta<T, 16, true, delta_unroll(16, E), false, false, false, true>;
  return exact ? fused_delta<T, 32, true, delta_unroll(32, E), false, false, false, true, true>
               : fused_delta<T, 32, true, delta_unroll(32, E), false, false, false, true>;
}

// The staged kernel in double from the float copy of x - z (SHADOW; the index packed, d = 16,
// the FMA scores), two objects a lane as in float; none in float.
template <class T>
DeltaKernel<T> delta_shadow_kernel_for(int maxd) {
  if constexpr (sizeof(T) == 8) {
    using kernels::delta_unroll;
    using kernels::fused_delta;
    return maxd == 16
               ? fused_delta<T, 16, true, delta_unroll(16, 4), false, false, false, false, true, true, false, true>
               : nullptr;
  } else {
    (void)maxd;
    return nullptr;
  }
}

// The staged kernel in double reading x that also writes the float copy (FILL: the iteration
// before SHADOW's first); none in float.
template <class T>
DeltaKernel<T> delta_fill_kernel_for(int maxd) {
  if constexpr (sizeof(T) == 8) {
    using kernels::delta_unroll;
    using kernels::fused_delta;
    return maxd == 16 ? fused_delta<T, 16, true, delta_unroll(16, 8), false, false, false, false, true, true, false,
                                    false, true>
                      : nullptr;
  } else {
    (void)maxd;
    return nullptr;
  }
}

// The same with Hamerly's bounds (BOUNDS; no Elkan test).
template <class T, bool PACK>
DeltaKernel<T> bounds_kernel_for(int maxd) {
  switch (maxd) {
    case 1: return kernels::fused_delta<T, 1, PACK, kernels::delta_bounds_unroll(1), false, true>;
    case 2: return kernels::fused_delta<T, 2, PACK, kernels::delta_bounds_unroll(2), false, true>;
    case 4: return kernels::fused_delta<T, 4, PACK, kernels::delta_bounds_unroll(4), false, true>;
    case 8: return kernels::fused_delta<T, 8, PACK, kernels::delta_bounds_unroll(8), false, true>;
    case 16: return kernels::fused_delta<T, 16, PACK, kernels::delta_bounds_unroll(16), false, true>;
    default: return kernels::fused_delta<T, 32, PACK, kernels::delta_bounds_unroll(32), false, true>;
  }
}

template <class T>
class FusedOnePass final : public DeviceUpdateEngine<T> {
 public:
  explicit FusedOnePass(const Params& p) : DeviceUpdateEngine<T>(p, "fused", Layout::coord_major) {}

  // The row-major upload kept for the float copy's kernel (double, d = 16: SHADOW), whose movers
  // and close calls read their rows of x there, one 128-byte line an object, not a 32-byte
  // sector in each of d rows of x [d][n]; after_setup frees it where the copy is not made.
  // Kept only where the device has room for as much again beside it (the copy, the bounds, the
  // initialisation's buffers, which the upload's check counted on its going) and no cap was
  // given. KMEANS_DELTA_ROWS=0: from x [d][n] as before.
  bool keep_rows(std::size_t d) const override {
    return sizeof(T) == 8 && d == 16 && this->params_.fused.copy_rows && this->params_.device_memory == 0 &&
           device_budget(0) >= this->n_ * d * sizeof(T) + (256ull << 20);
  }

  // The whole problem here and in device memory: one launch per iteration, the update in its
  // last block (6_fused_delta.cuh); otherwise the shared steps (partials for NCCL/MPI, chunks).
  //
  // Launched ahead: before this iteration's counters are read, the next iteration's kernel is
  // queued behind it, gated by the stop rule, which this iteration's last block evaluates as the
  // driver will (driver.cpp: should_stop) and leaves in gate_: where it says stop, the next kernel
  // returns at once, touching nothing. So the device never waits for the host between iterations
  // (the host's wake-up, its launch and the launch's latency: 4-8 us an iteration on an H100,
  // where the lab's iterations take 90-180 us). Not while Hamerly's bounds run or would start
  // with the next kernel (their start is decided from the iteration before last, so that the
  // decision is the same either way), nor where the counters are not mapped.
  // KMEANS_LAUNCH_AHEAD=0: never.
  //
  // The launched-ahead kernel (and at d = 2 the cell table's before it) goes as a programmatic
  // dependent launch: its blocks start as the last kernel's leave, ask their first pass of x into
  // L2 and wait, so the launch and the blocks' start overlap the last block's update. They wait
  // not for that kernel's end (griddepcontrol.wait, 1.9-2.6 us after its last block's counters)
  // but for a flag its last block sets once the centroids, the gate, the tallies and the done
  // count are written, before its counters go to the host (release/acquire at GPU scope, as
  // cooperative groups' grid barrier: 0.98-0.99x the time at d = 16 and 32, level at d = 2,
  // where the delta kernel still waits for the cell table's kernel to end;
  // KMEANS_EARLY_RELEASE=0: the kernel's end). No event goes between the kernels (one would serialise them again): the host
  // spins on the counters' sequence number and times the kernel phase from the kernels'
  // %globaltimer stamps, from the last kernel's end to this one's (its start where it was not
  // launched ahead). H100, 10 iterations, wall per iteration against events and no PDL:
  // 0.93-0.98x on the lab's rows (plots/lab_rows_s19_h100.txt, delta_pdl_ab_s19_h100.txt).
  // KMEANS_PDL=0: plain launches; KMEANS_PDL_PREFETCH=N: the first N passes prefetched (1; 0:
  // none); KMEANS_ITERATION_EVENTS=1: events around each kernel (and with them no overlap).
  void iterate(IterationStats& stats) override {
    if (!delta_ || this->streamed() || this->whole_.n != this->n_) {
      DeviceUpdateEngine<T>::iterate(stats);
      return;
    }
    const int it = ++iteration_;
    if (!ahead_) launch_iteration(it, false);
    ahead_ = false;
    if (ahead_allowed(it)) {
      launch_iteration(it + 1, true);
      ahead_ = true;
    }
    IterationSlot& slot = slots_[it & 1];
    if (events_) {
      stats.kernel += slot.kernel.seconds();  // (waits for this iteration's kernel alone)
    } else {
      // From the device's stamps: the kernel phase from the last kernel's end where this one was
      // queued behind it, else from this one's start.
      wait_counters(slot.host, slot.seq);
      const unsigned long long end = slot.host->end_ns;
      const unsigned long long from = slot.ahead ? last_end_ns_ : slot.host->start_ns;
      stats.kernel += end > from ? static_cast<double>(end - from) * 1e-9 : 0.0;  // (0: a test catches it)
      last_end_ns_ = end;
    }
    if (!mapped_) {
      this->queue_read_back(true);
      this->wait_read_back(stats, nullptr);
    }
    const auto& counters = *slot.host;
    stats.changed = static_cast<std::int64_t>(counters.changed);
    stats.shift = counters.shift;
    stats.inertia = static_cast<double>(static_cast<long long>(counters.inertia)) * this->inertia_inv_scale_;
    stats.rechecked = static_cast<std::int64_t>(counters.queued[0]);
    // Counted when the table was built (the bounds' kernel has none).
    if (cells_live_ && !slot.bounds) stats.looked_up = static_cast<std::int64_t>(counters.looked_up);
    if (mma_ && !slot.bounds) stats.rescored = static_cast<std::int64_t>(counters.rescored);
    if (slot.sorted) stats.skipped = static_cast<std::int64_t>(counters.queued[1]);
    changed_log_.push_back(static_cast<std::size_t>(stats.changed));
    if (ahead_) {
      // The device's stop rule against the driver's (they cannot differ: the same arithmetic).
      if (should_stop(stats, this->n_, this->params_) != (counters.stopped != 0))
        throw DeviceError("--impl=fused: the kernel's stop rule disagrees with the driver's");
    }
    if (slot.shadow && counters.inertia == kernels::kInertiaUnsure) {
      // The float copy's algebraic inertia failed its bound (as the bounds' can, below): this
      // iteration's from the objects, and the staged kernel from x from here on. Its last block
      // gated the kernel launched ahead, which returned touching nothing (6_fused_delta.cuh:
      // gate_out), so the labels are this iteration's; the next iteration is launched again.
      inertia_from_objects(stats);
      shadow_live_ = false;
      shadow_over_ = true;
      ahead_ = false;
    }
    if (!slot.bounds) return;
    stats.skipped = static_cast<std::int64_t>(counters.queued[1]);
    if (counters.inertia == kernels::kInertiaUnsure) {
      // The algebraic inertia's bound failed (clusters far tighter than their distance from z):
      // this iteration's from the objects, and no bounds from here on.
      inertia_from_objects(stats);
      bounds_ = bounds_live_ = false;
    }
  }

  // An iteration's inertia summed from the objects, about the centroids its last block left in
  // previous_ where its algebraic inertia's bound failed (the labels are that iteration's: no
  // kernel has run since, or the one launched ahead returned at its gate).
  void inertia_from_objects(IterationStats& stats) {
    std::vector<double> wide(this->k_ * this->d_);
    CUDA_CHECK(cudaMemcpy(wide.data(), previous_.get(), wide.size() * sizeof(double), cudaMemcpyDeviceToHost));
    const std::vector<T> previous(wide.begin(), wide.end());
    if (!this->device_inertia(previous, stats.inertia))
      throw DeviceError("--impl=fused: the device no longer holds the data for the iteration's inertia");
  }

  // Whether iteration `it` + 1 can be queued before iteration `it`'s counters are read.
  bool ahead_allowed(int it) const {
    return ahead_wanted_ && mapped_ && it < this->params_.loops && !bounds_live_ && !bounds_start(it + 1);
  }

  // Hamerly's bounds start with iteration `it` once few objects moved (bounds_after_ of them) in
  // the iteration before last (so that the decision is known when `it` is launched ahead); that
  // iteration scores every object and rebuilds the q sums from them.
  bool bounds_start(int it) const {
    const std::size_t before_last = it >= 3 ? changed_log_[static_cast<std::size_t>(it - 2)] : this->n_;
    return bounds_ && !bounds_live_ && static_cast<double>(before_last) <= bounds_after_ * static_cast<double>(this->n_);
  }

  // Queues iteration `it`'s kernel (gated: it returns at once where the last one said stop) and
  // the events around it, its counters going to slot it % 2.
  void launch_iteration(int it, bool gated) {
    IterationSlot& slot = slots_[it & 1];
    if (events_) slot.kernel.start(this->stream_);
    kernels::DeltaPass p = delta_pass();
    p.changed = tallies_.get();
    p.inertia = tallies_.get() + 1;
    p.rechecked = tallies_.get() + 2;
    p.done = done_.get();
    p.update = true;
    p.inv_scale = this->inv_scale_;
    p.shift_parts = this->shift_parts_.get();
    p.gate = gated ? gate_.get() : nullptr;
    p.gate_out = gate_.get();
    p.stop_changed = stop_changed_;
    p.stop_shift = stop_shift_;
    // The counters go straight to the pinned host copy when the device can write it (mapped,
    // as pinned memory is under unified addressing): no copy to queue and wait for.
    auto* out = mapped_ ? slot.mapped : this->counters_.get();
    p.shift_out = &out->shift;
    p.changed_out = &out->changed;
    p.inertia_out = &out->inertia;
    p.rechecked_out = &out->queued[0];
    p.stopped_out = &out->stopped;
    if (cells_live_) {
      p.looked_up = tallies_.get() + 4;
      p.looked_up_out = &out->looked_up;
    }
    if (mma_) {
      p.rescored = tallies_.get() + 5;
      p.rescored_out = &out->rescored;
    }
    const bool start = bounds_start(it);
    if (start) {
      shadow_over_ = shadow_over_ || shadow_live_;
      shadow_live_ = false;  // (the bounds' kernel reads x, with q sums and z of its own)
      start_bounds();
    }
    // The copy from the iteration after its writer (fill_start, which reads x as before) once few
    // objects move (shadow_on).
    if (shadow_on(it)) shadow_live_ = true;
    if (fill_start(it)) {
      p.fill_out = shadow_x_.get();
      p.fill_z = shadow_z_.get();
      p.fill_q = shadow_q_.get();
      shadow_made_ = true;
    }
    slot.bounds = bounds_live_;
    slot.shadow = shadow_live_ && !bounds_live_;
    if (slot.shadow) {
      p.shadow = shadow_x_.get();
      if constexpr (sizeof(T) == 8) p.rows = this->rows_.get();  // (null: the movers' rows from x)
      p.held_q = shadow_q_.get();
      p.z = shadow_z_.get();
      p.inertia_parts = inertia_parts_.get();
      p.previous = previous_.get();
      p.q_guard = q_guard_;
      shadow_ran_ = true;
    }
    if (bounds_live_) {
      p.rebuild = start;
      p.bounds = bounds_buf_.get();
      p.drift = drift_.get();
      p.kap_up = kap_up_;
      p.kap_dn = kap_dn_;
      p.held_q = held_q_.get();
      p.z = z_.get();
      p.inertia_parts = inertia_parts_.get();
      p.previous = previous_.get();
      p.skipped = tallies_.get() + 3;
      p.skipped_out = &out->queued[1];
      p.q_guard = q_guard_;
    } else if (sorted_live_) {
      // (the objects of the cells whose label held, counted by the table's kernel)
      p.skipped = tallies_.get() + 3;
      p.skipped_out = &out->queued[1];
    }
    slot.sorted = sorted_live_;
    if (mapped_ && !events_) {
      // (a launched-ahead kernel's phase runs from the last one's end: no start stamp)
      p.start_ns_out = gated ? nullptr : &out->start_ns;
      p.end_ns_out = &out->end_ns;
      p.seq_out = &out->seq;
      p.seq = slot.seq = ++seq_;
    }
    slot.ahead = gated;
    dependent_now_ = dependent_wanted_ && gated;
    p.prefetch_first = dependent_now_ ? prefetch_first_ : 0;
    if (early_release_) {
      p.release = release_.get();
      p.release_value = ++release_seq_;
      p.acquire_value = dependent_now_ ? last_release_ : 0u;
      last_release_ = p.release_value;
    }
    launch_delta(p);
    dependent_now_ = false;
    if (events_) slot.kernel.stop(this->stream_);
  }

  // Waits for an iteration's counters where no event marks its kernel: spins on the sequence
  // number its last block writes last, asking the stream now and then (every 2^14 reads, some
  // tens of microseconds) whether a kernel failed or all ended without it.
  void wait_counters(const typename GpuEngine<T>::Counters* host, unsigned long long want) {
    const volatile unsigned long long* seq = &host->seq;
    for (unsigned spin = 1; *seq != want; ++spin) {
      if (spin % (1u << 14) == 0) {
        const cudaError_t e = cudaStreamQuery(this->stream_);
        if (e != cudaErrorNotReady) {
          CUDA_CHECK(e);
          if (*seq != want) throw DeviceError("--impl=fused: the iteration's kernel ended without its counters");
        }
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
  }

  // The q sums and drift tables from zero, z = the current centroids' mean (a point among the
  // data, so that the q sums, and the inertia's cancellation, stay small).
  void start_bounds() {
    const std::size_t k = this->k_, d = this->d_;
    CUDA_CHECK(cudaMemsetAsync(drift_.get(), 0, (k + 1) * sizeof(float), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(held_q_.get(), 0, k * sizeof(unsigned long long), this->stream_));
    std::vector<T> now(k * d);
    CUDA_CHECK(cudaMemcpyAsync(now.data(), this->centroids_.get(), now.size() * sizeof(T), cudaMemcpyDeviceToHost,
                               this->stream_));
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));
    std::vector<double> z(d, 0.0);
    for (std::size_t j = 0; j < d; ++j) {
      for (std::size_t c = 0; c < k; ++c) z[j] += static_cast<double>(now[j * k + c]);
      z[j] /= static_cast<double>(k);
    }
    CUDA_CHECK(cudaMemcpyAsync(z_.get(), z.data(), d * sizeof(double), cudaMemcpyHostToDevice, this->stream_));
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // z's host copy goes out of scope
    bounds_live_ = true;
  }

  // The float copy is written by the kernel of the iteration before the first that could read it
  // (FILL: the staged kernel reading x stores the x'' it forms anyway, its centre the copy's z,
  // and sums Q): the third, or the second where shadow_after_ >= 1 (shadow_on: the copy cannot
  // run at the third otherwise, the first iteration moving every object). By default only with
  // at least 3 iterations left after it. The writer costs ~the copy's write, 0.016-0.018 ms at
  // 2^21 x 16, K = 16 (H200, plots/float_copy_fill_s38_h200.txt), about what one iteration with
  // the copy saves; session 37's copy made between two iterations (reading x again) cost ~0.17
  // ms and needed 14 iterations left.
  bool fill_start(int it) const {
    if (!shadow_ || shadow_made_ || shadow_over_ || bounds_live_) return false;
    if (it != (shadow_after_ >= 1 ? 2 : 3)) return false;
    return shadow_forced_ || this->params_.loops - it >= 3;
  }

  // The copy's kernel runs from iteration `it` on once the copy is written (by an earlier
  // iteration) and few objects moved (shadow_after_ of them, 25% by default) in the iteration
  // before last (known when `it` is launched ahead): where many move, each mover reads its row of
  // x as well. Once stopped (the bounds took over, or an algebraic inertia's bound failed) it
  // stays off.
  bool shadow_on(int it) const {
    if (!shadow_made_ || shadow_live_ || shadow_over_ || bounds_live_ || it < 3) return false;
    const std::size_t before_last = changed_log_[static_cast<std::size_t>(it - 2)];
    return static_cast<double>(before_last) <= shadow_after_ * static_cast<double>(this->n_);
  }

  // The report's path after "one-pass": the delta kernel's variant where it is not the plain one
  // ("d fixed", "mma", "cells", "lean", "sorted"), after "streamed" where the data are.
  std::string path() const override {
    std::string p = DeviceUpdateEngine<T>::path();
    auto add = [&p](const char* part) { p += p.empty() ? std::string(part) : std::string(", ") + part; };
    if (delta_) {
      if (exact_) add("d fixed");
      if (tile_used_) add("staged");
      if (shadow_ran_) add(this->rows_.get() ? "float copy, x rows" : "float copy");
      if (mma_) add("mma");
      if (cells_live_) add("cells");
      if (lean_used_) add("lean");
      if (sorted_live_) add("sorted");
    }
    return p;
  }

  // the one-pass kernel's threads per block (the staged kernel's where it ran)
  int block() const override { return delta_ && tile_used_ ? tile_block_ : block_; }

  void finish_update(IterationStats& stats) override {
    DeviceUpdateEngine<T>::finish_update(stats);
    if (delta_) stats.rechecked = static_cast<std::int64_t>(this->counters_host_.get()->queued[0]);
  }

 private:
  std::size_t prepare(const Dataset<T>& data) override {
    const int maxd = kernels::fused_register_width(this->d_);
    const auto& gpu = gpu_info();
    // The delta kernel's variant and its shared memory (fused_plan.cpp: the measured defaults and
    // the configuration; `--list` answers from the same plan).
    plan_ = plan_fused({data.n, this->d_, this->k_, sizeof(T), this->whole_.max_abs, this->params_.block,
                        this->params_.block_given, gpu.shared_optin},
                       device_facts(), this->params_.fused);
    const DeltaPlan& plan = plan_.delta;
    // (the delta kernel's threads per block: --block where given, else the plan's measured choice;
    // the bounds kernel keeps --block, 128 by default: the choice was not measured for it)
    int threads_wanted = plan.delta ? plan.block : this->params_.block;
    const std::size_t delta_bytes = kernels::delta_layout<std::size_t>(this->k_, this->d_, sizeof(T)).bytes;
    delta_ = plan.delta;
    auto occupancy_grid = [&](auto kernel, std::size_t bytes, int cap, std::size_t per_block_objects) {
      cuda::opt_in_shared(kernel, bytes, "--impl=fused");
      cudaFuncAttributes attr{};
      CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
      block_ = std::min({threads_wanted, attr.maxThreadsPerBlock / 32 * 32, cap});
      int per_sm = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block_, bytes));
      const std::size_t objects = per_block_objects * static_cast<std::size_t>(block_);
      const std::size_t blocks_needed = (data.n + objects - 1) / objects;
      grid_ = static_cast<int>(std::max<std::size_t>(
          1, std::min<std::size_t>(static_cast<std::size_t>(std::max(per_sm, 1)) * multiprocessor_count(),
                                   blocks_needed)));
    };
    const std::size_t unroll = static_cast<std::size_t>(kernels::fused_unroll(maxd));
    if (delta_) {
      bytes_ = plan.bytes;
      bits_ = plan.bits;
      exact_ = plan.exact;
      cells_side_ = plan.cells_side;
      cell_masks_planned_ = plan.cell_masks;
      ring_xy_ = plan.ring_xy;
      mma_ = plan.mma;
      const bool use_ball = plan.ball;
      delta_kernel_ = bits_ ? delta_kernel_for<T, true>(maxd, exact_) : delta_kernel_for<T, false>(maxd, exact_);
      if (use_ball)
        delta_kernel_ = maxd == 1 ? kernels::fused_delta<T, 1, true, kernels::delta_unroll(1), true>
                                  : kernels::fused_delta<T, 2, true, kernels::delta_unroll(2), true>;
      if (cells_side_) {
        // Without a grid after all (start_cells), the kernel that would have run without one.
        cells_fallback_ =
            plan.ball_wanted ? kernels::fused_delta<T, 2, true, kernels::delta_unroll(2), true> : delta_kernel_;
        delta_kernel_ = kernels::fused_delta<T, 2, true, kernels::delta_unroll(2), false, false, true>;
        // The same for the cells' sorted order (SORTED: a round's moves summed by the warp).
        sorted_kernel_ = kernels::fused_delta<T, 2, true, kernels::delta_unroll(2), false, false, true, false, false,
                                              false, true>;
      }
      if (mma_) delta_kernel_ = delta_mma_kernel_for<T>(maxd, exact_);
      // The staged loads' kernel, where the plan has one (taken at launch: launch_delta).
      tile_kernel_ = nullptr;
      tile_bytes_ = plan.tile_bytes;
      tile_offset_ = plan.tile_offset;
      if (plan.tile) {
        if (cells_side_)
          tile_kernel_ =
              kernels::fused_delta<T, 2, true, kernels::delta_unroll(2), false, false, true, false, false, true>;
        else
          tile_kernel_ = bits_ ? delta_tile_kernel_for<T, true>(maxd, mma_) : delta_tile_kernel_for<T, false>(maxd, false);
        occupancy_grid(tile_kernel_, tile_bytes_, kernels::kDeltaThreads,
                       static_cast<std::size_t>(kernels::delta_unroll(maxd, sizeof(T))));
        tile_grid_ = grid_;
        tile_block_ = block_;
      }
      // The staged kernel from the float copy, where the plan has it (taken where after_setup found
      // room for the copy, from the iteration after its writer, fill_start).
      shadow_kernel_ = plan.tile && plan.shadow && !cells_side_ ? delta_shadow_kernel_for<T>(maxd) : nullptr;
      shadow_bytes_ = plan.shadow_bytes;
      if (shadow_kernel_) {
        occupancy_grid(shadow_kernel_, shadow_bytes_, kernels::kDeltaThreads,
                       static_cast<std::size_t>(kernels::delta_unroll(maxd, sizeof(float))));
        shadow_grid_ = grid_;
        shadow_block_ = block_;
        fill_kernel_ = delta_fill_kernel_for<T>(maxd);
        if (!fill_kernel_) throw DeviceError("--impl=fused: the float copy without its writer");
        occupancy_grid(fill_kernel_, tile_bytes_, kernels::kDeltaThreads,
                       static_cast<std::size_t>(kernels::delta_unroll(maxd, sizeof(T))));
        fill_grid_ = grid_;
        fill_block_ = block_;
        if (fill_block_ != tile_block_) throw DeviceError("--impl=fused: the float copy's writer takes another block");
      }
      occupancy_grid(delta_kernel_, bytes_, kernels::kDeltaThreads,
                     static_cast<std::size_t>(kernels::delta_unroll(maxd, sizeof(T))));
      if (cells_side_) {
        // The sorted order's kernel takes the same launch: its blocks too must all be resident at
        // once (one wave: the last block's update, the dependent launch), so the smaller grid.
        const int grid = grid_, block = block_;
        occupancy_grid(sorted_kernel_, bytes_, kernels::kDeltaThreads,
                       static_cast<std::size_t>(kernels::delta_unroll(maxd, sizeof(T))));
        if (block_ != block) throw DeviceError("--impl=fused: the sorted order's kernel takes another block");
        grid_ = std::min(grid_, grid);
      }
      // The fallback runs with the same launch (its grid-stride loop takes any grid), so it may
      // need the same opt-in: above 48 KB at 128 x 128 cells and 256 threads.
      if (cells_side_) cuda::opt_in_shared(cells_fallback_, bytes_, "--impl=fused");
      // Hamerly's bounds (6_fused_delta.cuh, BOUNDS), from the second iteration after one where
      // at most 1% of the objects moved (bounds_start): before, they cost more than they save. Not by default
      // in float above d = 8, where they never paid (H200, 100 iterations: d = 16, K = 16
      // 2% slower in all; plots/delta_bounds_ab_h200.txt). KMEANS_DELTA_BOUNDS=0 never, =1
      // from the first iteration, =F after at most F of the objects moved. Only for the whole
      // problem on one device (the bounds follow the drift the last block applies), and only
      // with room for them (after_setup).
      bounds_after_ = plan_.bounds_after;
      const int threads = std::min(this->params_.block, kernels::kDeltaThreads);
      bounds_bytes_ = (delta_bytes + 15) / 16 * 16 + kernels::delta_bounds_bytes(maxd, threads, this->k_, sizeof(T));
      bounds_wanted_ = !use_ball && bounds_after_ > 0 &&
                       data.n == this->whole_.n && data.n < (std::size_t{1} << 32) &&  // u32 indices in its ring
                       bounds_bytes_ <= gpu.shared_optin;
      if (bounds_wanted_) {
        const int main_block = block_, main_grid = grid_;
        bounds_kernel_ = bits_ ? bounds_kernel_for<T, true>(maxd) : bounds_kernel_for<T, false>(maxd);
        threads_wanted = this->params_.block;
        occupancy_grid(bounds_kernel_, bounds_bytes_, kernels::kDeltaThreads,
                       static_cast<std::size_t>(kernels::delta_bounds_unroll(maxd)));
        bounds_block_ = block_;
        bounds_grid_ = grid_;
        block_ = main_block;
        grid_ = main_grid;
        kernels::hamerly_kappa(this->d_, sizeof(T) == 8 ? 0x1p-53 : 0x1p-24, kap_up_, kap_dn_);
        q_guard_ = this->params_.fused.guard;
      }
      const kernels::FilterBound b = kernels::filter_bound(this->d_, bits_, sizeof(T) == 8 ? 0x1p-53 : 0x1p-24);
      factor_ = static_cast<float>(b.factor);
      tiny_ = static_cast<float>(b.tiny);
      // In float the FMA-scored kernels' inertia addends from their scores where provably within
      // 2^-15 (margin.hpp: approx_dist_bound; the kernels without it ignore these).
      // (FusedConfig::exact_addends: every addend a distance in T, as seq's.)
      const bool exact_addends = sizeof(T) == 8 || this->params_.fused.exact_addends;
      const kernels::ApproxDistBound ab = kernels::approx_dist_bound(this->d_, bits_);
      // (off: an infinite bound, which no addend meets)
      dist_factor_ = exact_addends ? 0.0f : static_cast<float>(ab.factor);
      dist_tiny_ = exact_addends ? INFINITY : static_cast<float>(ab.tiny);
      dist_eta_ = exact_addends ? 0.0f : static_cast<float>(ab.eta_test);
      // (the bounds kernel scores with FMAs: the narrower factor above)
      // (its TF32 term each block's own, from its centroids' roundings: margin.hpp, mma_root2)
      mma_factor_ = static_cast<float>(
          kernels::filter_bound(this->d_, bits_, sizeof(T) == 8 ? 0x1p-53 : 0x1p-24, true).factor);
      return (this->k_ * this->d_ + this->k_ + 3) * sizeof(unsigned long long) + sizeof(unsigned);
    }
    bytes_ = kernels::block_sums_layout<std::size_t>(this->k_, this->d_, sizeof(T)).bytes;
    // --block is the threads per block, capped at what the kernel's registers allow
    // (1024 at d <= 8); the grid is one wave of resident blocks.
    auto launch_shape = [&](OnePassKernel<T> kernel) {
      kernel_ = kernel;
      occupancy_grid(kernel, bytes_, 1024, 1);
    };
    // Owner lanes hold fixed-point addends in T (in float only while 2^E is a normal float:
    // E <= 127 unless the data are below ~1e-20) and add them in double, exact while every
    // partial sum stays below 2^53: a lane adds at most the objects its warp sees (U * 32 per
    // pass of the grid-stride loop), each below max|x| 2^E + 1. Where that could pass 2^53
    // (a grid of fewer than ~256 warps), the shared atomics instead: integers too, the same bits.
    bool owner = kernels::fused_owner_lanes(maxd, this->k_) && (sizeof(T) == 8 || std::ilogb(this->scale_) <= 120);
    launch_shape(one_pass_kernel<T>(maxd, owner));
    if (owner) {
      const std::size_t per_pass = static_cast<std::size_t>(grid_) * static_cast<std::size_t>(block_) * unroll;
      const double per_warp = static_cast<double>((data.n + per_pass - 1) / per_pass) * 32.0 * unroll;
      if (per_warp * (this->whole_.max_abs * this->scale_ + 1) > 0x1p53) launch_shape(one_pass_kernel<T>(maxd, false));
    }
    return 0;
  }

  void after_setup() override {
    if (!delta_) return;
    // The held sums start at zero with every label at -1: the first iteration adds everyone.
    held_sums_ = this->template device_buffer<unsigned long long>(this->k_ * this->d_);
    held_counts_ = this->template device_buffer<unsigned long long>(this->k_);
    tallies_ = this->template device_buffer<unsigned long long>(6);
    done_ = this->template device_buffer<unsigned>(1);
    CUDA_CHECK(cudaMemsetAsync(held_sums_.get(), 0, held_sums_.size() * sizeof(unsigned long long), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(held_counts_.get(), 0, held_counts_.size() * sizeof(unsigned long long), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(tallies_.get(), 0, 6 * sizeof(unsigned long long), this->stream_));
    CUDA_CHECK(cudaMemsetAsync(done_.get(), 0, sizeof(unsigned), this->stream_));
    // The pass counters of the staged kernel, of the cell table's lean passes and of the
    // tensor-core scores' kernel (launch_delta).
    if ((tile_kernel_ && cells_side_ == 0) || cells_side_ || mma_) {
      chunks_ = this->template device_buffer<unsigned>(kernels::kDeltaChunkCounters * kernels::kDeltaChunkStride);
      CUDA_CHECK(cudaMemsetAsync(chunks_.get(), 0, chunks_.size() * sizeof(unsigned), this->stream_));
    }
    // Hamerly's bounds: 8 bytes per object, where the device has room for them beside the rest
    // and no --device-memory cap was given (as the tensor path's copy: the cap stays the cap).
    const std::size_t n = this->n_, k = this->k_, d = this->d_;
    // (The row-major upload, where kept, counts as room here: it goes before anything is refused
    // for want of it.)
    const std::size_t rows_bytes = this->rows_.get() ? this->rows_.size() * sizeof(T) : 0;
    bounds_ = bounds_wanted_ && this->whole_.n == n && !this->streamed() && this->params_.device_memory == 0 &&
              device_budget(0) + rows_bytes >= n * sizeof(float2) + (64ull << 20);
    if (bounds_ && device_budget(0) < n * sizeof(float2) + (64ull << 20)) this->rows_ = DeviceBuffer<T>();
    if (bounds_) {
      bounds_buf_ = this->template device_buffer<float2>(n);
      drift_ = this->template device_buffer<float>(k + 1);
      held_q_ = this->template device_buffer<unsigned long long>(k);
      z_ = this->template device_buffer<double>(d);
      inertia_parts_ = this->template device_buffer<double>(2 * k);
      previous_ = this->template device_buffer<double>(k * d);
      // Read in the first bounds iteration (which scores every object) but not used.
      CUDA_CHECK(cudaMemsetAsync(bounds_buf_.get(), 0, n * sizeof(float2), this->stream_));
    }
    // The float copy of x - z (SHADOW): 4 d bytes per object, likewise where the device has room
    // for it and no cap was given, for the staged kernel's data (n % 4 == 0, x and the labels
    // 16-byte aligned), n d within the copy kernel's and the kernel's 64-bit indices.
    const auto aligned = [](const void* a) { return reinterpret_cast<std::uintptr_t>(a) % 16 == 0; };
    const bool shadow_possible = shadow_kernel_ && this->whole_.n == n && !this->streamed() &&
                                 this->params_.device_memory == 0 && n % 4 == 0 && aligned(this->x_.get()) &&
                                 aligned(this->labels_.get());
    const std::size_t copy_bytes = n * d * sizeof(float) + (64ull << 20);
    if (!shadow_possible || device_budget(0) < copy_bytes) this->rows_ = DeviceBuffer<T>();  // (the copy first)
    shadow_ = shadow_possible && device_budget(0) >= copy_bytes;
    // The copy's kernel reads its movers' rows from the row-major upload where it was kept
    // (keep_rows: 8 d bytes per object more, [n][d], the same values as x).
    if (!shadow_ || this->rows_.size() != n * d || !aligned(this->rows_.get())) this->rows_ = DeviceBuffer<T>();
    if (shadow_) {
      shadow_x_ = this->template device_buffer<float>(n * d);
      shadow_q_ = this->template device_buffer<unsigned long long>(1);
      shadow_z_ = this->template device_buffer<double>(d);
      CUDA_CHECK(cudaMemsetAsync(shadow_q_.get(), 0, sizeof(unsigned long long), this->stream_));
      if (!bounds_) {
        inertia_parts_ = this->template device_buffer<double>(2 * k);
        previous_ = this->template device_buffer<double>(k * d);
      }
      q_guard_ = this->params_.fused.guard;
    }
    shadow_live_ = shadow_ran_ = shadow_over_ = shadow_made_ = false;
    // KMEANS_DELTA_SHADOW_AFTER=F: the copy's kernel from the iteration after the next once at most
    // F of the objects moved (0.25; 1: from the third, the copy written by the second). (Given, its
    // writer runs however few iterations are left.)
    shadow_after_ = this->params_.fused.float_copy_after.value_or(0.25);
    shadow_forced_ = this->params_.fused.float_copy_after.has_value();
    bounds_live_ = false;
    changed_log_.assign(1, n);  // (iteration 0: none yet)
    iteration_ = 0;
    ahead_ = false;
    const FusedConfig& config = this->params_.fused;
    ahead_wanted_ = config.launch_ahead;
    dependent_wanted_ = config.dependent_launch && compute_capability() >= 90;  // (sm_90 and later)
    prefetch_first_ = config.prefetch_first;
    last_end_ns_ = 0;
    const StopLimits limits = stop_limits(n, this->params_);
    stop_changed_ = limits.changed;
    stop_shift_ = limits.shift;
    gate_ = this->template device_buffer<unsigned>(1);
    CUDA_CHECK(cudaMemsetAsync(gate_.get(), 0, sizeof(unsigned), this->stream_));
    release_ = this->template device_buffer<unsigned>(1);
    CUDA_CHECK(cudaMemsetAsync(release_.get(), 0, sizeof(unsigned), this->stream_));
    release_seq_ = last_release_ = 0;
    early_release_ = config.early_release;
    lean_cells_ = config.lean_cells;
    dynamic_chunks_ = config.dynamic_chunks;
    cells_live_ = false;
    lean_used_ = false;
    if (cells_side_) start_cells();
    start_sorted();
    void* device_view = nullptr;
    void* ahead_view = nullptr;
    mapped_ = nullptr;
    if (cudaHostGetDevicePointer(&device_view, this->counters_host_.get(), 0) == cudaSuccess &&
        cudaHostGetDevicePointer(&ahead_view, ahead_counters_.get(), 0) == cudaSuccess)
      mapped_ = static_cast<typename GpuEngine<T>::Counters*>(device_view);
    else
      (void)cudaGetLastError();  // not mapped: the iteration copies the counters back instead
    slots_[0].host = this->counters_host_.get();
    slots_[0].mapped = mapped_;
    slots_[1].host = mapped_ ? ahead_counters_.get() : this->counters_host_.get();
    slots_[1].mapped = mapped_ ? static_cast<typename GpuEngine<T>::Counters*>(ahead_view) : nullptr;
    events_ = !mapped_ || this->params_.fused.iteration_events;
    slots_[0].host->seq = slots_[1].host->seq = 0;
  }

  // The cell grid over the data's range, when the whole problem is on this device; where its
  // proofs do not hold (cells.hpp: cell_grid), the kernel without the table.
  void start_cells() {
    if (this->streamed() || this->whole_.n != this->n_ || this->uploaded_ == nullptr) {
      delta_kernel_ = cells_fallback_;
      return;
    }
    const unsigned long long init[4] = {~0ull, 0ull, ~0ull, 0ull};
    unsigned long long keys[4] = {};
    DeviceBuffer<unsigned long long> range = this->template device_buffer<unsigned long long>(4);
    CUDA_CHECK(cudaMemcpyAsync(range.get(), init, sizeof init, cudaMemcpyHostToDevice, this->stream_));
    const int grid = static_cast<int>(std::min<std::size_t>((this->n_ + 255) / 256, 4ull * multiprocessor_count()));
    kernels::coordinate_range<T><<<dim3(static_cast<unsigned>(std::max(grid, 1)), 2), 256, 0, this->stream_>>>(
        this->x_.get(), static_cast<std::int64_t>(this->n_), range.get());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(keys, range.get(), sizeof keys, cudaMemcpyDeviceToHost, this->stream_));
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));
    const double lo[2] = {kernels::from_ordered_key(keys[0]), kernels::from_ordered_key(keys[2])};
    const double hi[2] = {kernels::from_ordered_key(keys[1]), kernels::from_ordered_key(keys[3])};
    cell_grid_ = kernels::cell_grid(lo, hi, cells_side_, sizeof(T) == 8 ? 0x1p-53 : 0x1p-24,
                                    static_cast<double>(std::numeric_limits<T>::min()));
    if (cell_grid_.side == 0) {
      delta_kernel_ = cells_fallback_;  // the table's kernel would score every object one per lane
      return;
    }
    cells_ = this->template device_buffer<unsigned char>(static_cast<std::size_t>(cells_side_) * cells_side_);
    // Each cell's candidates, for the lean passes' objects of mixed cells: above K = 16 8 bytes a
    // cell the rounds read from L2 (H200, 2^24 x 2, K = 64: 0.76x the time in float, 0.90x in
    // double); up to K = 16 2 bytes a cell the kernel copies into shared memory (the plan's
    // cell_masks), since from L2 each round's load cost what the scores saved there (level in
    // float, 1.03x in double; from shared memory, H100, K = 16: 0.98x the time in float, level in
    // double, plots/cells_ab_s21_h100.txt). KMEANS_CELLS_CANDIDATES=0|1|global: never, always
    // (A/B runs), always the 8 bytes from L2.
    using Candidates = FusedConfig::Candidates;
    const Candidates cand = this->params_.fused.cell_candidates;
    const auto cells = static_cast<std::size_t>(cells_side_) * cells_side_;
    candidates_ = DeviceBuffer<unsigned long long>();
    cell_masks_ = DeviceBuffer<unsigned short>();
    if (cand != Candidates::off) {
      if (cell_masks_planned_ && cand != Candidates::global)
        cell_masks_ = this->template device_buffer<unsigned short>(cells);
      else if (this->k_ > 16 || cand != Candidates::automatic)
        candidates_ = this->template device_buffer<unsigned long long>(cells);
    }
    cells_live_ = true;
  }

  // The cell table's sorted order (cell_order.cuh, cells.hpp: owned_chunks): once per fit, the
  // objects sorted by their cell (CUB's stable radix sort of the lean passes' own lookup), x and
  // the labels copied in that order, each cell's first object and its single chunks' sums. Each
  // iteration the table's kernel then lists the chunks to read: a cell whose label held from one
  // table to the next keeps its objects' labels (none of them can move), and its single chunks'
  // inertia follows from those sums, so its objects are not read. The labels go back to the
  // objects' order after the final E-step (assign). Where the copies fit beside the rest (no
  // --device-memory cap: the cap stays the cap) and the lean dynamic passes run (launch_delta);
  // Hamerly's bounds not with it. By default where the cells hold 1024 objects each on average
  // (8 chunks): H200, 10 iterations, at 1024 a cell 0.83x the time in double, 0.93x in float
  // (2^22 x 2, K = 16), 0.79x / 0.87x (2^24 x 2, K = 64); at 256 a cell, where about half a cell's
  // objects lie in its shared chunks, 1.15x / 1.15x (2^20 x 2, K = 16) and 1.11x / 1.04x (2^22 x 2,
  // K = 64) slower (plots/sorted_ab_s34_h200.txt). KMEANS_CELLS_SORTED=0: never; =1: wherever it can.
  void start_sorted() {
    sorted_live_ = table_held_ = false;
    const std::optional<bool> setting = this->params_.fused.sorted;
    if (setting == false) return;
    const std::size_t n = this->n_;
    const int cells = cells_side_ * cells_side_;
    if (setting != true && n < 1024ull * static_cast<std::size_t>(cells)) return;
    const unsigned chunk = kernels::kCellChunk;
    if (!cells_live_ || !sorted_kernel_ || !lean_cells_ || !dynamic_chunks_ || !chunks_.get() || tile_kernel_ ||
        !kernels::delta_chunks_dynamic(grid_, block_) || n < chunk || n > 0xffffffffull ||
        (sizeof(T) == 4 && this->inertia_scale_ >= 0x1p126) || this->params_.device_memory != 0)
      return;
    const std::size_t whole = n / chunk;
    const std::size_t kept = n * (2 * sizeof(T) + 2 * sizeof(std::int32_t)) +
                             static_cast<std::size_t>(cells) * (sizeof(unsigned) + sizeof(kernels::CellSums)) + whole * 4 + 64;
    const std::size_t sorting = n * 3 * sizeof(unsigned) + n * 2 * sizeof(unsigned) + (16ull << 20);  // (CUB's temp: ~2n 4-byte words)
    if (device_budget(0) < kept + sorting + (64ull << 20)) return;
    DeviceBuffer<unsigned> keys = this->template device_buffer<unsigned>(n);
    DeviceBuffer<unsigned> keys_sorted = this->template device_buffer<unsigned>(n);
    DeviceBuffer<unsigned> values = this->template device_buffer<unsigned>(n);
    order_ = this->template device_buffer<unsigned>(n);
    const int sms = multiprocessor_count();
    const int grid = static_cast<int>(std::min<std::size_t>((n + 255) / 256, 8ull * sms));
    kernels::cell_keys<T><<<grid, 256, 0, this->stream_>>>(this->x_.get(), static_cast<std::int64_t>(n), cell_grid_,
                                                            keys.get(), values.get());
    CUDA_CHECK_LAUNCH();
    int end_bit = 1;
    while ((1 << end_bit) < cells) ++end_bit;
    std::size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys.get(), keys_sorted.get(), values.get(),
                                               order_.get(), static_cast<std::int64_t>(n), 0, end_bit, this->stream_));
    DeviceBuffer<unsigned char> temp = this->template device_buffer<unsigned char>(temp_bytes);
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys.get(), keys_sorted.get(), values.get(),
                                               order_.get(), static_cast<std::int64_t>(n), 0, end_bit, this->stream_));
    xs_ = this->template device_buffer<T>(2 * n);
    ls_ = this->template device_buffer<std::int32_t>(n);
    kernels::gather_sorted<T><<<grid, 256, 0, this->stream_>>>(this->x_.get(), static_cast<std::int64_t>(n),
                                                                order_.get(), xs_.get());
    CUDA_CHECK_LAUNCH();
    // (The first iteration in the cells' order too, though every object moves then and a round's
    // movers share a cluster: their moves summed by the warp (6_fused_delta.cuh: add_moves), H200,
    // 2^24 x 2, 0.236 ms against 0.256 in the objects' order, in double. Taking it in the objects'
    // order and gathering its labels before the second cost more: the gather's scattered reads.)
    kernels::gather_labels<<<grid, 256, 0, this->stream_>>>(this->labels_.get(), static_cast<std::int64_t>(n),
                                                            order_.get(), ls_.get());
    CUDA_CHECK_LAUNCH();
    starts_ = this->template device_buffer<unsigned>(static_cast<std::size_t>(cells) + 1);
    kernels::cell_starts<<<(cells + 1 + 255) / 256, 256, 0, this->stream_>>>(keys_sorted.get(),
                                                                              static_cast<std::int64_t>(n), cells,
                                                                              starts_.get());
    CUDA_CHECK_LAUNCH();
    cell_stats_ = this->template device_buffer<kernels::CellSums>(static_cast<std::size_t>(cells));
    kernels::cell_stats<T><<<(cells + 3) / 4, 128, 0, this->stream_>>>(xs_.get(), static_cast<std::int64_t>(n),
                                                                        cell_grid_, starts_.get(),
                                                                        static_cast<unsigned>(whole), chunk,
                                                                        cell_stats_.get());
    CUDA_CHECK_LAUNCH();
    work_ = this->template device_buffer<unsigned>(whole);
    work_count_ = this->template device_buffer<unsigned>(1);
    CUDA_CHECK(cudaMemsetAsync(work_count_.get(), 0, sizeof(unsigned), this->stream_));
    whole_chunks_ = static_cast<unsigned>(whole);
    sorted_live_ = true;
    bounds_ = false;  // (the bounds' kernel reads every object without the table)
    bounds_buf_ = DeviceBuffer<float2>();
  }

  kernels::DeltaPass delta_pass() const {
    kernels::DeltaPass p;
    p.factor = factor_;
    p.tiny = tiny_;
    p.index_bits = bits_;
    p.scale = this->scale_;
    p.held_sums = held_sums_.get();
    p.held_counts = held_counts_.get();
    p.inertia_scale = this->inertia_scale_;
    p.dist_factor = dist_factor_;
    p.dist_tiny = dist_tiny_;
    p.dist_eta = dist_eta_;
    return p;
  }

  void launch_delta(const kernels::DeltaPass& p) {
    if (p.bounds) {
      if (sorted_live_) throw DeviceError("--impl=fused: Hamerly's bounds with the cells' sorted order");
      bounds_kernel_<<<bounds_grid_, bounds_block_, bounds_bytes_, this->stream_>>>(
          this->x_.get(), this->centroids_.get(), static_cast<std::int64_t>(this->n_), static_cast<int>(this->d_),
          static_cast<int>(this->k_), this->labels_.get(), p);
      CUDA_CHECK_LAUNCH();
      return;
    }
    kernels::DeltaPass q = p;
    if (mma_) {
      q.factor = mma_factor_;
      q.fma_factor = factor_;
    }
    // The next pass's lines into L1 before the scores where the plan has it (fused_plan.cpp).
    q.prefetch = plan_.prefetch;
    if (cells_live_ && !this->streamed()) {
      // This iteration's table from the centroids the last iteration left, a warp per cell (ncu,
      // H100, 64 x 64 cells, K = 16: 5.0 us with its launch, a thread per cell 7.1-7.5 us, its K
      // dependent steps in double, whether 16 blocks or 128 held them; the iteration's time level
      // within 1%: plots/delta_tile_ab_h100.txt).
      const int cells = cells_side_ * cells_side_;
      // SORTED: the table's kernel lists the chunks to read where the lean dynamic passes run
      // (they alone read the list; DeltaPass::work), the labels following the last table.
      kernels::CellSkip skip;
      if (sorted_live_ && q.done && q.update) {
        skip.starts = starts_.get();
        skip.stats = cell_stats_.get();
        skip.work = work_.get();
        skip.work_count = work_count_.get();
        skip.whole = whole_chunks_;
        skip.chunk = kernels::kCellChunk;
        skip.stable_ok = table_held_;
        skip.inertia = q.inertia;
        skip.skipped = q.skipped;
        skip.inertia_scale = this->inertia_scale_;
        q.work = work_.get();
        q.work_count = work_count_.get();
      }
      launch_dependent(kernels::delta_cells<T>, (cells + 3) / 4, 128, 0, this->centroids_.get(),
                       static_cast<int>(this->k_), cell_grid_, cells_.get(), candidates_.get(),
                       cell_masks_.get(), static_cast<const unsigned*>(q.release), q.acquire_value, skip);
      // (Every object's label now follows this table, once the delta kernel below has run.)
      table_held_ = sorted_live_;
      q.candidates = candidates_.get();
      q.cell_masks = cell_masks_.get();
      q.ring_xy = ring_xy_;
      q.wait_grid = q.acquire_value != 0;  // (the table: this kernel's end)
      q.cells = cells_.get();
      q.grid = cell_grid_;
    }
    // The staged loads copy 16-byte chunks: rows and labels aligned, no chunk across n.
    const auto aligned = [](const void* a) { return reinterpret_cast<std::uintptr_t>(a) % 16 == 0; };
    // SORTED: x and the labels in the cells' order (start_sorted).
    const T* x = sorted_live_ ? xs_.get() : this->x_.get();
    std::int32_t* labels = sorted_live_ ? ls_.get() : this->labels_.get();
    tile_used_ = tile_kernel_ && (cells_side_ == 0 || q.cells) && this->n_ % 4 == 0 && aligned(x) && aligned(labels);
    q.tile_offset = tile_offset_;
    // SHADOW: the staged kernel from the float copy, with its own launch; FILL, its writer, too.
    if ((q.shadow || q.fill_out) && !tile_used_)
      throw DeviceError("--impl=fused: the float copy without the staged kernel");
    const DeltaKernel<T> staged = q.shadow ? shadow_kernel_ : q.fill_out ? fill_kernel_ : tile_kernel_;
    const int staged_grid = q.shadow ? shadow_grid_ : q.fill_out ? fill_grid_ : tile_grid_,
              staged_block = q.shadow ? shadow_block_ : q.fill_out ? fill_block_ : tile_block_;
    // The staged kernel's warps take their passes as they come to them, in double and in float at
    // register width 32 (6_fused_delta.cuh: DeltaPass::chunks, kDynamic) where a last block resets
    // the counts; null (where after_setup allocated no counters, or KMEANS_DELTA_DYNAMIC=0): a
    // fixed share a warp.
    q.chunks = tile_used_ && cells_side_ == 0 && q.done && dynamic_chunks_ &&
                       (sizeof(T) == 8 || kernels::fused_register_width(this->d_) == 32) &&
                       kernels::delta_chunks_dynamic(staged_grid, staged_block)
                   ? chunks_.get()
                   : nullptr;
    // The cell table's lean passes (6_fused_delta.cuh): whole 16-byte loads of a lane's objects
    // (for any n: the second coordinate's row one load a value where it is not aligned).
    // KMEANS_CELLS_LEAN=0: the general loop alone (A/B runs).
    q.vector_cells = lean_cells_ && q.cells && !tile_used_ && aligned(x) && aligned(labels) &&
                     (sizeof(T) == 8 || this->inertia_scale_ < 0x1p126);
    lean_used_ = q.vector_cells;
    // The lean passes likewise (6_fused_delta.cuh: kLeanDynamic; H100, 2^24 x 2: 0.97x the time
    // at K = 16 and 64 in double, plots/prologue_ab_s23_h100.txt).
    if (q.vector_cells && !tile_used_ && q.done && dynamic_chunks_ && chunks_.get() &&
        kernels::delta_chunks_dynamic(grid_, block_))
      q.chunks = chunks_.get();
    // (The list read where it was made: start_sorted asked for the lean dynamic passes.)
    if (q.work && (!q.vector_cells || !q.chunks))
      throw DeviceError("--impl=fused: the cell table listed chunks that the kernel would not read");
    // The tensor-core scores' kernel likewise, not staged (6_fused_delta.cuh: kMmaDynamic; it
    // reads the counters only at d = 32, one object a lane, and ignores them elsewhere).
    if (mma_ && !tile_used_ && cells_side_ == 0 && q.done && dynamic_chunks_ && chunks_.get() &&
        kernels::delta_chunks_dynamic(grid_, block_))
      q.chunks = chunks_.get();
    const auto n = static_cast<std::int64_t>(this->n_);
    const int d = static_cast<int>(this->d_), k = static_cast<int>(this->k_);
    if (tile_used_)
      launch_dependent(staged, staged_grid, staged_block, q.shadow ? shadow_bytes_ : tile_bytes_, x,
                       this->centroids_.get(), n, d, k, labels, q);
    else
      launch_dependent(q.work ? sorted_kernel_ : delta_kernel_, grid_, block_, bytes_, x, this->centroids_.get(), n, d,
                       k, labels, q);
  }

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

  void assign(bool accumulate) override {
    // The kernel below keeps neither the bounds nor the q sums: none from here on.
    bounds_ = bounds_live_ = false;
    if (delta_) {
      // SORTED: a launched-ahead table's kernel whose delta kernel the gate stopped left its list
      // and tallies; this E-step reads every chunk (no list without `done`), then the labels go
      // back to the objects' order.
      if (sorted_live_) {
        CUDA_CHECK(cudaMemsetAsync(work_count_.get(), 0, sizeof(unsigned), this->stream_));
        CUDA_CHECK(cudaMemsetAsync(tallies_.get(), 0, 6 * sizeof(unsigned long long), this->stream_));
        table_held_ = false;
      }
      // The held sums follow every relabelling, the final E-step's too.
      kernels::DeltaPass p = delta_pass();
      if (accumulate) {
        p.changed = this->changed_.get();
        p.inertia = this->inertia_.get();
        p.rechecked = &this->counters_.get()->queued[0];
        p.done = done_.get();
        p.sums_out = this->sums_.get();
        p.counts_out = this->counts_.get();
      }
      launch_delta(p);
      if (sorted_live_) {
        const std::size_t n = this->n_;
        kernels::scatter_labels<<<static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 8ull * multiprocessor_count())),
                                  256, 0, this->stream_>>>(ls_.get(), static_cast<std::int64_t>(n), order_.get(),
                                                           this->labels_.get());
        CUDA_CHECK_LAUNCH();
      }
      return;
    }
    this->launch(kernel_, grid_, block_, bytes_, this->centroids_.get(), accumulate ? this->changed_.get() : nullptr,
                 accumulate ? this->sums_.get() : nullptr, this->counts_.get(), this->scale_,
                 accumulate ? this->inertia_.get() : nullptr, this->inertia_scale_);
  }

  OnePassKernel<T> kernel_ = nullptr;
  DeltaKernel<T> delta_kernel_ = nullptr, bounds_kernel_ = nullptr, sorted_kernel_ = nullptr;
  DeltaKernel<T> tile_kernel_ = nullptr;  // the staged loads' kernel, where they apply (prepare)
  std::size_t tile_bytes_ = 0;
  unsigned tile_offset_ = 0;  // (with the cell table: the buffers' start)
  int tile_grid_ = 1, tile_block_ = 128;
  bool tile_used_ = false;  // the last launch took it (the report's path: "staged")
  // bounds_: the buffers are there and the bounds may start; bounds_live_: they have.
  bool delta_ = false, bounds_wanted_ = false, bounds_ = false, bounds_live_ = false;
  double bounds_after_ = 0.01;
  std::vector<std::size_t> changed_log_;  // objects moved in iteration i (0: n)
  // Launching ahead (iterate): each iteration's events and counters in slot it % 2 (the second's
  // pinned copy is ahead_counters_), the stop rule's verdict for the next kernel in gate_.
  struct IterationSlot {
    cuda::EventPair kernel;
    typename GpuEngine<T>::Counters* host = nullptr;    // where the host reads them
    typename GpuEngine<T>::Counters* mapped = nullptr;  // the device's view (null: not mapped)
    bool bounds = false;  // the kernel ran with Hamerly's bounds
    bool ahead = false;   // queued behind the last iteration's kernel
    bool sorted = false;  // in the cells' sorted order (its skipped objects counted)
    bool shadow = false;  // the staged kernel from the float copy (its inertia by algebra)
    unsigned long long seq = 0;  // the sequence number its last block writes
  };
  IterationSlot slots_[2];
  unsigned long long seq_ = 0, last_end_ns_ = 0;
  bool events_ = false;  // events around each iteration's kernel (else the device's stamps)
  bool dependent_wanted_ = true, dependent_now_ = false;
  int prefetch_first_ = 1;  // passes
  cuda::PinnedSlot<typename GpuEngine<T>::Counters> ahead_counters_;
  DeviceBuffer<unsigned> gate_;
  // Released early (6_fused_delta.cuh: DeltaPass::release): the flag, the value the last kernel
  // launched releases it with.
  DeviceBuffer<unsigned> release_;
  unsigned release_seq_ = 0, last_release_ = 0;
  bool early_release_ = true;
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
  std::size_t bounds_bytes_ = 0;
  int bounds_grid_ = 1, bounds_block_ = 128;
  float kap_up_ = 1, kap_dn_ = 1;
  double q_guard_ = 1e-11;
  DeviceBuffer<float2> bounds_buf_;
  DeviceBuffer<float> drift_;
  DeviceBuffer<unsigned long long> held_q_;
  DeviceBuffer<double> z_, inertia_parts_, previous_;
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
  bool shadow_forced_ = false;  // KMEANS_DELTA_SHADOW_AFTER given: no rule on the iterations left
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
  bool ring_xy_ = false;                         // the ring's entries with their coordinates (the plan)
  DeltaKernel<T> cells_fallback_ = nullptr;
  DeviceBuffer<unsigned long long> held_sums_, held_counts_, tallies_;
  DeviceBuffer<unsigned> done_;
  typename GpuEngine<T>::Counters* mapped_ = nullptr;  // the device's view of the pinned counters
  int grid_ = 1, block_ = 128;
  std::size_t bytes_ = 0;
};

template <class Mma, bool SHORT = false, int DEPTH = 0, int NSTAGES = 3>
TensorKernels<typename Mma::T> tensor_kernels_for(std::size_t d) {
  using T = typename Mma::T;
  using Shape = kernels::TensorAssignShape<Mma, SHORT, DEPTH, NSTAGES>;
  constexpr int vec = 16 / int(sizeof(T));
  TensorKernels<T> r;
  r.assign = d % vec == 0 ? kernels::fused_tensor_assign<Mma, vec, SHORT, DEPTH, NSTAGES>
                          : kernels::fused_tensor_assign<Mma, 1, SHORT, DEPTH, NSTAGES>;
  if constexpr (!Shape::is_double)
    r.assign_pre = d % vec == 0 ? kernels::fused_tensor_assign<Mma, vec, SHORT, DEPTH, NSTAGES, true>
                                : kernels::fused_tensor_assign<Mma, 1, SHORT, DEPTH, NSTAGES, true>;
  r.smem = r.pre_smem = kernels::tensor_assign_smem_bytes<Mma, SHORT, DEPTH, NSTAGES>();
  r.threads = r.pre_threads = Shape::threads;
  r.rows = r.pre_rows = Shape::BM;
  r.centre_objects = Shape::centre_objects;
  return r;
}

template <class T>
TensorKernels<T> tensor_kernels(std::size_t d, bool wgmma) {
  namespace g = kernels::gemm;
  if constexpr (std::is_same_v<T, double>) {
    // sm_90, d > 16: 32-deep slices in three stages (221 KB of shared memory; half the barriers
    // of 16-deep ones): 2-6% faster on every measured shape with d >= 128 (H200, same call,
    // plots/tensor_depth_variants_h200.txt); at d = 16 a 32-deep slice would be half padding.
    if (compute_capability() >= 90)
      return d > 16 ? tensor_kernels_for<g::MmaF64m16n8k4, false, 32, 3>(d) : tensor_kernels_for<g::MmaF64m16n8k4>(d);
    return tensor_kernels_for<g::MmaF64m8n8k4>(d);
  }
  else if (d <= 16)  // 16-deep slices: a short d is not padded to 32
    return tensor_kernels_for<g::MmaTf32m16n8k8, true>(d);
  else if (d > 32) {  // 64-deep slices, three stages (211 KB): half the barriers and stage set-ups of
    // 32-deep ones; 4-10% faster at d = 128 and 784 (H100, same call, plots/tensor_float_ab.txt)
    TensorKernels<T> r = tensor_kernels_for<g::MmaTf32m16n8k8, false, 64, 3>(d);
    // From the centred copy, on sm_90 with 32 < d <= 128: wgmma (FusedConfig::wgmma off: mma.sync).
    if (wgmma)
      if (const WgmmaAssign w = wgmma_assign(d); w.kernel) {
        r.wgmma_kernel = w.kernel;
        r.wgmma_ceiling = w.ceiling_kernel;
        r.pre_smem = w.smem;
        r.pre_threads = w.threads;
        r.pre_rows = w.rows;
        r.wgmma = true;
      }
    return r;
  }
  else
    return tensor_kernels_for<g::MmaTf32m16n8k8>(d);
}

template TensorKernels<float> tensor_kernels(std::size_t, bool);
template TensorKernels<double> tensor_kernels(std::size_t, bool);

template <class T>
class FusedTensor final : public DeviceUpdateEngine<T> {
 public:
  explicit FusedTensor(const Params& p) : DeviceUpdateEngine<T>(p, "fused", Layout::row_major) {}

  // The whole problem here and in device memory: the sums are kept across iterations, and once
  // at most movers_after_ of the objects moved in the last iteration, only the movers go
  // through them (6_fused_tensor.cuh: move_members), the inertia from the kept sums
  // (movers_inertia). Otherwise, and in parts (several GPUs) or out of core, every object is
  // summed afresh each iteration.
  void iterate(IterationStats& stats) override {
    if (movers_after_ <= 0 || !object_q_.get() || this->whole_.n != this->n_) {
      movers_ = false;
      DeviceUpdateEngine<T>::iterate(stats);
      stats.summed = static_cast<std::int64_t>(this->whole_.n);
      return;
    }
    movers_ = held_ && static_cast<double>(last_changed_) <= movers_after_ * static_cast<double>(this->n_);
    this->keep_sums_ = true;
    if (!movers_) {  // summed afresh from every object, q sums included
      const std::size_t k = this->k_;
      CUDA_CHECK(cudaMemsetAsync(this->sums_.get(), 0, k * this->d_ * sizeof(unsigned long long), this->stream_));
      CUDA_CHECK(cudaMemsetAsync(this->counts_.get(), 0, k * sizeof(unsigned long long), this->stream_));
      CUDA_CHECK(cudaMemsetAsync(q_sums_.get(), 0, k * sizeof(unsigned long long), this->stream_));
    }
    DeviceUpdateEngine<T>::iterate(stats);
    held_ = true;
    last_changed_ = stats.changed;
    stats.summed = movers_ ? stats.changed : static_cast<std::int64_t>(this->n_);
  }

  void finish_update(IterationStats& stats) override {
    DeviceUpdateEngine<T>::finish_update(stats);  // waits for the stream, so the count is here
    const auto& counters = *this->counters_host_.get();  // read back with the change count
    stats.rechecked = static_cast<std::int64_t>(counters.queued[0] + counters.queued[1]);
    stats.rechecked_all = static_cast<std::int64_t>(counters.queued[1]);
    if (movers_ && counters.inertia == kernels::kInertiaUnsure) {
      // The algebraic inertia's bound failed (clusters far tighter than their distance from
      // the mean): this iteration's from the objects, and every object summed from here on.
      std::vector<T> previous(this->k_ * this->d_);
      CUDA_CHECK(cudaMemcpy(previous.data(), previous_.get(), previous.size() * sizeof(T), cudaMemcpyDeviceToHost));
      if (!this->device_inertia(previous, stats.inertia))
        throw DeviceError("--impl=fused: the device no longer holds the data for the iteration's inertia");
      held_ = false;
      movers_after_ = 0;
      this->keep_sums_ = false;
      // the update kept the sums: cleared for the next iteration, which sums every object
      CUDA_CHECK(cudaMemsetAsync(this->sums_.get(), 0, this->k_ * this->d_ * sizeof(unsigned long long), this->stream_));
      CUDA_CHECK(cudaMemsetAsync(this->counts_.get(), 0, this->k_ * sizeof(unsigned long long), this->stream_));
    }
  }

  std::string path() const override {  // the report's "path": "tensor, wgmma" when that kernel runs
    if (tf32_) return tf32_kernels_.wgmma ? "tf32 candidates, wgmma" : "tf32 candidates";
    return operand_.get() && kernels_.wgmma ? "wgmma" : DeviceUpdateEngine<T>::path();
  }

  // For --init=kmeans||: the data up (DeviceUpdateEngine::stage), then the centred TF32 copy
  // this path reads in its loop (double on TF32 candidates, or float's copy), made now so that
  // the initialisation's tensor-core rounds read it too (centred_rows.hpp) instead of making
  // their own; after_setup adopts it. Where memory is short, under --device-memory, or with
  // KMEANS_SHARE_COPY=0, none (the initialisation makes its own, as the loop's setup does).
  const T* stage(const Dataset<T>& data, std::size_t k) override {
    const T* x = DeviceUpdateEngine<T>::stage(data, k);
    staged_rows_ = DeviceBuffer<float>();
    staged_norms_ = DeviceBuffer<double>();
    staged_mu_ = DeviceBuffer<T>();
    shared_ = CentredRows{};
    if (!x || this->params_.init != Init::kmeans_parallel || !this->params_.fused.share_copy ||
        this->params_.device_memory != 0 || compute_capability() < 80 || data.n > INT32_MAX)
      return x;
    const std::size_t n = data.n, d = data.d, copy = n * d * sizeof(float) + n * sizeof(double);
    // Room for the copy twice over (the loop's own test, after_setup, counts it as free) and a
    // generous 256 bytes an object for the initialisation's and the loop's other buffers.
    if (device_budget(0) < 2 * copy + n * 256 + this->buffer_bytes(k, d) + (64ull << 20)) return x;
    const std::vector<T> mean = sampled_mean(x, n, d, this->stream_);  // as after_setup's
    staged_mu_ = this->template device_buffer<T>(d);
    CUDA_CHECK(cudaMemcpyAsync(staged_mu_.get(), mean.data(), d * sizeof(T), cudaMemcpyHostToDevice, this->stream_));
    staged_rows_ = this->template device_buffer<float>(n * d);
    staged_norms_ = this->template device_buffer<double>(n);
    const int grid = static_cast<int>(std::min<std::size_t>((n + 7) / 8, static_cast<std::size_t>(multiprocessor_count()) * 8));
    kernels::centred_row_norms<T, float><<<grid, 256, 0, this->stream_>>>(
        x, staged_mu_.get(), static_cast<std::int64_t>(n), static_cast<int>(d), true, staged_norms_.get(),
        staged_rows_.get());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // the initialisation reads it on its own stream
    staged_mean_ = mean;
    shared_.rows = staged_rows_.get();
    shared_.norms2 = staged_norms_.get();
    shared_.mean.assign(mean.begin(), mean.end());
    if (this->whole_.n == n) shared_.max_abs = this->whole_.max_abs;  // the host's range check, before the fit
    return x;
  }
  const CentredRows* centred_rows() const override { return shared_.rows ? &shared_ : nullptr; }

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    initial_max_ = 0;  // TF32 candidates need the initial centroids inside float's range too
    for (T v : initial) initial_max_ = std::max(initial_max_, std::fabs(static_cast<double>(v)));
    DeviceUpdateEngine<T>::setup(data, initial);
  }

 private:
  std::size_t prepare(const Dataset<T>& data) override {
    kernels_ = tensor_kernels<T>(data.d, this->params_.fused.wgmma);
    cuda::opt_in_shared(kernels_.assign, kernels_.smem, "--impl=fused");
    if (kernels_.wgmma)
      cuda::opt_in_shared(kernels_.wgmma_kernel, kernels_.pre_smem, "--impl=fused");
    else if (kernels_.assign_pre)
      cuda::opt_in_shared(kernels_.assign_pre, kernels_.pre_smem, "--impl=fused");
    bound_ = tensor_bound<T>(data.d);
    if constexpr (std::is_same_v<T, double>) {  // the TF32 candidates' kernels, should the copy fit (after_setup)
      tf32_kernels_ = tensor_kernels<float>(data.d, this->params_.fused.wgmma);
      if (tf32_kernels_.wgmma)
        cuda::opt_in_shared(tf32_kernels_.wgmma_kernel, tf32_kernels_.pre_smem, "--impl=fused");
      else
        cuda::opt_in_shared(tf32_kernels_.assign_pre, tf32_kernels_.pre_smem, "--impl=fused");
      tf32_bound_ = kernels::tf32_candidates_bound(data.d);
    }
    // the mean, the centred centroids, their norms, the largest norm, the next labels,
    // |x'|^2, the two re-check queues and their lengths, recheck_all's minima
    return data.d * sizeof(T) + this->k_ * (data.d + 1) * sizeof(T) +
           wgmma_image_floats(this->k_, data.d) * sizeof(float) + kernels::kKeyPad * sizeof(T) + sizeof(double) +
           data.n * (sizeof(std::int32_t) + sizeof(double) + sizeof(kernels::Recheck) + sizeof(std::int64_t) +
                     sizeof(unsigned long long)) +
           2 * sizeof(unsigned long long) +
           data.n * (2 * sizeof(std::int64_t) + sizeof(std::int32_t)) * 2 +  // the sort's buffers and workspace
           data.d * sizeof(double) + this->k_ * (3 * sizeof(double) + data.d * sizeof(T)) +  // the movers' scheme
           data.n * sizeof(unsigned long long);
  }

  void after_setup() override {
    const std::size_t n = this->n_;
    // The copy stage() made, for the same rows still here (not streamed), is adopted where this
    // path reads one; its mean is the one computed below, bit for bit (the same rows).
    const bool staged = staged_rows_.get() && !this->streamed() && this->uploaded_ == this->data_ &&
                        staged_rows_.size() == n * this->d_;
    const std::size_t staged_bytes = staged ? staged_rows_.bytes() + staged_norms_.bytes() : 0;
    // Out of core, the first chunk's, on the host.
    const std::vector<T> mean = staged ? staged_mean_
                                : this->uploaded_ == this->data_ && this->layout_ == Layout::row_major
                                    ? sampled_mean(this->x_.get(), n, this->d_, this->stream_)
                                    : sampled_mean(*this->data_, n);
    if (staged) {
      mu_ = std::move(staged_mu_);
    } else {
      mu_ = this->template device_buffer<T>(this->d_);
      CUDA_CHECK(cudaMemcpyAsync(mu_.get(), mean.data(), this->d_ * sizeof(T), cudaMemcpyHostToDevice, this->stream_));
    }
    centred_ = this->template device_buffer<T>(this->k_ * this->d_);
    norms_ = padded_keys<T>();
    cmax2_ = this->template device_buffer<double>(1);
    next_ = this->template device_buffer<std::int32_t>(n);
    xnorm2_ = staged ? std::move(staged_norms_) : this->template device_buffer<double>(n);  // written again below
    queue_ = this->template device_buffer<kernels::Recheck>(n);
    everyone_ = this->template device_buffer<std::int64_t>(n);
    all_min_ = this->template device_buffer<unsigned long long>(n);
    rows_grid_ = static_cast<int>(std::min<std::size_t>((n + 7) / 8, static_cast<std::size_t>(multiprocessor_count()) * 8));
    // The sort by label: its buffers and workspace, label bits, and the chunks' launch shape.
    index_ = this->template device_buffer<std::int64_t>(n);
    sorted_index_ = this->template device_buffer<std::int64_t>(n);
    sorted_labels_ = this->template device_buffer<std::int32_t>(n);
    label_bits_ = 1;
    while ((std::size_t{1} << label_bits_) < this->k_) ++label_bits_;
    std::size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, next_.get(), sorted_labels_.get(), index_.get(),
                                               sorted_index_.get(), static_cast<std::int64_t>(n), 0, label_bits_,
                                               this->stream_));
    sort_temp_ = this->template device_buffer<unsigned char>(temp_bytes);
    sorted_threads_ = kernels::coordinate_threads(static_cast<int>(this->d_));
    const std::size_t sms = static_cast<std::size_t>(multiprocessor_count());
    sorted_chunk_ = static_cast<int>(std::clamp<std::size_t>(n / (sms * 8), 16, kernels::kSortedChunk));
    sorted_grid_ = static_cast<int>(std::min<std::size_t>((n + sorted_chunk_ - 1) / sorted_chunk_, sms * 16));
    // Double, by default: the candidates from the TF32 kernels on a float copy of the centred
    // objects (margin.hpp: tf32_candidates_bound), seq's formula in double for the close calls
    // -- 1.1-3.0x faster than FP64 DMMA keys on the real-data rows (H100, plots/real_shapes_tf32_h100.csv). Needs the
    // copy (4 bytes per coordinate) in free memory, the whole problem in memory, no
    // --device-memory cap, and every |x| and initial |c| at most 2^48 (float's range for the
    // keys). FusedConfig::tf32_in_double off keeps FP64 DMMA keys.
    tf32_ = false;
    if constexpr (std::is_same_v<T, double>) {
      const std::size_t copy = (n + this->k_) * this->d_ * sizeof(float) + (this->k_ + this->d_) * sizeof(float);
      tf32_ = this->params_.fused.tf32_in_double && !this->streamed() && this->params_.device_memory == 0 &&
              this->whole_.max_abs <= 0x1p48 && initial_max_ <= 0x1p48 && device_budget(0) + staged_bytes >= copy;
      if (tf32_) {
        operand32_ = staged ? std::move(staged_rows_) : this->template device_buffer<float>(n * this->d_);
        centred32_ = this->template device_buffer<float>(this->k_ * this->d_);
        keyed32_ = padded_keys<float>();
        mu32_ = this->template device_buffer<float>(this->d_);  // the kernels' mu argument (unused by both)
        const std::vector<float> mean32(mean.begin(), mean.end());
        CUDA_CHECK(cudaMemcpyAsync(mu32_.get(), mean32.data(), this->d_ * sizeof(float), cudaMemcpyHostToDevice,
                                   this->stream_));
        CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // before mean32 goes
      }
    }
    // The movers' scheme (iterate): z = mu in double, each cluster's q sum, the inertia's parts,
    // the centroids kept for the host when the algebraic inertia's bound fails.
    // FusedConfig::movers_after: from the iteration after one in which at most that fraction of
    // the objects moved (0: never; 1: from the second iteration); the guard as for the one pass.
    {
      movers_after_ = this->params_.fused.movers_after.value_or(kMoversAfter);
      q_guard_ = this->params_.fused.guard;
      held_ = movers_ = this->keep_sums_ = false;
      last_changed_ = 0;
      z64_ = this->template device_buffer<double>(this->d_);
      const std::vector<double> z(mean.begin(), mean.end());
      CUDA_CHECK(cudaMemcpyAsync(z64_.get(), z.data(), z.size() * sizeof(double), cudaMemcpyHostToDevice,
                                 this->stream_));
      CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // before z goes
      q_sums_ = this->template device_buffer<unsigned long long>(this->k_);
      parts_ = this->template device_buffer<double>(2 * this->k_);
      previous_ = this->template device_buffer<T>(this->k_ * this->d_);
      if (!this->streamed() && movers_after_ > 0)  // filled by centred_row_norms
        object_q_ = this->template device_buffer<unsigned long long>(n);
      else
        object_q_ = DeviceBuffer<unsigned long long>();
    }
    mu_norm_ = 0;
    for (T v : mean) mu_norm_ += static_cast<double>(v) * static_cast<double>(v);
    mu_norm_ = kernels_.centre_objects || tf32_ ? 0.0 : std::sqrt(mu_norm_) * (1 + 1e-12);
    // Float, in memory: the objects centred and rounded to TF32 once, in a copy the assignment
    // reads with ldmatrix (no subtraction and conversion per fragment element and tile), when
    // the copy fits in what is free. Out of core, under --device-memory, or with
    // FusedConfig::tensor_copy off the assignment forms them itself (the same operands bit for bit).
    // (Float: stage()'s copy is this one, float rows centred on the same mu and rounded alike;
    // the rounding flag below changes only |x'|^2, which the launch writes afresh.)
    bool adopted = tf32_ && staged;
    if (kernels_.assign_pre && !this->streamed() && this->params_.device_memory == 0 &&
        this->params_.fused.tensor_copy && device_budget(0) + staged_bytes >= n * this->d_ * sizeof(T)) {
      if constexpr (std::is_same_v<T, float>) {
        adopted = staged;
        operand_ = staged ? std::move(staged_rows_) : this->template device_buffer<T>(n * this->d_);
      } else {
        operand_ = this->template device_buffer<T>(n * this->d_);
      }
    }
    staged_rows_ = DeviceBuffer<float>();  // not adopted: freed (its norms and mu, too)
    staged_norms_ = DeviceBuffer<double>();
    staged_mu_ = DeviceBuffer<T>();
    shared_ = CentredRows{};
    // An adopted copy is not written again (the same values); |x'|^2 and the movers' q are.
    if (tf32_)
      kernels::centred_row_norms<T, float><<<rows_grid_, 256, 0, this->stream_>>>(
          this->x_.get(), mu_.get(), static_cast<std::int64_t>(n), static_cast<int>(this->d_), true, xnorm2_.get(),
          adopted ? static_cast<float*>(nullptr) : operand32_.get(), z64_.get(), this->inertia_scale_,
          object_q_.get());
    else
      kernels::centred_row_norms<T><<<rows_grid_, 256, 0, this->stream_>>>(
          this->x_.get(), mu_.get(), static_cast<std::int64_t>(n), static_cast<int>(this->d_), kernels_.centre_objects,
          xnorm2_.get(), adopted ? static_cast<T*>(nullptr) : operand_.get(), z64_.get(), this->inertia_scale_,
          object_q_.get());
    CUDA_CHECK_LAUNCH();
    if (wgmma_runs())  // the wgmma kernel's stages come from the centroids' tile image
      image_ = this->template device_buffer<float>(wgmma_image_floats(this->k_, this->d_));
    after_update();
    CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // before `mean` goes
  }
  // Whether the assignment runs the wgmma kernel (which reads the centroids' tile image).
  bool wgmma_runs() const { return tf32_ ? tf32_kernels_.wgmma : operand_.get() && kernels_.wgmma; }

  // A buffer for the centroids' key terms, padded with +inf to a multiple of kKeyPad entries
  // (candidate_lists.cuh); centre_centroids writes the first k.
  template <class K>
  DeviceBuffer<K> padded_keys() {
    const std::size_t k = this->k_, padded = (k + kernels::kKeyPad - 1) / kernels::kKeyPad * kernels::kKeyPad;
    DeviceBuffer<K> keys = this->template device_buffer<K>(padded);
    const std::vector<K> tail(padded - k, std::numeric_limits<K>::infinity());
    if (!tail.empty()) {
      CUDA_CHECK(cudaMemcpyAsync(keys.get() + k, tail.data(), tail.size() * sizeof(K), cudaMemcpyHostToDevice,
                                 this->stream_));
      CUDA_CHECK(cudaStreamSynchronize(this->stream_));  // before `tail` goes
    }
    return keys;
  }

  void rows_changed() override {  // out of core: the chunk's |x'|^2
    kernels::centred_row_norms<T><<<rows_grid_, 256, 0, this->stream_>>>(
        this->x_.get(), mu_.get(), static_cast<std::int64_t>(this->n_), static_cast<int>(this->d_),
        kernels_.centre_objects, xnorm2_.get(), static_cast<T*>(nullptr));
    CUDA_CHECK_LAUNCH();
  }

  void after_update() override {  // c' = c - mu, |c'|^2 and the largest, for the new centroids
    const int k = static_cast<int>(this->k_);
    CUDA_CHECK(cudaMemsetAsync(cmax2_.get(), 0, sizeof(double), this->stream_));
    if (tf32_)  // the objects are centred too: keyed = |c'|^2
      kernels::centre_centroids<T, float><<<(k * 32 + 255) / 256, 256, 0, this->stream_>>>(
          this->centroids_.get(), mu_.get(), k, static_cast<int>(this->d_), false, centred32_.get(), keyed32_.get(),
          cmax2_.get());
    else
      kernels::centre_centroids<T><<<(k * 32 + 255) / 256, 256, 0, this->stream_>>>(
          this->centroids_.get(), mu_.get(), k, static_cast<int>(this->d_), !kernels_.centre_objects, centred_.get(),
          norms_.get(), cmax2_.get());
    CUDA_CHECK_LAUNCH();
    if (image_.get()) {
      if constexpr (std::is_same_v<T, float>)
        wgmma_image(centred_.get(), k, static_cast<int>(this->d_), image_.get(), this->stream_);
      else  // double: only on TF32 candidates
        wgmma_image(centred32_.get(), k, static_cast<int>(this->d_), image_.get(), this->stream_);
    }
  }

  void assign(bool accumulate) override {
    const auto n = static_cast<std::int64_t>(this->n_);
    const int d = static_cast<int>(this->d_), k = static_cast<int>(this->k_);
    cudaStream_t s = this->stream_;
    unsigned long long* queued = this->counters_.get()->queued;
    CUDA_CHECK(cudaMemsetAsync(queued, 0, 2 * sizeof(unsigned long long), s));
    const bool copied = operand_.get() != nullptr;
    const std::size_t rows = copied ? kernels_.pre_rows : kernels_.rows;
    const auto blocks = static_cast<unsigned>((this->n_ + rows - 1) / rows);
    bool launched = false;
    if (tf32_) {  // double on TF32 candidates: the float kernels on the float copy
      const TensorKernels<float>& f = tf32_kernels_;
      const auto tf32_blocks = static_cast<unsigned>((this->n_ + f.pre_rows - 1) / f.pre_rows);
      if (f.wgmma)
        f.wgmma_kernel<<<tf32_blocks, f.pre_threads, f.pre_smem, s>>>(
            operand32_.get(), image_.get(), centred32_.get(), keyed32_.get(), cmax2_.get(), xnorm2_.get(), 0.0, n, d, k,
            tf32_bound_, next_.get(), queue_.get(), everyone_.get(), queued, this->labels_.get(), nullptr);
      else
        f.assign_pre<<<tf32_blocks, f.pre_threads, f.pre_smem, s>>>(
            operand32_.get(), mu32_.get(), centred32_.get(), keyed32_.get(), cmax2_.get(), xnorm2_.get(), 0.0, n, d,
            k, tf32_bound_, next_.get(), queue_.get(), everyone_.get(), queued, this->labels_.get());
      launched = true;
    }
    if constexpr (std::is_same_v<T, float>)
      if (copied && kernels_.wgmma) {  // the previous labels give each object a threshold (margin.hpp)
        kernels_.wgmma_kernel<<<blocks, kernels_.pre_threads, kernels_.pre_smem, s>>>(
            operand_.get(), image_.get(), centred_.get(), norms_.get(), cmax2_.get(), xnorm2_.get(), mu_norm_, n, d, k,
            bound_, next_.get(), queue_.get(), everyone_.get(), queued, this->labels_.get(), nullptr);
        launched = true;
      }
    if (!launched)
      (copied ? kernels_.assign_pre : kernels_.assign)<<<blocks, copied ? kernels_.pre_threads : kernels_.threads,
                                                         copied ? kernels_.pre_smem : kernels_.smem, s>>>(
          copied ? operand_.get() : this->x_.get(), mu_.get(), centred_.get(), norms_.get(), cmax2_.get(),
          xnorm2_.get(), mu_norm_, n, d, k, bound_, next_.get(), queue_.get(), everyone_.get(), queued,
          this->labels_.get());
    CUDA_CHECK_LAUNCH();
    kernels::recheck_nearest<T><<<multiprocessor_count() * 8, kernels::kNearestThreads, 0, s>>>(
        this->x_.get(), this->centroids_.get(), d, queue_.get(), queued, everyone_.get(), all_min_.get(), next_.get());
    CUDA_CHECK_LAUNCH();
    const unsigned all_grid = static_cast<unsigned>(multiprocessor_count()) * 16;
    kernels::recheck_all<T, false><<<all_grid, kernels::kAllWarps * 32, 0, s>>>(
        this->x_.get(), this->centroids_.get(), d, k, everyone_.get(), queued + 1, all_min_.get(), next_.get());
    CUDA_CHECK_LAUNCH();
    if constexpr (std::is_same_v<T, float>)
      kernels::recheck_all_labels<<<static_cast<unsigned>(multiprocessor_count()) * 2, 256, 0, s>>>(
          everyone_.get(), queued + 1, all_min_.get(), next_.get());
    else
      kernels::recheck_all<T, true><<<all_grid, kernels::kAllWarps * 32, 0, s>>>(
          this->x_.get(), this->centroids_.get(), d, k, everyone_.get(), queued + 1, all_min_.get(), next_.get());
    CUDA_CHECK_LAUNCH();
    if (accumulate && movers_) {  // the kept sums: only the movers, the inertia from the sums
      kernels::move_members<T><<<static_cast<unsigned>(multiprocessor_count()) * 8, 256, 0, s>>>(
          this->x_.get(), next_.get(), this->labels_.get(), n, d, this->sums_.get(), this->counts_.get(),
          this->scale_, object_q_.get(), q_sums_.get(), this->changed_.get());
      CUDA_CHECK_LAUNCH();
      kernels::movers_parts<T><<<static_cast<unsigned>((k + 7) / 8), 256, 0, s>>>(
          this->centroids_.get(), this->sums_.get(), this->counts_.get(), q_sums_.get(), z64_.get(), k, d,
          this->inv_scale_, this->inertia_scale_, parts_.get());
      CUDA_CHECK_LAUNCH();
      kernels::movers_inertia<T><<<1, 1024, 0, s>>>(this->centroids_.get(), k, d, this->inertia_scale_, q_guard_,
                                                    parts_.get(), this->inertia_.get(), previous_.get());
      CUDA_CHECK_LAUNCH();
    } else if (accumulate) {
      // Sort the objects by label, then sum each cluster's members in chunks of that order
      // (with the sums kept, the q sums too).
      kernels::relabel_for_sort<<<static_cast<unsigned>((this->n_ + 255) / 256), 256, 0, s>>>(
          next_.get(), this->labels_.get(), n, this->changed_.get(), index_.get());
      CUDA_CHECK_LAUNCH();
      std::size_t temp_bytes = sort_temp_.size();
      CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp_.get(), temp_bytes, next_.get(), sorted_labels_.get(),
                                                 index_.get(), sorted_index_.get(), n, 0, label_bits_, s));
      (this->keep_sums_ ? kernels::accumulate_sorted<T, kernels::kSortedUnroll, true>
                        : kernels::accumulate_sorted<T>)<<<sorted_grid_, sorted_threads_, 0, s>>>(
          this->x_.get(), this->centroids_.get(), sorted_labels_.get(), sorted_index_.get(), n, d, sorted_chunk_,
          this->sums_.get(), this->counts_.get(), this->scale_, this->inertia_.get(), this->inertia_scale_,
          object_q_.get(), q_sums_.get());
      CUDA_CHECK_LAUNCH();
    } else {  // the final E-step: the labels only
      kernels::relabel_for_sort<<<static_cast<unsigned>((this->n_ + 255) / 256), 256, 0, s>>>(
          next_.get(), this->labels_.get(), n, nullptr, index_.get());
      CUDA_CHECK_LAUNCH();
    }
  }

  // The movers' scheme (iterate): from after an iteration in which at most this fraction moved
  // (measured: plots/tensor_movers_ab_h100.txt).
  static constexpr double kMoversAfter = 0.2;
  double movers_after_ = kMoversAfter, q_guard_ = 1e-11;
  bool held_ = false;    // sums_, counts_ and q_sums_ are those of the current labels
  bool movers_ = false;  // this iteration moves the movers only
  std::int64_t last_changed_ = 0;
  DeviceBuffer<double> z64_, parts_;
  DeviceBuffer<unsigned long long> q_sums_, object_q_;  // each cluster's, each object's q = |x - z|^2 (fixed)
  DeviceBuffer<T> previous_;
  TensorKernels<T> kernels_;
  kernels::CandidateBound bound_;
  int rows_grid_ = 1, sorted_grid_ = 1, sorted_threads_ = 32, sorted_chunk_ = kernels::kSortedChunk, label_bits_ = 1;
  DeviceBuffer<std::int64_t> index_, sorted_index_;
  DeviceBuffer<std::int32_t> sorted_labels_;
  DeviceBuffer<unsigned char> sort_temp_;
  DeviceBuffer<T> mu_, centred_, norms_;
  DeviceBuffer<T> operand_;  // float, when it fits: x - mu rounded to TF32 (centred_row_norms)
  // Double on TF32 candidates (tf32_): the float kernels, their bound, the objects' float copy
  // (x - mu rounded to TF32), the centroids' (c - mu, TF32) and their |c'|^2 in float.
  bool tf32_ = false;
  double initial_max_ = 0;
  // stage()'s centred copy (for --init=kmeans||), until after_setup adopts or frees it.
  DeviceBuffer<float> staged_rows_;
  DeviceBuffer<double> staged_norms_;
  DeviceBuffer<T> staged_mu_;
  std::vector<T> staged_mean_;
  CentredRows shared_;
  TensorKernels<float> tf32_kernels_;
  kernels::CandidateBound tf32_bound_;
  DeviceBuffer<float> operand32_, centred32_, keyed32_, mu32_;
  DeviceBuffer<float> image_;  // the centred TF32 centroids' tile image, when wgmma_runs()
  DeviceBuffer<double> cmax2_, xnorm2_;
  DeviceBuffer<std::int32_t> next_;
  DeviceBuffer<kernels::Recheck> queue_;
  DeviceBuffer<std::int64_t> everyone_;
  // recheck_all's least sum per queued object (its bits; float: with the centroid's index in the low word)
  DeviceBuffer<unsigned long long> all_min_;
  double mu_norm_ = 0;
};

// The plan for K clusters of d coordinates of `elem` bytes on this GPU (without one, an H100's),
// for any n and data within 2^48 (--list, make_path).
FusedPlan plan_for(std::size_t k, std::size_t d, std::size_t elem, const FusedConfig& config) {
  return plan_fused({0, d, k, elem, 0.0, Params{}.block, false, 0}, device_facts(), config);
}

// The path for --list, as the report words it ("staged" is taken where n % 4 == 0, "cells" once
// the data's range gives a grid).
std::string fused_path(std::size_t k, std::size_t d, std::size_t elem, const FusedConfig& config) {
  return plan_for(k, d, elem, config).describe();
}

// Every decision of the plan, for --list's "plan" object.
std::vector<std::pair<std::string, std::string>> fused_plan_fields(std::size_t k, std::size_t d, std::size_t elem,
                                                                   const FusedConfig& config) {
  return plan_for(k, d, elem, config).fields();
}

template <class T>
class FusedEngine final : public Engine<T> {
 public:
  explicit FusedEngine(const Params& p) : params_(p) {}

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    const std::size_t k = initial.size() / data.d;
    if (!staged_ || staged_k_ != k) make_path(k, data.d);  // else stage() made it and put the data up
    staged_ = false;
    path_->setup(data, initial);
  }
  const T* stage(const Dataset<T>& data, std::size_t k) override {
    make_path(k, data.d);
    staged_ = true;
    staged_k_ = k;
    return path_->stage(data, k);
  }
  const CentredRows* centred_rows() const override { return path_ ? path_->centred_rows() : nullptr; }
  void iterate(IterationStats& stats) override { path_->iterate(stats); }
  bool partable() const override { return true; }
  void set_whole(const Whole& whole) override { whole_ = whole; }
  void accumulate() override { path_->accumulate(); }
  Partials partials() override { return path_->partials(); }
  void start_update() override { path_->start_update(); }
  void finish_update(IterationStats& stats) override { path_->finish_update(stats); }
  void read_centroids(std::vector<T>& out) override { path_->read_centroids(out); }
  void final_labels(std::vector<std::int32_t>& out) override { path_->final_labels(out); }
  bool final_inertia(const std::vector<T>& centroids, double& inertia) override {
    return path_->final_inertia(centroids, inertia);
  }
  bool checks_range() const override { return true; }  // both paths are DeviceUpdateEngines
  std::string device() const override { return device_name(); }
  bool on_gpu() const override { return true; }
  int block() const override { return path_ ? path_->block() : 0; }
  std::string path() const override {
    const std::string more = path_ ? path_->path() : "";
    return more.empty() ? path_name_ : std::string(path_name_) + ", " + more;
  }

 private:
  void make_path(std::size_t k, std::size_t d) {
    const bool one_pass = plan_for(k, d, sizeof(T), params_.fused).path == FusedPlan::Path::one_pass;
    path_name_ = one_pass ? "one-pass" : "tensor";
    if (one_pass)
      path_ = std::make_unique<FusedOnePass<T>>(params_);
    else
      path_ = std::make_unique<FusedTensor<T>>(params_);
    if (whole_.n) path_->set_whole(whole_);
  }

  Params params_;
  Whole whole_;
  const char* path_name_ = "";
  std::unique_ptr<Engine<T>> path_;
  bool staged_ = false;  // stage() made path_ for staged_k_ clusters
  std::size_t staged_k_ = 0;
};

}  // namespace km::gpu

namespace km {
extern const Implementation fused_implementation = describe<gpu::FusedEngine>(
    "fused", "fastest: one pass for small K*d (float scores with a proven margin, only the objects that move accumulated, the update in the last block); otherwise exact distances + arg-min fused on the tensor cores", Where::gpu,
    [](std::size_t k, std::size_t d, std::size_t, const GpuInfo&) { return gpu::fits_int_indexing(k, d); },
    gpu::fused_path, gpu::fused_plan_fields);
}  // namespace km
