// fused's one-pass path, its set-up (one_pass.hpp): the plan's kernels and launch shapes, the
// buffers, the cell table and the float copy.
#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/kmeans/cell_order.cuh"
#include "kernels/kmeans/checks.cuh"
#include "kernels/kmeans/margin.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/gpu/fused/one_pass.hpp"

namespace km::gpu {

template <class T>
bool FusedOnePass<T>::keep_rows(std::size_t d) const {
  return sizeof(T) == 8 && d == 16 && this->params_.fused.copy_rows && this->params_.device_memory == 0 &&
         device_budget(0) >= this->n_ * d * sizeof(T) + (256ull << 20);
}

template <class T>
std::size_t FusedOnePass<T>::prepare(const Dataset<T>& data) {
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
    mma_ = plan.mma;
    const bool use_ball = plan.ball;
    delta_kernel_ = delta_kernel<T>(maxd, bits_ > 0, exact_);
    if (use_ball)
      delta_kernel_ = delta_elkan_kernel<T>(maxd);
    if (cells_side_) {
      // Without a grid after all (start_cells), the kernel that would have run without one.
      cells_fallback_ = plan.ball_wanted ? delta_elkan_kernel<T>(2) : delta_kernel_;
      delta_kernel_ = delta_cells_kernel<T>(false, false);
      // The same for the cells' sorted order (SORTED: a round's moves summed by the warp).
      sorted_kernel_ = delta_cells_kernel<T>(false, true);
    }
    if (mma_) delta_kernel_ = delta_mma_kernel<T>(maxd, exact_);
    // The staged loads' kernel, where the plan has one (taken at launch: launch_delta).
    tile_kernel_ = nullptr;
    tile_bytes_ = plan.tile_bytes;
    tile_offset_ = plan.tile_offset;
    if (plan.tile) {
      if (cells_side_)
        tile_kernel_ = delta_cells_kernel<T>(true, false);
      else
        tile_kernel_ = delta_staged_kernel<T>(maxd, bits_ > 0, mma_);
      occupancy_grid(tile_kernel_, tile_bytes_, kernels::kDeltaThreads,
                     static_cast<std::size_t>(kernels::delta_unroll(maxd, sizeof(T))));
      tile_grid_ = grid_;
      tile_block_ = block_;
    }
    // The staged kernel from the float copy, where the plan has it (taken where after_setup found
    // room for the copy, from the iteration after its writer, fill_start).
    shadow_kernel_ = plan.tile && plan.shadow && !cells_side_ ? delta_float_copy_kernel<T>(maxd) : nullptr;
    shadow_bytes_ = plan.shadow_bytes;
    if (shadow_kernel_) {
      occupancy_grid(shadow_kernel_, shadow_bytes_, kernels::kDeltaThreads,
                     static_cast<std::size_t>(kernels::delta_unroll(maxd, sizeof(float))));
      shadow_grid_ = grid_;
      shadow_block_ = block_;
      fill_kernel_ = delta_copy_writer_kernel<T>(maxd);
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

template <class T>
void FusedOnePass<T>::after_setup() {
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
  const std::size_t n = this->n_, k = this->k_, d = this->d_;
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
    inertia_parts_ = this->template device_buffer<double>(2 * k);
    previous_ = this->template device_buffer<double>(k * d);
    q_guard_ = this->params_.fused.guard;
  }
  shadow_live_ = shadow_ran_ = shadow_over_ = shadow_made_ = false;
  // The copy's kernel from the iteration after the next once at most this fraction of the objects
  // moved (the plan's float_copy_after; 1: from the third, the copy written by the second). (Given
  // in the configuration, its writer runs however few iterations are left.)
  shadow_after_ = plan_.float_copy_after;
  shadow_forced_ = this->params_.fused.float_copy_after.has_value();
  changed_log_.assign(1, n);  // (iteration 0: none yet)
  iteration_ = 0;
  ahead_ = false;
  const FusedConfig& config = this->params_.fused;
  ahead_wanted_ = config.launch_ahead;
  dependent_wanted_ = config.dependent_launch && compute_capability() >= 90;  // (sm_90 and later)
  last_end_ns_ = 0;
  const StopLimits limits = stop_limits(n, this->params_);
  stop_changed_ = limits.changed;
  stop_shift_ = limits.shift;
  gate_ = this->template device_buffer<unsigned>(1);
  CUDA_CHECK(cudaMemsetAsync(gate_.get(), 0, sizeof(unsigned), this->stream_));
  release_ = this->template device_buffer<unsigned>(1);
  CUDA_CHECK(cudaMemsetAsync(release_.get(), 0, sizeof(unsigned), this->stream_));
  release_seq_ = last_release_ = 0;
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

template <class T>
void FusedOnePass<T>::start_cells() {
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
  // float, 1.03x in double; from shared memory, H100, K = 16: 0.97x the time in float, 0.98x in
  // double). FusedConfig::cell_candidates: off, on (always), global (always the 8 bytes from L2).
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

template <class T>
void FusedOnePass<T>::start_sorted() {
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
}

template bool FusedOnePass<float>::keep_rows(std::size_t ) const;
template std::size_t FusedOnePass<float>::prepare(const Dataset<float>& );
template void FusedOnePass<float>::after_setup();
template void FusedOnePass<float>::start_cells();
template void FusedOnePass<float>::start_sorted();
template bool FusedOnePass<double>::keep_rows(std::size_t ) const;
template std::size_t FusedOnePass<double>::prepare(const Dataset<double>& );
template void FusedOnePass<double>::after_setup();
template void FusedOnePass<double>::start_cells();
template void FusedOnePass<double>::start_sorted();

}  // namespace km::gpu
