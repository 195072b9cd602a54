// fused's one-pass path, its iterations (one_pass.hpp): each iteration one launch and one wait,
// the next launched ahead behind a gate; the launch's arguments; the final E-step.
#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "kernels/kmeans/cell_order.cuh"
#include "kernels/kmeans/checks.cuh"
#include "kernels/kmeans/margin.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/gpu/fused/one_pass.hpp"

namespace km::gpu {

template <class T>
void FusedOnePass<T>::iterate(IterationStats& stats) {
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
  // (counted when the table was built)
  if (cells_live_) stats.looked_up = static_cast<std::int64_t>(counters.looked_up);
  if (mma_) stats.rescored = static_cast<std::int64_t>(counters.rescored);
  if (slot.sorted) stats.skipped = static_cast<std::int64_t>(counters.queued[1]);
  changed_log_.push_back(static_cast<std::size_t>(stats.changed));
  if (ahead_) {
    // The device's stop rule against the driver's (they cannot differ: the same arithmetic).
    if (should_stop(stats, this->n_, this->params_) != (counters.stopped != 0))
      throw DeviceError("--impl=fused: the kernel's stop rule disagrees with the driver's");
  }
  if (slot.shadow && counters.inertia == kernels::kInertiaUnsure) {
    // The float copy's algebraic inertia failed its bound: this
    // iteration's from the objects, and the staged kernel from x from here on. Its last block
    // gated the kernel launched ahead, which returned touching nothing (6_fused_delta.cuh:
    // gate_out), so the labels are this iteration's; the next iteration is launched again.
    inertia_from_objects(stats);
    shadow_live_ = false;
    shadow_over_ = true;
    ahead_ = false;
  }
}

template <class T>
void FusedOnePass<T>::inertia_from_objects(IterationStats& stats) {
  std::vector<double> wide(this->k_ * this->d_);
  CUDA_CHECK(cudaMemcpy(wide.data(), previous_.get(), wide.size() * sizeof(double), cudaMemcpyDeviceToHost));
  const std::vector<T> previous(wide.begin(), wide.end());
  if (!this->device_inertia(previous, stats.inertia))
    throw DeviceError("--impl=fused: the device no longer holds the data for the iteration's inertia");
}

template <class T>
void FusedOnePass<T>::launch_iteration(int it, bool gated) {
  IterationSlot& slot = slots_[it & 1];
  if (events_) slot.kernel.start(this->stream_);
  kernels::DeltaPass p = delta_pass();
  p.changed = tallies_.get();
  p.inertia = tallies_.get() + 1;
  p.rechecked = tallies_.get() + 2;
  p.done = done_.get();
  p.update = true;
  p.unit = this->unit();
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
  // The copy from the iteration after its writer (fill_start, which reads x as before) once few
  // objects move (shadow_on).
  if (shadow_on(it)) shadow_live_ = true;
  if (fill_start(it)) {
    p.fill_out = shadow_x_.get();
    p.fill_z = shadow_z_.get();
    p.fill_q = shadow_q_.get();
    shadow_made_ = true;
  }
  slot.shadow = shadow_live_;
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
  if (sorted_live_) {
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
  p.prefetch_first = dependent_now_ ? kPrefetchFirst : 0;
  {
    p.release = release_.get();
    p.release_value = ++release_seq_;
    p.acquire_value = dependent_now_ ? last_release_ : 0u;
    last_release_ = p.release_value;
  }
  launch_delta(p);
  dependent_now_ = false;
  if (events_) slot.kernel.stop(this->stream_);
}

template <class T>
void FusedOnePass<T>::wait_counters(const typename GpuEngine<T>::Counters* host, unsigned long long want) {
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

template <class T>
std::string FusedOnePass<T>::path() const {
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

template <class T>
void FusedOnePass<T>::finish_update(IterationStats& stats) {
  DeviceUpdateEngine<T>::finish_update(stats);
  if (delta_) stats.rechecked = static_cast<std::int64_t>(this->counters_host_.get()->queued[0]);
}

template <class T>
kernels::DeltaPass FusedOnePass<T>::delta_pass() const {
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

template <class T>
void FusedOnePass<T>::launch_delta(const kernels::DeltaPass& p) {
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
    // within 1%).
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
  // the counts; null (where after_setup allocated no counters, or FusedConfig::dynamic_chunks
  // off): a fixed share a warp.
  q.chunks = tile_used_ && cells_side_ == 0 && q.done && dynamic_chunks_ &&
                     (sizeof(T) == 8 || kernels::fused_register_width(this->d_) == 32) &&
                     kernels::delta_chunks_dynamic(staged_grid, staged_block)
                 ? chunks_.get()
                 : nullptr;
  // The cell table's lean passes (6_fused_delta.cuh): whole 16-byte loads of a lane's objects
  // (for any n: the second coordinate's row one load a value where it is not aligned).
  // (FusedConfig::lean_cells off: the general loop alone.)
  q.vector_cells = lean_cells_ && q.cells && !tile_used_ && aligned(x) && aligned(labels) &&
                   (sizeof(T) == 8 || this->inertia_scale_ < 0x1p126);
  lean_used_ = q.vector_cells;
  // The lean passes likewise (6_fused_delta.cuh: kLeanDynamic; H100, 2^24 x 2: 0.97x the time
  // at K = 16 and 64 in double).
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

template <class T>
void FusedOnePass<T>::assign(bool accumulate) {
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

template void FusedOnePass<float>::iterate(IterationStats& );
template void FusedOnePass<float>::inertia_from_objects(IterationStats& );
template void FusedOnePass<float>::launch_iteration(int , bool );
template void FusedOnePass<float>::wait_counters(const typename GpuEngine<float>::Counters* , unsigned long long );
template std::string FusedOnePass<float>::path() const;
template void FusedOnePass<float>::finish_update(IterationStats& );
template kernels::DeltaPass FusedOnePass<float>::delta_pass() const;
template void FusedOnePass<float>::launch_delta(const kernels::DeltaPass& );
template void FusedOnePass<float>::assign(bool );
template void FusedOnePass<double>::iterate(IterationStats& );
template void FusedOnePass<double>::inertia_from_objects(IterationStats& );
template void FusedOnePass<double>::launch_iteration(int , bool );
template void FusedOnePass<double>::wait_counters(const typename GpuEngine<double>::Counters* , unsigned long long );
template std::string FusedOnePass<double>::path() const;
template void FusedOnePass<double>::finish_update(IterationStats& );
template kernels::DeltaPass FusedOnePass<double>::delta_pass() const;
template void FusedOnePass<double>::launch_delta(const kernels::DeltaPass& );
template void FusedOnePass<double>::assign(bool );

template <class T>
std::unique_ptr<Engine<T>> make_fused_one_pass(const Params& params) {
  return std::make_unique<FusedOnePass<T>>(params);
}
template std::unique_ptr<Engine<float>> make_fused_one_pass(const Params&);
template std::unique_ptr<Engine<double>> make_fused_one_pass(const Params&);

}  // namespace km::gpu
