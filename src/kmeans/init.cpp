#include "kmeans/init.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <future>
#include <system_error>
#include <unordered_set>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "io/generate.hpp"
#include "kmeans/cpu_steps.hpp"
#include "dist/team.hpp"

namespace km {

namespace {

// (23 is parallel_drawn's, init.hpp.)
enum Stream : std::uint64_t { kRandomPick = 20, kPlusPlus = 21, kParallel = 22, kParallelReduce = 24 };

// Seeded sequence of uniform doubles in [0, 1).
struct Uniform {
  std::uint64_t seed, stream, counter = 0;
  double operator()() { return unit_double(hash64(seed, stream, counter++)); }
  std::size_t below(std::size_t n) { return std::min(n - 1, static_cast<std::size_t>((*this)() * n)); }
};

// k distinct indices below n, seeded: Floyd's algorithm, without an N-sized array.
std::vector<std::size_t> random_rows(std::size_t n, std::size_t k, std::uint64_t seed) {
  Uniform u{seed, kRandomPick};
  std::unordered_set<std::size_t> chosen;
  std::vector<std::size_t> order;
  for (std::size_t j = n - k; j < n; ++j) {
    std::size_t t = u.below(j + 1);
    if (chosen.insert(t).second) {
      order.push_back(t);
    } else {
      chosen.insert(j);
      order.push_back(j);
    }
  }
  return order;
}

// Rows of the whole data by index, in the order asked, on every rank: each rank sends the
// rows it holds (in that order), and every rank knows which rank holds which index.
// Into `out` (resized: kept where it has the size already).
template <class T>
void fetch_rows_into(const Dataset<T>& local, const RowSplit& split, Team& team, const std::vector<std::size_t>& rows,
                     std::vector<T>& out) {
  const std::size_t d = local.d;
  out.resize(rows.size() * d);
  if (team.size() == 1) {
    for (std::size_t q = 0; q < rows.size(); ++q) std::copy_n(local.row(rows[q] - split.first), d, out.begin() + q * d);
    return;
  }
  std::vector<T> mine;
  for (std::size_t row : rows)
    if (split.owns(row)) mine.insert(mine.end(), local.row(row - split.first), local.row(row - split.first) + d);
  const std::vector<T> all = gather_all(team, mine);
  std::size_t at = 0;
  for (int r = 0; r < team.size(); ++r) {
    const RowSplit theirs = split_rows(split.total, r, team.size());
    for (std::size_t q = 0; q < rows.size(); ++q)
      if (theirs.owns(rows[q])) {
        std::copy_n(all.begin() + at, d, out.begin() + q * d);
        at += d;
      }
  }
}

template <class T>
std::vector<T> fetch_rows(const Dataset<T>& local, const RowSplit& split, Team& team,
                          const std::vector<std::size_t>& rows) {
  std::vector<T> out;
  fetch_rows_into(local, split, team, rows, out);
  return out;
}

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

constexpr std::size_t kLanes = 8, kMaxPadded = 64;  // 2 + ln K candidates: 12 at K = 65536
typedef double Lanes __attribute__((vector_size(kLanes * sizeof(double))));

// Distances (in double, each summed over j in order) from rows of d coordinates to the kLanes
// candidates of one column group of cc ([d][padded], already offset to the group), as vector
// lanes: elementwise arithmetic rounds as the scalar code does. Four rows at a time keep four
// independent add chains in flight (one chain runs at the adder's latency).
template <class T>
[[gnu::always_inline]] inline void lane_distances4(const T* x0, std::size_t d, const double* cc, std::size_t padded,
                                                   Lanes (&a)[4]) {
  const T *x1 = x0 + d, *x2 = x1 + d, *x3 = x2 + d;
  Lanes a0{}, a1{}, a2{}, a3{};
  for (std::size_t j = 0; j < d; ++j) {
    Lanes c;
    std::memcpy(&c, cc + j * padded, sizeof c);
    const Lanes e0 = static_cast<double>(x0[j]) - c, e1 = static_cast<double>(x1[j]) - c;
    const Lanes e2 = static_cast<double>(x2[j]) - c, e3 = static_cast<double>(x3[j]) - c;
    a0 += e0 * e0;
    a1 += e1 * e1;
    a2 += e2 * e2;
    a3 += e3 * e3;
  }
  a[0] = a0;
  a[1] = a1;
  a[2] = a2;
  a[3] = a3;
}
template <class T>
[[gnu::always_inline]] inline void lane_distances(const T* x, std::size_t d, const double* cc, std::size_t padded,
                                                  Lanes& acc) {  // (by reference: no vector-returning ABI)
  acc = Lanes{};
  for (std::size_t j = 0; j < d; ++j) {
    Lanes c;
    std::memcpy(&c, cc + j * padded, sizeof c);
    const Lanes e = static_cast<double>(x[j]) - c;
    acc += e * e;
  }
}

// The candidates' chunk sums over objects [begin, end): s[t] += min(closest[i], distance from
// object i to candidate t), the distances (in double, summed over j in order) taken from cc
// ([d][padded]) as vector lanes. Built for AVX-512, AVX2 and baseline x86-64, chosen at run time.
template <class T>
[[gnu::always_inline]] inline void candidate_sums_impl(const Dataset<T>& data, std::size_t begin, std::size_t end,
                                                       const double* closest, const double* cc,
                                                       std::size_t padded, std::size_t trials, double* s) {
  const std::size_t d = data.d;
  auto add = [&](std::size_t i, std::size_t g, const Lanes& acc) {
    for (std::size_t l = 0; l < kLanes && g + l < trials; ++l)
      s[g + l] += std::min(closest[i], acc[l]);
  };
  std::size_t i = begin;
  // Four objects at a time; each candidate's sum still takes the objects in order.
  for (; i + 4 <= end; i += 4)
    for (std::size_t g = 0; g < padded; g += kLanes) {
      Lanes a[4];
      lane_distances4(data.row(i), d, cc + g, padded, a);
      for (std::size_t r = 0; r < 4; ++r) add(i + r, g, a[r]);
    }
  for (; i < end; ++i)
    for (std::size_t g = 0; g < padded; g += kLanes) {
      Lanes a;
      lane_distances(data.row(i), d, cc + g, padded, a);
      add(i, g, a);
    }
}

template <class T>
using CandidateSums = void (*)(const Dataset<T>&, std::size_t, std::size_t, const double*, const double*,
                               std::size_t, std::size_t, double*);
// The vector-width variants' function attributes (GCC on x86-64 only; elsewhere all three
// variants are the baseline).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KM_TARGET_AVX2 __attribute__((target("avx2")))
#define KM_TARGET_AVX512 __attribute__((target("avx512f")))
#else
#define KM_TARGET_AVX2
#define KM_TARGET_AVX512
#endif
#define KM_CANDIDATE_VARIANT(NAME, ATTR)                                                                             \
  template <class T>                                                                                                  \
  ATTR void NAME(const Dataset<T>& data, std::size_t begin, std::size_t end, const double* closest,                  \
                 const double* cc, std::size_t padded, std::size_t trials, double* s) {                               \
    candidate_sums_impl<T>(data, begin, end, closest, cc, padded, trials, s);                                         \
  }
KM_CANDIDATE_VARIANT(candidate_sums_baseline, )
KM_CANDIDATE_VARIANT(candidate_sums_avx2, KM_TARGET_AVX2)
KM_CANDIDATE_VARIANT(candidate_sums_avx512, KM_TARGET_AVX512)
#undef KM_CANDIDATE_VARIANT

// closest[i] = min(closest[i], distance from object i to centre) for i in [begin, end); returns
// their sum in object order. Four objects at a time keep
// four independent add chains in flight; each distance is still summed over j in order.
template <class T>
double update_closest(const Dataset<T>& data, std::size_t begin, std::size_t end, const double* centre,
                      double* closest) {
  const std::size_t d = data.d;
  double s = 0;
  std::size_t i = begin;
  for (; i + 4 <= end; i += 4) {
    const T *x0 = data.row(i), *x1 = x0 + d, *x2 = x1 + d, *x3 = x2 + d;
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (std::size_t j = 0; j < d; ++j) {
      const double c = centre[j];
      const double e0 = static_cast<double>(x0[j]) - c, e1 = static_cast<double>(x1[j]) - c;
      const double e2 = static_cast<double>(x2[j]) - c, e3 = static_cast<double>(x3[j]) - c;
      a0 += e0 * e0;
      a1 += e1 * e1;
      a2 += e2 * e2;
      a3 += e3 * e3;
    }
    s += closest[i] = std::min(closest[i], a0);
    s += closest[i + 1] = std::min(closest[i + 1], a1);
    s += closest[i + 2] = std::min(closest[i + 2], a2);
    s += closest[i + 3] = std::min(closest[i + 3], a3);
  }
  for (; i < end; ++i) {
    double a = 0;
    for (std::size_t j = 0; j < d; ++j) {
      const double e = static_cast<double>(data.row(i)[j]) - centre[j];
      a += e * e;
    }
    s += closest[i] = std::min(closest[i], a);
  }
  return s;
}

template <class T>
CandidateSums<T> pick_candidate_sums() {
  return pick_by_isa<CandidateSums<T>>(candidate_sums_avx512<T>, candidate_sums_avx2<T>, candidate_sums_baseline<T>);
}

}  // namespace

namespace {
std::atomic<bool> g_parallel_verbose{false};
}  // namespace

bool parallel_verbose() { return g_parallel_verbose.load(std::memory_order_relaxed); }
void set_parallel_verbose(bool on) { g_parallel_verbose.store(on, std::memory_order_relaxed); }

// The walk of one draw (init.hpp: PlusPlusSteps::Draw) over closest[n].
std::size_t walk_chunk(const double* closest, std::size_t n, std::size_t chunk, double r, std::size_t chunk_size) {
  const std::size_t begin = chunk * chunk_size, end = std::min(n, begin + chunk_size);
  std::size_t cand = end - 1;
  for (std::size_t i = begin; i < end; ++i) {
    if (r < closest[i]) {
      cand = i;
      break;
    }
    r -= closest[i];
  }
  // Rounding must not land on an object that already is a centre: move to the next object
  // that is not (one exists, since the potential is positive).
  while (closest[cand] == 0) cand = (cand + 1) % n;
  return cand;
}

namespace {

// The CPU's steps: OpenMP over chunks, vector lanes for the candidates. Over a team, each
// rank holds its rows' closest distances and sums its own chunks (whole chunks: split_rows);
// the chunk sums are gathered in rank order, which is chunk order, so every rank sees the
// single process's sums and makes the same choices.
template <class T>
class CpuPlusPlus final : public PlusPlusSteps {
 public:
  CpuPlusPlus(const Dataset<T>& local, const RowSplit& split, Team& team)
      : data_(local), split_(split), team_(team), closest_(local.n) {}

  void start(std::size_t first, std::vector<double>& chunk_sums) override {
    const std::vector<T> centre = fetch_rows(data_, split_, team_, {first});
    std::vector<double> mine;
    chunked_sum(
        data_.n, mine,
        [&](std::size_t i) {
          return closest_[i] = squared_distance_double(data_.row(i), centre.data(), data_.d);
        });
    chunk_sums = gather_all(team_, mine);
  }

  void walk(std::vector<Draw>& draws) override {
    if (team_.size() == 1) {
      for (Draw& w : draws) w.cand = walk_chunk(closest_.data(), data_.n, w.chunk, w.r);
      return;
    }
    // The rank holding each draw's chunk walks it (walk_chunk's first loop); then, as there,
    // on past objects already at a centre, cyclically over the whole data: each rank offers
    // the cyclic distance to its first such object, and the nearest wins.
    const std::size_t n = split_.total, first_chunk = split_.first / kSumChunk;
    const std::size_t chunks = (data_.n + kSumChunk - 1) / kSumChunk;
    std::vector<std::uint64_t> cand(draws.size(), UINT64_MAX);
    for (std::size_t q = 0; q < draws.size(); ++q) {
      const Draw& w = draws[q];
      if (w.chunk < first_chunk || w.chunk >= first_chunk + chunks) continue;
      const std::size_t begin = (w.chunk - first_chunk) * kSumChunk, end = std::min(data_.n, begin + kSumChunk);
      std::size_t c = end - 1;
      double r = w.r;
      for (std::size_t i = begin; i < end; ++i) {
        if (r < closest_[i]) {
          c = i;
          break;
        }
        r -= closest_[i];
      }
      cand[q] = split_.first + c;
    }
    team_.min(cand.data(), cand.size());
    std::vector<std::uint64_t> step(draws.size(), UINT64_MAX);
    for (std::size_t q = 0; q < draws.size(); ++q) {
      const std::size_t c = cand[q];
      auto offer = [&](std::size_t local) {
        const std::size_t global = split_.first + local;
        step[q] = std::min<std::uint64_t>(step[q], global >= c ? global - c : global + n - c);
      };
      std::size_t i = c > split_.first ? std::min(c - split_.first, data_.n) : 0;
      while (i < data_.n && closest_[i] == 0) ++i;
      if (i < data_.n) offer(i);
      if (c > split_.first) {  // wrapping round to this rank's start
        std::size_t w = 0;
        while (w < data_.n && closest_[w] == 0) ++w;
        if (w < data_.n) offer(w);
      }
    }
    team_.min(step.data(), step.size());
    for (std::size_t q = 0; q < draws.size(); ++q) draws[q].cand = (cand[q] + step[q]) % n;
  }

  void candidate_sums(const std::vector<std::size_t>& cands, std::vector<double>& out) override {
    // The candidates' coordinates, in double, coordinate-major [d][padded]: one object's
    // distances to kLanes candidates run as the lanes of a vector, each still summed over the
    // coordinates in order (element-wise arithmetic rounds as the scalar code does).
    const std::size_t n = data_.n, d = data_.d, trials = cands.size();
    const std::size_t padded = (trials + kLanes - 1) / kLanes * kLanes;
    const std::vector<T> rows = fetch_rows(data_, split_, team_, cands);
    coords_.assign(d * padded, 0.0);
    for (std::size_t t = 0; t < trials; ++t)
      for (std::size_t j = 0; j < d; ++j) coords_[j * padded + t] = static_cast<double>(rows[t * d + j]);
    const std::size_t chunks = (n + kSumChunk - 1) / kSumChunk;
    std::vector<double> mine(chunks * trials, 0.0);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t ch = 0; ch < chunks; ++ch)
      sums_(data_, ch * kSumChunk, std::min(n, (ch + 1) * kSumChunk), closest_.data(), coords_.data(), padded, trials,
            &mine[ch * trials]);
    out = gather_all(team_, mine);
  }

  void choose(std::size_t centre_index, std::vector<double>& chunk_sums) override {
    const std::size_t n = data_.n, d = data_.d;
    const std::vector<T> row = fetch_rows(data_, split_, team_, {centre_index});
    std::vector<double> centre(d);
    for (std::size_t j = 0; j < d; ++j) centre[j] = static_cast<double>(row[j]);
    const std::size_t chunks = (n + kSumChunk - 1) / kSumChunk;
    std::vector<double> mine(chunks, 0.0);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t ch = 0; ch < chunks; ++ch)
      mine[ch] = update_closest(data_, ch * kSumChunk, std::min(n, (ch + 1) * kSumChunk), centre.data(),
                                closest_.data());
    chunk_sums = gather_all(team_, mine);
  }

 private:
  const Dataset<T>& data_;
  const RowSplit split_;
  Team& team_;
  std::vector<double> closest_, coords_;
  const CandidateSums<T> sums_ = pick_candidate_sums<T>();
};

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
#undef KM_TARGET_AVX2
#undef KM_TARGET_AVX512

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
// the counts summed (integers: any order).
template <class T>
class CpuParallel final : public ParallelSteps {
 public:
  CpuParallel(const Dataset<T>& local, const RowSplit& split, Team& team)
      : data_(local), split_(split), team_(team), closest_(local.n), nearest_(local.n) {}

  void start(std::size_t first, std::vector<double>& chunk_sums) override {
    const std::vector<T> centre = fetch_rows(data_, split_, team_, {first});
    std::fill(nearest_.begin(), nearest_.end(), 0);
    std::vector<double> mine;
    chunked_sum(
        data_.n, mine,
        [&](std::size_t i) { return closest_[i] = squared_distance_double(data_.row(i), centre.data(), data_.d); },
        kParallelChunk);
    chunk_sums = gather_all(team_, mine);
  }

  std::vector<std::size_t> draw(std::uint64_t seed, int round, double ell, double potential) override {
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < data_.n; ++i)
      if (parallel_drawn(seed, round, split_.total, split_.first + i, closest_[i], ell, potential))
        mine.push_back(split_.first + i);
    return gather_all(team_, mine);
  }

  void add(const std::vector<std::size_t>& cands, std::size_t first, std::vector<double>& chunk_sums) override {
    const std::size_t d = data_.d, m = cands.size();
    const std::vector<T> rows = fetch_rows(data_, split_, team_, cands);
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < data_.n; ++i)
      for (std::size_t t = 0; t < m; ++t) {
        const double a = squared_distance_double(data_.row(i), rows.data() + t * d, d);
        if (a < closest_[i]) {  // strictly: the earlier candidate keeps a tie
          closest_[i] = a;
          nearest_[i] = static_cast<std::int64_t>(first + t);
        }
      }
    std::vector<double> mine;
    chunked_sum(data_.n, mine, [&](std::size_t i) { return closest_[i]; }, kParallelChunk);
    chunk_sums = gather_all(team_, mine);
  }

  std::vector<std::int64_t> weigh(std::size_t candidates) override {
    std::vector<std::int64_t> mine(candidates, 0);
    for (std::int64_t t : nearest_) ++mine[static_cast<std::size_t>(t)];
    const std::vector<std::int64_t> all = gather_all(team_, mine);
    std::vector<std::int64_t> counts(candidates, 0);
    for (std::size_t q = 0; q < all.size(); ++q) counts[q % candidates] += all[q];
    return counts;
  }

 private:
  const Dataset<T>& data_;
  const RowSplit split_;
  Team& team_;
  std::vector<double> closest_;
  std::vector<std::int64_t> nearest_;
};

// fetch(index, out): copies that object's row to out (on every rank, collectively).
template <class T, class Fetch>
void pick_kmeanspp(std::size_t n, std::size_t d, std::size_t k, std::uint64_t seed, PlusPlusSteps& steps,
                   std::vector<T>& out, Fetch&& fetch) {
  Uniform u{seed, kPlusPlus};
  const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
  if (trials > kMaxPadded) throw UsageError(strprintf("--clusters=%zu: too many for k-means++ here", k));

  std::size_t first = u.below(n);
  fetch(first, out.data());
  std::vector<double> chunk_sums, candidate_sums;  // [chunk], [chunk][candidate]
  steps.start(first, chunk_sums);
  auto total = [](const std::vector<double>& sums) {  // in chunk order
    double p = 0;
    for (double s : sums) p += s;
    return p;
  };
  double potential = total(chunk_sums);

  std::vector<std::size_t> candidates(trials);
  std::vector<PlusPlusSteps::Draw> draws;
  for (std::size_t c = 1; c < k; ++c) {
    progress::update("k-means++", static_cast<double>(c), static_cast<double>(k), "centres");
    // Draw candidates with probability proportional to the squared distance: the chunk here,
    // the object within it by the steps' walk.
    if (potential <= 0) {  // every object sits on a chosen centre: duplicates are unavoidable
      for (auto& cand : candidates) cand = u.below(n);
    } else {
      draws.resize(trials);
      for (auto& w : draws) {
        w.r = u() * potential;
        w.chunk = 0;
        while (w.chunk + 1 < chunk_sums.size() && w.r >= chunk_sums[w.chunk]) w.r -= chunk_sums[w.chunk++];
      }
      steps.walk(draws);
      for (std::size_t t = 0; t < trials; ++t) candidates[t] = draws[t].cand;
    }
    // Keep the candidate that lowers the potential most (first one on ties). Every
    // candidate's potential comes from one pass over the data (each object read once for all
    // of them); each chunk's sums run in object order and the chunks add up in order, so the
    // potentials are the bits that one chunked_sum per candidate gives.
    steps.candidate_sums(candidates, candidate_sums);
    const std::size_t chunks = chunk_sums.size();
    std::size_t best = candidates[0];
    double best_potential = INFINITY;
    for (std::size_t t = 0; t < trials; ++t) {
      double p = 0;
      for (std::size_t ch = 0; ch < chunks; ++ch) p += candidate_sums[ch * trials + t];
      if (p < best_potential) {
        best_potential = p;
        best = candidates[t];
      }
    }
    fetch(best, out.data() + c * d);
    steps.choose(best, chunk_sums);
    potential = total(chunk_sums);
  }
}

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
  std::vector<std::size_t> cands{u.below(n)};
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
    progress::update("k-means||", static_cast<double>(round), static_cast<double>(params.init_rounds), "rounds");
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
    while (cands.size() < k) cands.push_back(u.below(n));
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

template <class T>
std::vector<T> initial_centroids(const Dataset<T>& data, const Params& params, bool on_gpu, const T* device_rows,
                                 const CentredRows* centred) {
  return initial_centroids(data, RowSplit{0, data.n, data.n}, solo_team(), params, on_gpu, device_rows, centred);
}

template <class T>
std::vector<T> initial_centroids(const Dataset<T>& local, const RowSplit& split, Team& team, const Params& params,
                                 bool on_gpu, const T* device_rows, const CentredRows* centred) {
  const auto entered = std::chrono::steady_clock::now();
  const std::size_t n = split.total, d = local.d;
  // Given centroids may outnumber the objects (predict labels a single object with K of them).
  if (params.init != Init::given) check_clusters(params.k, n);
  const auto k = static_cast<std::size_t>(params.k);
  // Sized only where it is filled in place: zeroing K x d values up front (1 MB at K = 1024,
  // d = 128 in double, fresh pages) cost ~1 ms of k-means||'s init on the H100 box.
  std::vector<T> out;
  switch (params.init) {
    case Init::first:
    case Init::random: {
      std::vector<std::size_t> rows(k);
      if (params.init == Init::first)
        for (std::size_t c = 0; c < k; ++c) rows[c] = c;
      else
        rows = random_rows(n, k, params.seed);
      out = fetch_rows(local, split, team, rows);
      break;
    }
    case Init::kmeanspp: {
      out.resize(k * d);
      const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
      std::unique_ptr<PlusPlusSteps> steps;
      if (on_gpu && team.size() == 1)
        steps = gpu_plusplus_steps(local, trials, device_rows);
      else
        steps = std::make_unique<CpuPlusPlus<T>>(local, split, team);
      pick_kmeanspp(n, d, k, params.seed, *steps, out, [&](std::size_t row, T* to) {
        const std::vector<T> r = fetch_rows(local, split, team, {row});
        std::copy_n(r.begin(), d, to);
      });
      progress::end_stage();
      break;
    }
    case Init::kmeans_parallel: {
      std::unique_ptr<ParallelSteps> steps;
      const auto began = std::chrono::steady_clock::now();
      if (parallel_verbose())
        std::fprintf(stderr, "k-means||: the steps begin %.4f s after the init's call\n",
                     std::chrono::duration<double>(began - entered).count());
      if (on_gpu && team.size() == 1)
        steps = gpu_parallel_steps(local, device_rows, centred, params.gpu_init);
      else
        steps = std::make_unique<CpuParallel<T>>(local, split, team);
      if (parallel_verbose())
        std::fprintf(stderr, "k-means||: steps ready in %.4f s\n",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
      pick_kmeans_parallel(n, d, k, params, *steps, out,
                           [&](const std::vector<std::size_t>& rows, std::vector<T>& into) {
                             fetch_rows_into(local, split, team, rows, into);
                           });
      steps.reset();
      if (parallel_verbose())
        std::fprintf(stderr, "k-means||: the steps' buffers freed, %.4f s since the steps began\n",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
      progress::end_stage();
      break;
    }
    case Init::given:
      if (params.given_d != d)
        throw UsageError(strprintf("the centroids have %zu coordinates but the data has %zu", params.given_d, d));
      out.resize(k * d);
      for (std::size_t i = 0; i < k * d; ++i) out[i] = static_cast<T>(params.given_centroids[i]);
      break;
  }
  return out;
}

template std::vector<float> initial_centroids(const Dataset<float>&, const Params&, bool, const float*,
                                              const CentredRows*);
template std::vector<double> initial_centroids(const Dataset<double>&, const Params&, bool, const double*,
                                               const CentredRows*);
template std::vector<float> initial_centroids(const Dataset<float>&, const RowSplit&, Team&, const Params&, bool,
                                              const float*, const CentredRows*);
template std::vector<double> initial_centroids(const Dataset<double>&, const RowSplit&, Team&, const Params&, bool,
                                               const double*, const CentredRows*);

}  // namespace km
