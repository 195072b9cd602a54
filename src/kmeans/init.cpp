// Initial centroids (init.hpp): the driver. first, random and given here; k-means++ in
// init_plusplus.cpp, k-means|| in init_parallel.cpp (their shared parts: init_detail.hpp).
#include "kmeans/init.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <unordered_set>

#include "common/errors.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/init_detail.hpp"
#include "kmeans/registry.hpp"

namespace km {

using init_detail::fetch_rows;
using init_detail::kRandomPick;
using init_detail::Uniform;

namespace {

// k distinct indices below n, drawn from u: Floyd's algorithm, without an N-sized array.
std::vector<std::size_t> random_rows(std::size_t n, std::size_t k, Uniform& u) {
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

// Each row of length 0 among the drawn `rows` (their values in `out`) replaced by a draw from
// the rows not drawn yet that are not zero (init_detail.hpp: draw_nonzero_row). Drawn rows stay
// drawn, so the set is uniform over the rows that are not zero (but for data almost all zero,
// where draw_nonzero_row falls back to its scan).
template <class T>
void replace_zero_rows(const Dataset<T>& local, const RowSplit& split, Team& team, Uniform& u,
                       std::vector<std::size_t>& rows, std::vector<T>& out) {
  const std::size_t d = local.d;
  std::unordered_set<std::size_t> drawn(rows.begin(), rows.end());
  auto fetch = [&](const std::vector<std::size_t>& which, std::vector<T>& into) {
    init_detail::fetch_rows_into(local, split, team, which, into);
  };
  std::vector<T> row;
  for (std::size_t c = 0; c < rows.size(); ++c) {
    T* at = out.data() + c * d;
    if (!init_detail::zero_row(at, d)) continue;
    const std::size_t t = init_detail::draw_nonzero_row(split.total, d, u, drawn, fetch, row);
    if (t == split.total)
      throw InputError(strprintf("--init=random: fewer than --clusters=%zu rows have a non-zero length; the cosine "
                                 "and dot metrics need initial centroids with a direction: use fewer clusters",
                                 rows.size()));
    drawn.insert(t);
    rows[c] = t;
    std::copy_n(row.begin(), d, at);
  }
}

std::atomic<bool> g_parallel_verbose{false};

}  // namespace

bool parallel_verbose() { return g_parallel_verbose.load(std::memory_order_relaxed); }
void set_parallel_verbose(bool on) { g_parallel_verbose.store(on, std::memory_order_relaxed); }

void init_detail::no_direction(const char* init) {
  throw InputError(strprintf("--init=%s: every row has length 0 (or, with sample weights, weight 0); the cosine "
                             "and dot metrics need initial centroids with a direction",
                             init));
}

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
  std::vector<T> out;
  switch (params.init) {
    case Init::first:
    case Init::random: {
      std::vector<std::size_t> rows(k);
      Uniform u{params.seed, kRandomPick};
      if (params.init == Init::first)
        for (std::size_t c = 0; c < k; ++c) rows[c] = c;
      else
        rows = random_rows(n, k, u);
      out = fetch_rows(local, split, team, rows);
      if (params.init == Init::random && init_detail::skips_zero_rows(params))
        replace_zero_rows(local, split, team, u, rows, out);
      break;
    }
    case Init::kmeanspp:
      out = init_detail::kmeanspp_centres(local, split, team, params, on_gpu, device_rows);
      break;
    case Init::kmeans_parallel:
      out = init_detail::kmeans_parallel_centres(local, split, team, params, on_gpu, device_rows, centred, entered);
      break;
    case Init::given:
      if (params.given_d != d)
        throw UsageError(strprintf("the centroids have %zu coordinates but the data has %zu", params.given_d, d));
      out.resize(k * d);
      for (std::size_t i = 0; i < k * d; ++i) {
        out[i] = static_cast<T>(params.given_centroids[i]);
        if (!std::isfinite(out[i]))  // (NaN, infinite, or beyond float's range in a float fit)
          throw InputError(strprintf(
              "initial centroid %zu, coordinate %zu: %g %s", i / d, i % d, params.given_centroids[i],
              std::isfinite(params.given_centroids[i]) ? "is outside float's range (fit in double precision)"
                                                       : "is not a finite number"));
      }
      // Some centroid must be within reach of every object (its distances finite in T): then
      // a distance that overflows is truly not the nearest, and the labels stay exact.
      check_arithmetic_range<T>(centroid_reach(out.data(), k, d, false), n, d, 0, "every initial centroid's values");
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
