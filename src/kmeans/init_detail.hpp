// The parts of the initial centroids' code (init.hpp) that its three files share: the random
// streams, the rows fetched across a team, and the vector-lane distances of the CPU's steps.
//   init.cpp           the driver: first, random, given; the dispatch to the two below
//   init_plusplus.cpp  greedy k-means++ (its CPU steps and its driver)
//   init_parallel.cpp  k-means|| (its CPU steps, its driver and the weighted reduction)
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "dist/team.hpp"
#include "io/dataset.hpp"
#include "io/hash.hpp"
#include "kmeans/centred_rows.hpp"
#include "kmeans/params.hpp"

namespace km::init_detail {

// (23 is parallel_drawn's, init.hpp.)
enum Stream : std::uint64_t { kRandomPick = 20, kPlusPlus = 21, kParallel = 22, kParallelReduce = 24 };

// Seeded sequence of uniform doubles in [0, 1).
struct Uniform {
  std::uint64_t seed, stream, counter = 0;
  double operator()() { return unit_double(hash64(seed, stream, counter++)); }
  std::size_t below(std::size_t n) { return std::min(n - 1, static_cast<std::size_t>((*this)() * n)); }
};

// Rows of the whole data by index, in the order asked, on every rank: each rank sends the
// rows it holds (in that order), and every rank knows which rank holds which index.
// Into `out` (resized: kept where it has the size already).
template <class T>
void fetch_rows_into(const Dataset<T>& local, const RowSplit& split, Team& team, const std::vector<std::size_t>& rows,
                     std::vector<T>& out) {
  const std::size_t d = local.d;
  out.resize(rows.size() * d);
  if (team.size() == 1) {  // (data on the device: a copy a row)
    for (std::size_t q = 0; q < rows.size(); ++q) copy_row(local, rows[q] - split.first, out.data() + q * d);
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

// Under cosine and dot a row of length 0 (padding) has no direction, so k-means++, k-means|| and
// random never draw one: the D^2 draws give such rows no share (closest 0, as a chosen centre's),
// and every uniform draw of a row goes through draw_nonzero_row.
inline bool skips_zero_rows(const Params& params) { return params.metric != Metric::euclidean; }
template <class T>
bool zero_row(const T* row, std::size_t d) {
  for (std::size_t j = 0; j < d; ++j)
    if (row[j] != T(0)) return false;
  return true;
}

// A uniform draw by u of a row below n that is neither all zeros nor in `drawn`, its values into
// `row`; n where there is none. It draws up to kZeroRedraws times; past that (almost every row
// zero or drawn), the first such row after the last draw, cyclically, kScanRows rows a fetch.
// The first draw is u.below(n), so data without zero rows takes the draws it took before.
// fetch(rows, into): those rows' values into `into`, in order (on every rank, collectively: every
// rank takes the same steps).
constexpr int kZeroRedraws = 64;
constexpr std::size_t kScanRows = 4096;
template <class T, class Fetch>
std::size_t draw_nonzero_row(std::size_t n, std::size_t d, Uniform& u, const std::unordered_set<std::size_t>& drawn,
                             Fetch&& fetch, std::vector<T>& row) {
  std::size_t t = 0;
  for (int tries = 0; tries < kZeroRedraws; ++tries) {
    t = u.below(n);
    if (drawn.count(t)) continue;
    fetch(std::vector<std::size_t>{t}, row);
    if (!zero_row(row.data(), d)) return t;
  }
  std::vector<std::size_t> rows;
  std::vector<T> block;
  for (std::size_t seen = 0; seen < n; seen += rows.size()) {
    rows.resize(std::min(kScanRows, n - seen));
    for (std::size_t q = 0; q < rows.size(); ++q) rows[q] = (t + 1 + seen + q) % n;
    fetch(rows, block);
    for (std::size_t q = 0; q < rows.size(); ++q)
      if (!drawn.count(rows[q]) && !zero_row(block.data() + q * d, d)) {
        row.assign(block.begin() + static_cast<std::ptrdiff_t>(q * d),
                   block.begin() + static_cast<std::ptrdiff_t>((q + 1) * d));
        return rows[q];
      }
  }
  return n;
}

// A duplicate draw (the D^2 draws' fallback once every object sits on a centre): u.below(n), or
// under skip_zero, where that row has length 0, one of `taken` (the rows already chosen) again.
template <class T, class Fetch>
std::size_t draw_duplicate(std::size_t n, std::size_t d, Uniform& u, bool skip_zero,
                           const std::vector<std::size_t>& taken, Fetch&& fetch, std::vector<T>& row) {
  const std::size_t t = u.below(n);
  if (!skip_zero) return t;
  fetch(std::vector<std::size_t>{t}, row);
  return zero_row(row.data(), d) ? taken[u.below(taken.size())] : t;
}

// The error for data whose every row has length 0 (or zero weight), under cosine and dot.
[[noreturn]] void no_direction(const char* init);

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

// The vector-width variants' function attributes (GCC on x86-64 only; elsewhere all three
// variants are the baseline).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KM_TARGET_AVX2 __attribute__((target("avx2")))
#define KM_TARGET_AVX512 __attribute__((target("avx512f")))
#else
#define KM_TARGET_AVX2
#define KM_TARGET_AVX512
#endif

// The two seeding methods' entry points (the driver's cases), for the whole data over `team`
// (this rank holds `split`'s rows in `local`); init.hpp: initial_centroids.
template <class T>
std::vector<T> kmeanspp_centres(const Dataset<T>& local, const RowSplit& split, Team& team, const Params& params,
                                bool on_gpu, const T* device_rows);
// `entered`: when the driver was called (k-means||'s phase times count from it).
template <class T>
std::vector<T> kmeans_parallel_centres(const Dataset<T>& local, const RowSplit& split, Team& team,
                                       const Params& params, bool on_gpu, const T* device_rows,
                                       const CentredRows* centred, std::chrono::steady_clock::time_point entered);

}  // namespace km::init_detail
