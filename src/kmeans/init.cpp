#include "kmeans/init.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "io/generate.hpp"
#include "kmeans/cpu_steps.hpp"

namespace km {

namespace {

enum Stream : std::uint64_t { kRandomPick = 20, kPlusPlus = 21 };

// Seeded sequence of uniform doubles in [0, 1).
struct Uniform {
  std::uint64_t seed, stream, counter = 0;
  double operator()() { return unit_double(hash64(seed, stream, counter++)); }
  std::size_t below(std::size_t n) { return std::min(n - 1, static_cast<std::size_t>((*this)() * n)); }
};

template <class T>
void pick_random(const Dataset<T>& data, std::size_t k, std::uint64_t seed, std::vector<T>& out) {
  // Floyd's algorithm: k distinct indices without an N-sized array.
  Uniform u{seed, kRandomPick};
  std::unordered_set<std::size_t> chosen;
  std::vector<std::size_t> order;
  for (std::size_t j = data.n - k; j < data.n; ++j) {
    std::size_t t = u.below(j + 1);
    if (chosen.insert(t).second) {
      order.push_back(t);
    } else {
      chosen.insert(j);
      order.push_back(j);
    }
  }
  for (std::size_t c = 0; c < k; ++c) std::copy_n(data.row(order[c]), data.d, out.begin() + c * data.d);
}

template <class T>
void pick_kmeanspp(const Dataset<T>& data, std::size_t k, std::uint64_t seed, std::vector<T>& out) {
  const std::size_t n = data.n, d = data.d;
  Uniform u{seed, kPlusPlus};
  const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));

  std::size_t first = u.below(n);
  std::copy_n(data.row(first), d, out.begin());
  std::vector<double> closest(n), chunk_sums;
  double potential = chunked_sum(n, chunk_sums, [&](std::size_t i) {
    return closest[i] = squared_distance_double(data.row(i), data.row(first), d);
  });

  std::vector<std::size_t> candidates(trials);
  for (std::size_t c = 1; c < k; ++c) {
    progress::update("k-means++", static_cast<double>(c), static_cast<double>(k), "centres");
    // Draw candidates with probability proportional to the squared distance.
    for (auto& cand : candidates) {
      if (potential <= 0) {  // every object sits on a chosen centre: duplicates are unavoidable
        cand = u.below(n);
        continue;
      }
      double r = u() * potential;
      std::size_t chunk = 0;
      while (chunk + 1 < chunk_sums.size() && r >= chunk_sums[chunk]) r -= chunk_sums[chunk++];
      std::size_t i = chunk * kSumChunk, end = std::min(n, i + kSumChunk);
      cand = end - 1;
      for (; i < end; ++i) {
        if (r < closest[i]) {
          cand = i;
          break;
        }
        r -= closest[i];
      }
      // Rounding must not land on an object that already is a centre: move to the next
      // object that is not (one exists, since the potential is positive).
      while (closest[cand] == 0) cand = (cand + 1) % n;
    }
    // Keep the candidate that lowers the potential most (first one on ties).
    std::size_t best = candidates[0];
    double best_potential = INFINITY;
    std::vector<double> scratch;
    for (std::size_t cand : candidates) {
      double p = chunked_sum(n, scratch, [&](std::size_t i) {
        return std::min(closest[i], squared_distance_double(data.row(i), data.row(cand), d));
      });
      if (p < best_potential) {
        best_potential = p;
        best = cand;
      }
    }
    std::copy_n(data.row(best), d, out.begin() + c * d);
    potential = chunked_sum(n, chunk_sums, [&](std::size_t i) {
      return closest[i] = std::min(closest[i], squared_distance_double(data.row(i), data.row(best), d));
    });
  }
}

}  // namespace

template <class T>
std::vector<T> initial_centroids(const Dataset<T>& data, const Params& params) {
  check_clusters(params.k, data.n);
  const auto k = static_cast<std::size_t>(params.k);
  std::vector<T> out(k * data.d);
  switch (params.init) {
    case Init::first: std::copy_n(data.values.data(), k * data.d, out.begin()); break;
    case Init::random: pick_random(data, k, params.seed, out); break;
    case Init::kmeanspp:
      pick_kmeanspp(data, k, params.seed, out);
      progress::end_stage();
      break;
    case Init::given:
      if (params.given_d != data.d)
        throw UsageError(strprintf("the centroids have %zu coordinates but the data has %zu", params.given_d, data.d));
      for (std::size_t i = 0; i < k * data.d; ++i) out[i] = static_cast<T>(params.given_centroids[i]);
      break;
  }
  return out;
}

template std::vector<float> initial_centroids(const Dataset<float>&, const Params&);
template std::vector<double> initial_centroids(const Dataset<double>&, const Params&);

}  // namespace km
