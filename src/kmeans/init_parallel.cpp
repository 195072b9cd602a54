// k-means|| (init.hpp): the CPU's steps (CpuParallel: OpenMP over objects), the driver shared
// with the GPU's steps (src/kmeans/gpu/kmeanspp.cu), and the reduction of the weighted
// candidates to K centres by greedy k-means++ in a fixed tree order (reduce_weighted), which
// the GPU's parallel_reduce follows bit for bit.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <system_error>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/init.hpp"
#include "kmeans/init_detail.hpp"

namespace km {

using init_detail::fetch_rows;
using init_detail::fetch_rows_into;
using init_detail::kLanes;
using init_detail::kMaxPadded;
using init_detail::kParallel;
using init_detail::kParallelReduce;
using init_detail::lane_distances;
using init_detail::lane_distances4;
using init_detail::Lanes;
using init_detail::Uniform;

namespace {

// `count` values of T, their pages touched on a thread of its own, for a result filled later: a
// fresh page's first touch cost ~4 us on the H100 box, so the K centres' 1 MB (K = 1024, d = 128
// in double) took ~1 ms of k-means||'s init where it is made at the end; made while the GPU
// works, it costs nothing there. An invalid future where no thread could start (or below 256 KB).
template <class T>
std::future<std::vector<T>> touched_async(std::size_t count) {
  if (count * sizeof(T) < (std::size_t{256} << 10)) return {};
  try {
    return std::async(std::launch::async, [count] { return std::vector<T>(count); });
  } catch (const std::system_error&) {
    return {};
  }
}

// k-means||'s reduction with every pairwise distance of the m candidates computed once: a row
// of table[a][b] = the distance (in double, summed over j in order) between candidates a and b,
// for rows [a0, a1) and columns from g0 (a multiple of kLanes), the columns from cc ([d][padded],
// the candidates coordinate-major) as vector lanes (lane_distances), four rows at a time; each
// column group's coordinates serve every row of the block while they are in L1. (x_a - x_b)^2 and (x_b - x_a)^2 are the same double, so
// table[c][i] is the bits CpuPlusPlus computes for object i and centre c.
template <class T>
[[gnu::always_inline]] inline void table_rows_impl(const Dataset<T>& pool, std::size_t a0, std::size_t a1,
                                                   std::size_t g0, const double* cc, std::size_t padded,
                                                   double* table) {
  const std::size_t d = pool.d, m = pool.n;
  auto put = [&](std::size_t a, std::size_t g, const Lanes& acc) {
    for (std::size_t l = 0; l < kLanes && g + l < m; ++l) table[a * m + g + l] = acc[l];
  };
  for (std::size_t g = g0; g < padded; g += kLanes) {
    std::size_t a = a0;
    for (; a + 4 <= a1; a += 4) {
      Lanes s[4];
      lane_distances4(pool.row(a), d, cc + g, padded, s);
      for (std::size_t r = 0; r < 4; ++r) put(a + r, g, s[r]);
    }
    for (; a < a1; ++a) {
      Lanes s;
      lane_distances(pool.row(a), d, cc + g, padded, s);
      put(a, g, s);
    }
  }
}

template <class T>
using TableRows = void (*)(const Dataset<T>&, std::size_t, std::size_t, std::size_t, const double*, std::size_t,
                           double*);
#define KM_TABLE_VARIANT(NAME, ATTR)                                                                     \
  template <class T>                                                                                    \
  ATTR void NAME(const Dataset<T>& pool, std::size_t a0, std::size_t a1, std::size_t g0, const double* cc, \
                 std::size_t padded, double* table) {                                                   \
    table_rows_impl<T>(pool, a0, a1, g0, cc, padded, table);                                            \
  }
KM_TABLE_VARIANT(table_rows_baseline, )
KM_TABLE_VARIANT(table_rows_avx2, KM_TARGET_AVX2)
KM_TABLE_VARIANT(table_rows_avx512, KM_TARGET_AVX512)
#undef KM_TABLE_VARIANT

// Host memory for `count` doubles, uninitialised: the threads that compute the table touch
// (fault in) its pages.
using HostDoubles = std::unique_ptr<double[]>;
inline HostDoubles uninitialised_doubles(std::size_t count) { return HostDoubles(new double[count]); }

// The m x m table of pool's pairwise distances (table_rows_impl), in parallel over blocks of
// rows: each block computes its columns from its own first row on (the upper triangle, in whole
// vector groups), then the lower triangle is the mirror image (the same doubles, see above).
template <class T>
HostDoubles distance_table(const Dataset<T>& pool) {
  const std::size_t m = pool.n, d = pool.d, padded = (m + kLanes - 1) / kLanes * kLanes;
  std::vector<double> cc(d * padded, 0.0);
  for (std::size_t a = 0; a < m; ++a)
    for (std::size_t j = 0; j < d; ++j) cc[j * padded + a] = static_cast<double>(pool.row(a)[j]);
  HostDoubles table = uninitialised_doubles(m * m);
  const TableRows<T> rows = pick_by_isa<TableRows<T>>(table_rows_avx512<T>, table_rows_avx2<T>, table_rows_baseline<T>);
  constexpr std::size_t kRowBlock = 32;  // a multiple of kLanes
  const std::size_t blocks = (m + kRowBlock - 1) / kRowBlock;
  double* t = table.get();
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1)
    for (std::size_t b = 0; b < blocks; ++b)
      rows(pool, b * kRowBlock, std::min(m, (b + 1) * kRowBlock), b * kRowBlock, cc.data(), padded, t);
    // Below each block's first column: the mirror, tile by tile.
#pragma omp for schedule(dynamic, 1)
    for (std::size_t b = 1; b < blocks; ++b)
      for (std::size_t a = b * kRowBlock; a < std::min(m, (b + 1) * kRowBlock); ++a)
        for (std::size_t c = 0; c < b * kRowBlock; ++c) t[a * m + c] = t[c * m + a];
  }
  return table;
}

// k-means||'s reduction in tree order (init.hpp: reduce_weighted). Every sum over the m
// candidates is the pairwise sum of one perfect binary tree over them, padded with zeros to
// P = max(64 * 64, 2^ceil(log2 m)) leaves: a chunk's sum is its 64-leaf subtree (as
// chunk_tree_sum pairs them), the potential the tree of the chunk sums above (tree_heap), and
// a draw descends the same tree (descend), so the GPU's kernel can take every sum and walk in
// log2 steps of a warp where a sequential order made chains of thousands of dependent adds.
// (Adding the zero padding is exact: the values are not negative.)
std::size_t pow2_at_least(std::size_t n) {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// The sum of v[0..count) (count <= kReduceChunk) as the chunk's subtree: leaves padded with
// zeros to kReduceChunk, then node j of each level above = the sum of its children 2j and 2j + 1.
double chunk_tree_sum(const double* v, std::size_t count) {
  double a[kReduceChunk];
  for (std::size_t j = 0; j < kReduceChunk; ++j) a[j] = j < count ? v[j] : 0.0;
  for (std::size_t width = kReduceChunk / 2; width >= 1; width /= 2)
    for (std::size_t j = 0; j < width; ++j) a[j] = a[2 * j] + a[2 * j + 1];
  return a[0];
}

// The heap of a tree over `count` leaves padded to pow2 (a power of two, at least count):
// heap[pow2 + j] = leaf j (zero past count), heap[j] = heap[2j] + heap[2j + 1]; heap[1] is the sum.
void tree_heap(const double* leaves, std::size_t count, std::size_t pow2, std::vector<double>& heap) {
  heap.assign(2 * pow2, 0.0);
  std::copy_n(leaves, count, heap.begin() + static_cast<std::ptrdiff_t>(pow2));
  for (std::size_t j = pow2 - 1; j >= 1; --j) heap[j] = heap[2 * j] + heap[2 * j + 1];
}

// A draw's descent from the root: left where r is below the left child's sum, else right with
// r less it; returns the leaf (possibly one of the padding, which the caller clamps).
std::size_t descend(const double* heap, std::size_t pow2, double& r) {
  std::size_t node = 1;
  while (node < pow2) {
    const double left = heap[2 * node];
    if (r < left) {
      node = 2 * node;
    } else {
      r -= left;
      node = 2 * node + 1;
    }
  }
  return node - pow2;
}

// Greedy k-means++ (2 + ln K trials a step, the one that lowers the potential most, the first
// on ties) over m weighted candidates, in the tree order above. row(c, buffer) returns the m
// distances from candidate c to each candidate i, the CPU's (squared_distance_double's bits,
// either way round): a row of the table, or written into buffer (m doubles).
// Returns the picks; `potentials` as reduce_weighted's.
template <class Row>
std::vector<std::size_t> greedy_tree(std::size_t m, std::size_t k, std::uint64_t seed, const double* w, Row&& row,
                                     std::vector<double>* potentials) {
  Uniform u{seed, kParallelReduce};
  const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
  if (trials > kMaxPadded) throw UsageError(strprintf("--clusters=%zu: too many for k-means++ here", k));
  const std::size_t chunk = kReduceChunk, chunks = (m + chunk - 1) / chunk;
  const std::size_t top = std::max(kReduceChunk, pow2_at_least(chunks));  // the chunk sums' tree: 64 leaves at least
  std::vector<std::size_t> picks{u.below(m)};
  std::vector<double> closest(m), buffer(m), mins(trials * m), sums(trials * chunks), heap, best_heap;
  const double* dist = row(picks[0], buffer.data());
  for (std::size_t i = 0; i < m; ++i) closest[i] = w[i] * dist[i];
  for (std::size_t ch = 0; ch < chunks; ++ch)
    sums[ch] = chunk_tree_sum(&closest[ch * chunk], std::min(chunk, m - ch * chunk));
  tree_heap(sums.data(), chunks, top, best_heap);
  double potential = best_heap[1];
  if (potentials) potentials->assign(1, potential);
  std::vector<std::size_t> cands(trials);
  std::vector<double> chunk_heap;
  for (std::size_t c = 1; c < k; ++c) {
    progress::update("k-means|| reduction", static_cast<double>(c), static_cast<double>(k), "centres");
    for (std::size_t t = 0; t < trials; ++t) {
      if (potential <= 0) {  // every candidate sits on a chosen centre: duplicates are unavoidable
        cands[t] = u.below(m);
        continue;
      }
      double r = u() * potential;
      const std::size_t ch = std::min(descend(best_heap.data(), top, r), chunks - 1);
      const std::size_t begin = ch * chunk, count = std::min(chunk, m - begin);
      tree_heap(&closest[begin], count, chunk, chunk_heap);
      std::size_t cand = begin + std::min(descend(chunk_heap.data(), chunk, r), count - 1);
      // Rounding must not land on a candidate that already is a centre: on to the next one that is not.
      while (closest[cand] == 0) cand = (cand + 1) % m;
      cands[t] = cand;
    }
    for (std::size_t t = 0; t < trials; ++t) {
      dist = row(cands[t], buffer.data());
      double* mt = &mins[t * m];
      for (std::size_t i = 0; i < m; ++i) mt[i] = std::min(closest[i], w[i] * dist[i]);
      for (std::size_t ch = 0; ch < chunks; ++ch)
        sums[t * chunks + ch] = chunk_tree_sum(mt + ch * chunk, std::min(chunk, m - ch * chunk));
    }
    std::size_t best = 0;
    double best_potential = INFINITY;
    for (std::size_t t = 0; t < trials; ++t) {
      tree_heap(&sums[t * chunks], chunks, top, heap);
      if (heap[1] < best_potential) {
        best_potential = heap[1];
        best = t;
        best_heap.swap(heap);
      }
    }
    if (!(best_potential < INFINITY)) tree_heap(&sums[0], chunks, top, best_heap);  // (no potential below +inf)
    picks.push_back(cands[best]);
    std::copy_n(&mins[best * m], m, closest.begin());
    potential = best_heap[1];
    if (potentials) potentials->insert(potentials->end(), {best_potential, potential});
  }
  return picks;
}

// k-means||'s steps on the CPU: OpenMP over objects. Over a team, each rank holds its rows'
// closest and nearest; the draws and the chunk sums are gathered in rank order (index order),
// the counts summed (integers: any order). With sample weights (the only steps that take them)
// each object's share of the potential and its chance to be drawn are w times its squared
// distance, and a candidate weighs its nearest objects' weights (fixed point: any order).
template <class T>
class CpuParallel final : public ParallelSteps {
 public:
  // skip_zero: rows of length 0 get closest 0 and nearest -1, so they are never drawn and weigh
  // for no candidate (init_detail.hpp: skips_zero_rows).
  CpuParallel(const Dataset<T>& local, const RowSplit& split, Team& team, bool skip_zero)
      : data_(local), split_(split), team_(team), skip_zero_(skip_zero), closest_(local.n), nearest_(local.n) {}

  void start(std::size_t first, std::vector<double>& chunk_sums) override {
    const std::vector<T> centre = fetch_rows(data_, split_, team_, {first});
    std::fill(nearest_.begin(), nearest_.end(), 0);
    std::vector<double> mine;
    chunked_sum(
        data_.n, mine,
        [&](std::size_t i) {
          const bool skipped = skip_zero_ && init_detail::zero_row(data_.row(i), data_.d);
          closest_[i] = skipped ? 0.0 : squared_distance_double(data_.row(i), centre.data(), data_.d);
          if (skipped) nearest_[i] = -1;
          return share(i);
        },
        kParallelChunk);
    chunk_sums = gather_all(team_, mine);
  }

  std::vector<std::size_t> draw(std::uint64_t seed, int round, double ell, double potential) override {
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < data_.n; ++i)
      if (parallel_drawn(seed, round, split_.total, split_.first + i, share(i), ell, potential))
        mine.push_back(split_.first + i);
    return gather_all(team_, mine);
  }

  void add(const std::vector<std::size_t>& cands, std::size_t first, std::vector<double>& chunk_sums) override {
    const std::size_t d = data_.d, m = cands.size();
    const std::vector<T> rows = fetch_rows(data_, split_, team_, cands);
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < data_.n; ++i) {
      if (progress::interrupt_requested()) continue;  // an interruption skips the rest (progress.hpp)
      for (std::size_t t = 0; t < m; ++t) {
        const double a = squared_distance_double(data_.row(i), rows.data() + t * d, d);
        if (a < closest_[i]) {  // strictly: the earlier candidate keeps a tie
          closest_[i] = a;
          nearest_[i] = static_cast<std::int64_t>(first + t);
        }
      }
    }
    progress::check_interrupt();
    std::vector<double> mine;
    chunked_sum(data_.n, mine, [&](std::size_t i) { return share(i); }, kParallelChunk);
    chunk_sums = gather_all(team_, mine);
  }

  std::vector<std::int64_t> weigh(std::size_t candidates) override {
    std::vector<std::int64_t> mine(candidates, 0);
    if (data_.weighted()) {  // each weight at the whole data's one scale
      double largest = check_weights(data_).max;
      team_.max(&largest, 1);
      const double scale = fixed_scales(1.0, split_.total, 1, 0, largest, largest).weight;
      for (std::size_t i = 0; i < data_.n; ++i)
        if (nearest_[i] >= 0)
          mine[static_cast<std::size_t>(nearest_[i])] += to_fixed(static_cast<double>(data_.weights[i]), scale);
    } else {
      for (std::int64_t t : nearest_)
        if (t >= 0) ++mine[static_cast<std::size_t>(t)];
    }
    const std::vector<std::int64_t> all = gather_all(team_, mine);
    std::vector<std::int64_t> counts(candidates, 0);
    for (std::size_t q = 0; q < all.size(); ++q) counts[q % candidates] += all[q];
    return counts;
  }

 private:
  // Object i's share of the potential: its squared distance, times its weight where there are weights.
  double share(std::size_t i) const { return static_cast<double>(data_.weight(i)) * closest_[i]; }

  const Dataset<T>& data_;
  const RowSplit split_;
  Team& team_;
  const bool skip_zero_;
  std::vector<double> closest_;
  std::vector<std::int64_t> nearest_;
};

// k-means|| (init.hpp). fetch(rows, into) puts those objects' rows into `into`, in that order (on
// every rank, collectively).
template <class T, class Fetch>
void pick_kmeans_parallel(std::size_t n, std::size_t d, std::size_t k, const Params& params, ParallelSteps& steps,
                          std::vector<T>& out, Fetch&& fetch) {
  const bool verbose = parallel_verbose();
  const auto began = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(); };
  std::future<std::vector<T>> touched = touched_async<T>(k * d);  // the centres' room
  auto fetch_out = [&](const std::vector<std::size_t>& rows) {
    if (touched.valid()) out = touched.get();
    fetch(rows, out);
  };
  Uniform u{params.seed, kParallel};
  const bool skip_zero = init_detail::skips_zero_rows(params);  // (cosine, dot: draw_nonzero_row)
  std::vector<T> row;
  std::vector<std::size_t> cands{skip_zero ? init_detail::draw_nonzero_row(n, d, u, {}, fetch, row) : u.below(n)};
  if (cands[0] == n) init_detail::no_direction("kmeans||");
  std::vector<double> chunk_sums;
  steps.start(cands[0], chunk_sums);
  auto total = [](const std::vector<double>& sums) {  // in chunk order
    double p = 0;
    for (double s : sums) p += s;
    return p;
  };
  double potential = total(chunk_sums);
  const double ell = params.oversampling * static_cast<double>(k);
  // At least init_rounds rounds, and on while fewer than K candidates (a round draws about ell),
  // up to kMaxInitRounds; none once every object sits on a candidate.
  for (int round = 0; round < kMaxInitRounds && potential > 0 && (round < params.init_rounds || cands.size() < k);
       ++round) {
    progress::update("k-means||", round, std::max(params.init_rounds, round + 1), "rounds");
    const double t0 = since();
    const std::vector<std::size_t> drawn = steps.draw(params.seed, round, ell, potential);
    const double t1 = since();
    if (drawn.empty()) continue;
    steps.add(drawn, cands.size(), chunk_sums);
    if (verbose)
      std::fprintf(stderr, "k-means||: round %d drew %zu in %.4f s, added them in %.4f s\n", round, drawn.size(),
                   t1 - t0, since() - t1);
    cands.insert(cands.end(), drawn.begin(), drawn.end());
    potential = total(chunk_sums);
  }
  if (cands.size() <= k) {
    // Every candidate is a centre. Fewer than K only when every object sits on one (fewer distinct
    // objects than K: duplicates are unavoidable, as in k-means++) or the rounds ran out.
    while (cands.size() < k) cands.push_back(init_detail::draw_duplicate(n, d, u, skip_zero, cands, fetch, row));
    fetch_out(cands);
    return;
  }
  // Weigh each candidate by the objects nearest it, then greedy k-means++ on the weighted
  // candidates (reduce_weighted).
  if (verbose) std::fprintf(stderr, "k-means||: %zu candidates after the rounds, %.4f s\n", cands.size(), since());
  const std::vector<std::int64_t> counts = steps.weigh(cands.size());
  std::vector<double> weights(counts.begin(), counts.end());
  // Through the distance table when it takes at most 1 GiB (m <= 11,585; m is about
  // oversampling * K * rounds, so K up to ~4,600 at the defaults). Without it each of the K steps
  // recomputes 2 + ln K candidates' distances to every candidate: at 1M x 128, K = 1024 that was
  // 0.065 s of the H100 box's 16 cores.
  constexpr std::size_t kTableBytes = std::size_t{1} << 30;
  const std::size_t m = cands.size();
  const bool table = m <= kTableBytes / sizeof(double) / m;
  if (table) {  // on the device, where the steps offer it: the same picks, only the K rows fetched
    const std::vector<std::size_t> picks = steps.reduce(cands, weights, k, params.seed, kParallelReduce);
    if (!picks.empty()) {
      std::vector<std::size_t> rows(k);
      for (std::size_t c = 0; c < k; ++c) rows[c] = cands[picks[c]];
      fetch_out(rows);
      if (verbose) std::fprintf(stderr, "k-means||: reduced to %zu centres on the GPU, %.4f s in all\n", k, since());
      return;
    }
  }
  Dataset<T> pool(m, d, "k-means|| candidates");
  std::vector<T> rows;
  fetch(cands, rows);
  std::copy(rows.begin(), rows.end(), pool.values.data());
  out = reduce_weighted(pool, weights, k, params.seed, table);
  if (verbose) std::fprintf(stderr, "k-means||: reduced to %zu centres, %.4f s in all\n", k, since());
}

}  // namespace

template <class T>
std::vector<T> reduce_weighted(const Dataset<T>& pool, const std::vector<double>& weights, std::size_t k,
                               std::uint64_t seed, bool table, std::vector<double>* potentials) {
  const bool verbose = parallel_verbose();
  const auto began = std::chrono::steady_clock::now();
  const std::size_t m = pool.n, d = pool.d;
  std::vector<std::size_t> picks;
  if (table) {
    const HostDoubles t = distance_table(pool);
    if (verbose)
      std::fprintf(stderr, "k-means||: the reduction's distance table, %.4f s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    picks = greedy_tree(
        m, k, seed, weights.data(), [&](std::size_t c, double*) -> const double* { return t.get() + c * m; },
        potentials);
  } else {
    picks = greedy_tree(
        m, k, seed, weights.data(),
        [&](std::size_t c, double* out) -> const double* {
#pragma omp parallel for schedule(static) if (m * d >= (std::size_t{1} << 16))
          for (std::size_t i = 0; i < m; ++i) out[i] = squared_distance_double(pool.row(i), pool.row(c), d);
          return out;
        },
        potentials);
  }
  std::vector<T> out(k * d);
  for (std::size_t c = 0; c < k; ++c) std::copy_n(pool.row(picks[c]), d, out.begin() + static_cast<std::ptrdiff_t>(c * d));
  return out;
}

template std::vector<float> reduce_weighted(const Dataset<float>&, const std::vector<double>&, std::size_t,
                                            std::uint64_t, bool, std::vector<double>*);
template std::vector<double> reduce_weighted(const Dataset<double>&, const std::vector<double>&, std::size_t,
                                             std::uint64_t, bool, std::vector<double>*);

namespace init_detail {

template <class T>
std::vector<T> kmeans_parallel_centres(const Dataset<T>& local, const RowSplit& split, Team& team,
                                       const Params& params, bool on_gpu, const T* device_rows,
                                       const CentredRows* centred, std::chrono::steady_clock::time_point entered) {
  const std::size_t n = split.total, d = local.d;
  const auto k = static_cast<std::size_t>(params.k);
  // Sized only where it is filled in place: zeroing K x d values up front (1 MB at K = 1024,
  // d = 128 in double, fresh pages) cost ~1 ms of k-means||'s init on the H100 box.
  std::vector<T> out;
  std::unique_ptr<ParallelSteps> steps;
  const auto began = std::chrono::steady_clock::now();
  if (parallel_verbose())
    std::fprintf(stderr, "k-means||: the steps begin %.4f s after the init's call\n",
                 std::chrono::duration<double>(began - entered).count());
  if (on_gpu && team.size() == 1 && !local.weighted())
    steps = gpu_parallel_steps(local, device_rows ? device_rows : local.device_values, centred, params.gpu_init,
                               skips_zero_rows(params));  // (data on the device: read there)
  else
    steps = std::make_unique<CpuParallel<T>>(local, split, team, skips_zero_rows(params));
  if (parallel_verbose())
    std::fprintf(stderr, "k-means||: steps ready in %.4f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  pick_kmeans_parallel(n, d, k, params, *steps, out, [&](const std::vector<std::size_t>& rows, std::vector<T>& into) {
    fetch_rows_into(local, split, team, rows, into);
  });
  steps.reset();
  if (parallel_verbose())
    std::fprintf(stderr, "k-means||: the steps' buffers freed, %.4f s since the steps began\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  progress::end_stage();
  return out;
}

template std::vector<float> kmeans_parallel_centres(const Dataset<float>&, const RowSplit&, Team&, const Params&,
                                                    bool, const float*, const CentredRows*,
                                                    std::chrono::steady_clock::time_point);
template std::vector<double> kmeans_parallel_centres(const Dataset<double>&, const RowSplit&, Team&, const Params&,
                                                     bool, const double*, const CentredRows*,
                                                     std::chrono::steady_clock::time_point);

}  // namespace init_detail

}  // namespace km
