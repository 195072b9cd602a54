// The initialisations on the CPU: first, random and k-means++ (distinct objects, seeded, the
// same on any thread count), k-means|| (its options, candidates, the reduction's tree order, as
// exact as its table), and seq recovering well-separated blobs from them.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "common/errors.hpp"
#include "io/generate.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/init.hpp"
#include "kmeans/registry.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

// Adjusted Rand index of two labelings.
double adjusted_rand_index(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  std::map<std::pair<int, int>, double> joint;
  std::map<int, double> ra, rb;
  for (std::size_t i = 0; i < a.size(); ++i) {
    joint[{a[i], b[i]}] += 1;
    ra[a[i]] += 1;
    rb[b[i]] += 1;
  }
  auto c2 = [](double n) { return n * (n - 1) / 2; };
  double sum_joint = 0, sum_a = 0, sum_b = 0;
  for (auto& [key, n] : joint) sum_joint += c2(n);
  for (auto& [key, n] : ra) sum_a += c2(n);
  for (auto& [key, n] : rb) sum_b += c2(n);
  const double expected = sum_a * sum_b / c2(static_cast<double>(a.size()));
  const double max_index = (sum_a + sum_b) / 2;
  return max_index == expected ? 1.0 : (sum_joint - expected) / (max_index - expected);
}

TEST(Init, FirstTakesTheFirstObjects) {
  auto data = km::generate_uniform<float>(50, 4, 2);
  km::Params p;
  p.k = 5;
  auto c = km::initial_centroids(data, p);
  EXPECT_TRUE(std::equal(c.begin(), c.end(), data.values.data()));
}

template <class T>
std::set<std::vector<T>> rows_of(const std::vector<T>& c, std::size_t d) {
  std::set<std::vector<T>> rows;
  for (std::size_t i = 0; i < c.size(); i += d) rows.insert(std::vector<T>(c.begin() + i, c.begin() + i + d));
  return rows;
}

TEST(Init, RandomAndKmeansppAreDistinctDataPointsAndSeeded) {
  auto data = km::generate_uniform<double>(5000, 3, 4);
  std::set<std::vector<double>> points = rows_of(std::vector<double>(data.values.data(), data.values.data() + 15000), 3);
  for (km::Init init : {km::Init::random, km::Init::kmeanspp, km::Init::kmeans_parallel}) {
    SCOPED_TRACE(km::to_string(init));
    km::Params p;
    p.k = 50;
    p.init = init;
    p.seed = 7;
    auto a = km::initial_centroids(data, p);
    EXPECT_EQ(rows_of(a, 3).size(), 50u) << "distinct centres";
    for (auto& row : rows_of(a, 3)) EXPECT_TRUE(points.count(row)) << "centres are objects";
    EXPECT_EQ(km::initial_centroids(data, p), a) << "same seed, same centres";
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    EXPECT_EQ(km::initial_centroids(data, p), a) << "independent of the thread count";
    omp_set_num_threads(threads);
    p.seed = 8;
    EXPECT_NE(km::initial_centroids(data, p), a) << "another seed, other centres";
  }
}

TEST(Init, KmeansppAndParallelFindEveryBlob) {
  auto blobs = km::generate_blobs<double>(kmtest::blob_options(4000, 2, 10, 3, 0.05));
  for (km::Init init : {km::Init::kmeanspp, km::Init::kmeans_parallel})
    for (std::uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(std::string(km::to_string(init)) + " seed " + std::to_string(seed));
      km::Params p;
      p.k = 10;
      p.init = init;
      p.seed = seed;
      auto c = km::initial_centroids(blobs.data, p);
      std::set<int> hit;
      for (int i = 0; i < 10; ++i) {
        int best = 0;
        for (int b = 1; b < 10; ++b)
          if (dist2(&c[i * 2], &blobs.centers[b * 2], 2) < dist2(&c[i * 2], &blobs.centers[best * 2], 2)) best = b;
        hit.insert(best);
      }
      EXPECT_EQ(hit.size(), 10u) << "one centre in each blob";
    }
}

// k-means|| whose K x d result is at least 256 KB (600 x 64 doubles) and whose candidates are
// the centres (5 distinct objects, fewer than K): the result's room comes from a thread of its
// own (init_parallel.cpp: touched_async) and the rows are fetched into it. (The GPU's reduction takes the
// same path at 1M x 128, K = 1024; the CPU's reduction builds its own.)
TEST(Init, ParallelLargeResultIsObjects) {
  const std::size_t d = 64;
  km::Dataset<double> data(6000, d);
  for (std::size_t i = 0; i < data.n; ++i)
    for (std::size_t j = 0; j < d; ++j) data.values.data()[i * d + j] = 1.0 + static_cast<double>((i % 5) * (j + 1));
  km::Params p;
  p.k = 600;
  p.init = km::Init::kmeans_parallel;
  p.seed = 3;
  const auto c = km::initial_centroids(data, p);
  ASSERT_EQ(c.size(), 600 * d);
  const auto distinct = rows_of(c, d);
  EXPECT_EQ(distinct.size(), 5u) << "all five distinct objects, and duplicates";
  for (const auto& row : distinct)
    EXPECT_TRUE(std::equal(row.begin(), row.end(), data.row(static_cast<std::size_t>(row[1] - row[0])))) << "centres are objects";
  EXPECT_EQ(km::initial_centroids(data, p), c) << "same seed, same centres";
}

// k-means|| with fewer distinct objects than K: every distinct object becomes a centre (the
// rounds stop once each sits on a candidate), the rest are duplicates, as in k-means++.
TEST(Init, ParallelWithFewerDistinctObjectsThanK) {
  km::Dataset<double> data(600, 2);
  for (std::size_t i = 0; i < data.n; ++i) {
    data.values.data()[2 * i] = static_cast<double>(i % 5);
    data.values.data()[2 * i + 1] = static_cast<double>((i % 5) * (i % 5));
  }
  km::Params p;
  p.k = 8;
  p.init = km::Init::kmeans_parallel;
  const auto c = km::initial_centroids(data, p);
  ASSERT_EQ(c.size(), 16u);
  EXPECT_EQ(rows_of(c, 2).size(), 5u) << "all five distinct objects, and duplicates";
  EXPECT_EQ(km::initial_centroids(data, p), c);
}

// Its rounds and oversampling matter (more candidates, other centres), and the whole run
// through omp lands near k-means++'s inertia on blobs.
TEST(Init, ParallelOptionsAndQuality) {
  auto blobs = km::generate_blobs<double>(kmtest::blob_options(6000, 8, 40, 5, 0.5));
  km::Params p;
  p.k = 40;
  p.loops = 30;
  p.init = km::Init::kmeans_parallel;
  const auto base = km::initial_centroids(blobs.data, p);
  p.init_rounds = 2;
  EXPECT_NE(km::initial_centroids(blobs.data, p), base) << "--init-rounds ignored";
  p.init_rounds = 5;
  p.oversampling = 2;
  EXPECT_NE(km::initial_centroids(blobs.data, p), base) << "--oversampling ignored";
  p.oversampling = 0.5;
  const double parallel = run_impl("omp", blobs.data, p).inertia;
  p.init = km::Init::kmeanspp;
  const double plusplus = run_impl("omp", blobs.data, p).inertia;
  EXPECT_LT(parallel, 1.5 * plusplus) << "k-means|| far worse than k-means++";
}

// The reduction's definition (init.hpp: reduce_weighted), written here as plainly as it reads:
// each step, one tree over all m weighted distances padded with zeros to max(4096, 2^ceil(log2 m))
// leaves, rebuilt whole; a draw descends it from the root; each trial's potential is its root.
// The library builds it from 64-leaf chunk subtrees and a tree of chunk sums above them (the
// GPU's layout): the same sums only if the chunks sit exactly on the subtrees.
template <class T>
std::vector<T> reference_tree_reduction(const km::Dataset<T>& pool, const std::vector<double>& w, std::size_t k,
                                        std::uint64_t seed, std::vector<double>& potentials) {
  const std::size_t m = pool.n, d = pool.d, trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
  std::size_t pow2 = 64 * 64, counter = 0;
  while (pow2 < m) pow2 *= 2;
  auto uniform = [&] { return km::unit_double(km::hash64(seed, 24, counter++)); };  // init_detail.hpp: kParallelReduce
  auto below = [&](std::size_t n) { return std::min(n - 1, static_cast<std::size_t>(uniform() * n)); };
  auto dist = [&](std::size_t a, std::size_t b) { return km::squared_distance_double(pool.row(a), pool.row(b), d); };
  auto heap_of = [&](const std::vector<double>& v) {
    std::vector<double> h(2 * pow2, 0.0);
    for (std::size_t i = 0; i < m; ++i) h[pow2 + i] = v[i];
    for (std::size_t j = pow2 - 1; j >= 1; --j) h[j] = h[2 * j] + h[2 * j + 1];
    return h;
  };
  std::vector<std::size_t> picks{below(m)};
  std::vector<double> closest(m);
  for (std::size_t i = 0; i < m; ++i) closest[i] = w[i] * dist(picks[0], i);
  std::vector<double> heap = heap_of(closest);
  potentials.assign(1, heap[1]);
  for (std::size_t c = 1; c < k; ++c) {
    std::vector<std::size_t> cands(trials);
    for (auto& cand : cands) {
      if (heap[1] <= 0) {
        cand = below(m);
        continue;
      }
      double r = uniform() * heap[1];
      std::size_t node = 1;
      while (node < pow2) {
        if (r < heap[2 * node]) {
          node = 2 * node;
        } else {
          r -= heap[2 * node];
          node = 2 * node + 1;
        }
      }
      cand = std::min(node - pow2, m - 1);
      while (closest[cand] == 0) cand = (cand + 1) % m;
    }
    std::size_t best = 0;  // the first least potential (trial 0 if none is below +inf)
    double best_p = INFINITY;
    std::vector<double> best_mins;
    for (std::size_t t = 0; t < trials; ++t) {
      std::vector<double> mins(m);
      for (std::size_t i = 0; i < m; ++i) mins[i] = std::min(closest[i], w[i] * dist(cands[t], i));
      const double p = heap_of(mins)[1];
      if (t == 0) best_mins = mins;
      if (p < best_p) {
        best_p = p;
        best = t;
        best_mins = mins;
      }
    }
    picks.push_back(cands[best]);
    closest = best_mins;
    heap = heap_of(closest);
    potentials.insert(potentials.end(), {best_p, heap[1]});
  }
  std::vector<T> out;
  for (std::size_t c : picks) out.insert(out.end(), pool.row(c), pool.row(c) + d);
  return out;
}

// k-means||'s reduction through the distance table gives the direct steps' centres and every
// step's potential bit for bit, and both are the plain definition's (above): uniform, blobs
// and quantised rows (exact ties), both precisions, more candidates than one 64-row chunk and
// a count that is not a power of two, weights with zeros, on 1 and on all threads.
template <class T>
void check_reduction_table() {
  struct Case {
    const char* name;
    km::Dataset<T> pool;
  };
  std::vector<Case> cases;
  cases.push_back({"uniform", km::generate_uniform<T>(700, 13, 5)});
  cases.push_back({"blobs", km::generate_blobs<T>(kmtest::blob_options(650, 40, 12, 6, 0.3)).data});
  km::Dataset<T> quantised(600, 9);
  std::uint64_t h = 11;
  for (std::size_t i = 0; i < quantised.n * quantised.d; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    quantised.values.data()[i] = static_cast<T>(static_cast<double>((h >> 33) % 4) / 255.0);
  }
  cases.push_back({"quantised", std::move(quantised)});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<double> w(c.pool.n);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>((i * 7) % 5);  // zeros among them
    for (std::size_t k : {2, 37, 150}) {
      SCOPED_TRACE(k);
      std::vector<double> direct_p, table_p, one_p;
      const std::vector<T> direct = km::reduce_weighted(c.pool, w, k, 3, false, &direct_p);
      const std::vector<T> table = km::reduce_weighted(c.pool, w, k, 3, true, &table_p);
      ASSERT_EQ(direct_p.size(), 2 * k - 1);
      EXPECT_GT(direct_p.front(), direct_p.back()) << "the potential must fall as centres are added";
      EXPECT_EQ(table, direct);
      EXPECT_EQ(table_p, direct_p) << "the potentials, bit for bit";
      std::vector<double> reference_p;
      EXPECT_EQ(reference_tree_reduction(c.pool, w, k, 3, reference_p), table) << "not the tree order's picks";
      EXPECT_EQ(reference_p, table_p) << "not the tree order's potentials";
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      EXPECT_EQ(km::reduce_weighted(c.pool, w, k, 3, true, &one_p), table);
      omp_set_num_threads(threads);
      EXPECT_EQ(one_p, table_p);
    }
  }
}

TEST(Init, ParallelReductionTableIsExact) {
  check_reduction_table<double>();
  check_reduction_table<float>();
}

TEST(Blobs, SeqRecoversTheTrueClustering) {
  for (std::size_t d : {2, 16}) {
    auto blobs = km::generate_blobs<double>(kmtest::blob_options(3000, d, 6, 21, 0.1));
    km::Params p;
    p.k = 6;
    p.loops = 50;
    p.init = km::Init::kmeanspp;
    auto r = run_impl("seq", blobs.data, p);
    EXPECT_TRUE(r.converged);
    EXPECT_DOUBLE_EQ(adjusted_rand_index(r.labels, blobs.labels), 1.0) << "d=" << d;
  }
}

}  // namespace
