// The cell table's sorted order (one_pass_setup.cu: start_sorted; cells.hpp: owned_chunks). Once per fit,
// at d = 2 with the cell table: the objects in the order of their cells (a stable CUB sort of
// cell_in_range, the lean passes' own lookup), a copy of x in that order, each cell's first object
// in it and, per cell, the sums of its single chunks' objects about its centre. Each iteration the
// cell table's kernel (6_fused_delta.cuh: delta_cells) then lists the chunks the delta kernel reads:
// those of the cells whose label changed or that hold no label; a cell whose label held keeps its
// objects' labels, and its single chunks' inertia comes from those sums, without reading them.
// (The grid's cells are fixed for the fit, so an object never changes cell; a labelled cell's
// objects all take its label, so where the label held, none of them moves.)
#pragma once

#include <cstdint>

#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/update.cuh"  // to_fixed

namespace km::kernels {

// The delta kernel's lean passes' chunk (6_fused_delta.cuh: a warp's 32 lanes, U = 4 objects each).
constexpr unsigned kCellChunk = 128;

// A cell's single chunks' objects: the sums of x - m (per coordinate) and of |x - m|^2, their count.
struct CellSums {
  double s0 = 0, s1 = 0, s2 = 0, count = 0;
};

// What the cell table's kernel needs to list the iteration's chunks (null work: it lists none).
struct CellSkip {
  const unsigned* starts = nullptr;  // [side^2 + 1]: each cell's first object in the sorted order
  const CellSums* stats = nullptr;   // [side^2]: its single chunks' sums (cell_stats)
  unsigned* work = nullptr;          // the chunks to read, in any order (the delta kernel: DeltaPass::work)
  unsigned* work_count = nullptr;    // (zero before the kernel: the last delta kernel's last block resets it)
  unsigned whole = 0, chunk = 0;     // the whole chunks, objects a chunk
  bool stable_ok = false;            // the table in `out` is the one the labels follow (else none held)
  unsigned long long* inertia = nullptr;  // the iteration's tallies (null: not counted)
  unsigned long long* skipped = nullptr;
  double inertia_scale = 0;
};

// keys[i] = object i's cell (cells.hpp: cell_in_range), values[i] = i. x coordinate-major [2][n].
template <class T>
__global__ void cell_keys(const T* __restrict__ x, std::int64_t n, CellGrid g, unsigned* __restrict__ keys,
                          unsigned* __restrict__ values) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    keys[i] = static_cast<unsigned>(cell_in_range<T>(x[i], x[n + i], g));
    values[i] = static_cast<unsigned>(i);
  }
}

// The sorted copy of x: xs[.][i] = x[.][order[i]].
template <class T>
__global__ void gather_sorted(const T* __restrict__ x, std::int64_t n, const unsigned* __restrict__ order,
                              T* __restrict__ xs) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t o = order[i];
    xs[i] = x[o];
    xs[n + i] = x[n + o];
  }
}

// The labels into the sorted order: ls[i] = labels[order[i]].
__global__ inline void gather_labels(const std::int32_t* __restrict__ labels, std::int64_t n,
                                     const unsigned* __restrict__ order, std::int32_t* __restrict__ ls) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    ls[i] = labels[order[i]];
}

// The labels back in the objects' order: labels[order[i]] = ls[i].
__global__ inline void scatter_labels(const std::int32_t* __restrict__ ls, std::int64_t n,
                                      const unsigned* __restrict__ order, std::int32_t* __restrict__ labels) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    labels[order[i]] = ls[i];
}

// starts[c] = the first i with keys[i] >= c (keys sorted), c = 0 ... cells (starts[cells] = n).
__global__ inline void cell_starts(const unsigned* __restrict__ keys, std::int64_t n, int cells,
                                   unsigned* __restrict__ starts) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c > cells) return;
  std::int64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi) / 2;
    if (keys[mid] < static_cast<unsigned>(c)) lo = mid + 1;
    else hi = mid;
  }
  starts[c] = static_cast<unsigned>(lo);
}

// A warp a cell: the sums of its single chunks' objects (owned_chunks) about its centre m, in double
// (each lane its objects in order, then a fixed tree: the same bits every run).
template <class T>
__global__ void cell_stats(const T* __restrict__ xs, std::int64_t n, CellGrid g, const unsigned* __restrict__ starts,
                           unsigned whole, unsigned chunk, CellSums* __restrict__ stats) {
  const int cell = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32), lane = threadIdx.x & 31;
  if (cell >= g.side * g.side) return;
  const OwnedChunks o = owned_chunks(starts[cell], starts[cell + 1], whole, chunk);
  double m0, m1;
  cell_centre(g, cell, m0, m1);
  double s0 = 0, s1 = 0, s2 = 0;
  const std::int64_t from = static_cast<std::int64_t>(o.first) * chunk, to = static_cast<std::int64_t>(o.single_end) * chunk;
  for (std::int64_t i = from + lane; i < to; i += 32) {
    const double a = static_cast<double>(xs[i]) - m0, b = static_cast<double>(xs[n + i]) - m1;
    s0 += a;
    s1 += b;
    s2 += a * a + b * b;
  }
  for (int off = 16; off > 0; off /= 2) {
    s0 += __shfl_down_sync(0xffffffffu, s0, off);
    s1 += __shfl_down_sync(0xffffffffu, s1, off);
    s2 += __shfl_down_sync(0xffffffffu, s2, off);
  }
  if (lane == 0) stats[cell] = CellSums{s0, s1, s2, static_cast<double>(to - from)};
}

// The cell table's kernel's part (delta_cells, a warp a cell, after its label): the cell's chunks
// to read into s.work, and where its label held, its single chunks' inertia and count to the
// tallies. `before`: the cell's byte in the last table; cs: the centroids [2][k] in T.
template <class T>
__device__ __forceinline__ void list_cell_chunks(const CellSkip& s, const CellGrid& g, int cell, int lane,
                                                 unsigned char label, unsigned char before, const T* cs, int k) {
  bool held = s.stable_ok && label != kCellMixed && before == label;
  const OwnedChunks o = owned_chunks(s.starts[cell], s.starts[cell + 1], s.whole, s.chunk);
  double q = 0, n = 0;
  if (held && o.single_end > o.first) {
    // The single chunks' inertia by algebra where its error bound allows (cells.hpp:
    // held_cell_inertia), else the cell's objects are read.
    const CellSums st = s.stats[cell];
    double m0, m1;
    cell_centre(g, cell, m0, m1);
    n = st.count;
    const HeldInertia h = held_cell_inertia(st.s0, st.s1, st.s2, n, static_cast<double>(cs[label]) - m0,
                                            static_cast<double>(cs[k + label]) - m1, static_cast<double>(g.w[0]),
                                            static_cast<double>(g.w[1]));
    q = h.q;
    if (!h.sure) held = false;
  }
  const unsigned from = held ? o.single_end : o.first, count = o.end - from;
  unsigned at = 0;
  if (lane == 0 && count) at = atomicAdd(s.work_count, count);
  at = __shfl_sync(0xffffffffu, at, 0);
  for (unsigned j = static_cast<unsigned>(lane); j < count; j += 32) s.work[at + j] = from + j;
  if (held && lane == 0 && o.single_end > o.first) {
    if (s.inertia) atomicAdd(s.inertia, to_fixed(q, s.inertia_scale));
    if (s.skipped) atomicAdd(s.skipped, static_cast<unsigned long long>(n));
  }
}

}  // namespace km::kernels
