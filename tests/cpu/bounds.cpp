// Hamerly's bounds as the delta kernel keeps them over Lloyd iterations (margin.hpp:
// hamerly_store, hamerly_keep, hamerly_step): every kept object has seq's label, and without the
// centroids' drift some do not; the directed roundings bracket the exact value; the inertia by
// algebra within its bound, and its bound failing on cancellation only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "emulation.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/margin.hpp"
#include "kmeans/cpu_steps.hpp"

namespace {

using namespace kmtest;

// Hamerly's bounds (margin.hpp: hamerly_store, hamerly_keep, hamerly_step), run as the delta
// kernel runs them over Lloyd iterations: each object examined stores its bounds from its
// scores; each kept object must have seq's label for the iteration's centroids. Returns how
// many kept objects did not; counts those kept. `drift` false leaves the drift tables at zero
// (the centroids' steps ignored), which the test below shows gives wrong labels.
template <class T>
std::size_t hamerly_wrong(const std::vector<T>& xs, std::vector<T> cs, std::size_t d, std::size_t k, bool drift,
                          std::size_t& kept) {
  const std::size_t n = xs.size() / d;
  float kap_up = 1, kap_down = 1;
  km::kernels::hamerly_kappa(d, sizeof(T) == 8 ? 0x1p-53 : 0x1p-24, kap_up, kap_down);
  std::vector<int> labels(n, -1);
  std::vector<km::kernels::HamerlyBounds> bounds(n);
  std::vector<float> drift_c(k, 0.0f);
  float drift_max = 0;
  std::size_t wrong = 0;
  kept = 0;
  for (int it = 0; it < 12; ++it) {
    const DeltaScorer<T> scorer(cs, d, k, 1.0);
    for (std::size_t i = 0; i < n; ++i) {
      const T* x = &xs[i * d];
      const int a = labels[i];
      if (a >= 0 && km::kernels::hamerly_keep(bounds[i].upper, bounds[i].lower, drift_c[a], drift_max)) {
        ++kept;
        wrong += a != km::nearest_centroid(x, cs.data(), k, d);
        continue;
      }
      const auto r = scorer.score(x);
      labels[i] = r.close ? km::nearest_centroid(x, cs.data(), k, d) : r.label;
      bounds[i] = r.close ? km::kernels::HamerlyBounds{}
                          : km::kernels::hamerly_store(r.best, r.second, r.nx, r.h, kap_up, kap_down,
                                                       drift_c[labels[i]], drift_max);
    }
    // The update (the mean of the members; an empty cluster keeps its centroid), each step
    // into the drift tables.
    std::vector<double> sums(k * d, 0.0);
    std::vector<std::size_t> counts(k, 0);
    for (std::size_t i = 0; i < n; ++i) {
      ++counts[labels[i]];
      for (std::size_t j = 0; j < d; ++j) sums[labels[i] * d + j] += static_cast<double>(xs[i * d + j]);
    }
    float largest = 0;
    for (std::size_t c = 0; c < k; ++c) {
      double sq = 0;
      for (std::size_t j = 0; j < d; ++j) {
        if (!counts[c]) continue;
        const T v = static_cast<T>(sums[c * d + j] / static_cast<double>(counts[c]));
        const double e = static_cast<double>(v) - static_cast<double>(cs[c * d + j]);
        sq += e * e;
        cs[c * d + j] = v;
      }
      const float step = drift ? km::kernels::hamerly_step(sq) : 0.0f;
      drift_c[c] = km::kernels::add_up(drift_c[c], km::kernels::mul_up(step, kap_up));
      largest = std::max(largest, step);
    }
    drift_max = km::kernels::add_up(drift_max, largest);
  }
  return wrong;
}

// Uniform, tie-heavy quantised (values k/255 from a few levels) and near-tie (on bisectors)
// objects, first-K initial centroids, d = 1 ... 32, K = 2 ... 100: every kept label is seq's,
// and the bounds keep objects at all.
template <class T>
void check_hamerly() {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  std::size_t kept_all = 0;
  for (std::size_t d : {1, 2, 3, 16, 32}) {
    for (std::size_t k : {2, 16, 100}) {
      const std::size_t n = 1200;
      std::vector<T> uniform(n * d), quantised(n * d), cs(k * d);
      for (auto& v : uniform) v = static_cast<T>(u(rng));
      for (auto& v : quantised) v = static_cast<T>(static_cast<double>(rng() % 5) / 255.0);
      for (auto& v : cs) v = static_cast<T>(u(rng));
      const std::vector<T> near = near_tie_objects(cs, d, k, n, rng);
      for (int set = 0; set < 3; ++set) {
        const auto& xs = set == 0 ? uniform : set == 1 ? quantised : near;
        const std::vector<T> first(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(k * d));
        std::size_t kept = 0;
        EXPECT_EQ(hamerly_wrong(xs, first, d, k, true, kept), 0u) << "d=" << d << " k=" << k << " set " << set;
        kept_all += kept;
      }
    }
  }
  EXPECT_GT(kept_all, 0u) << "the bounds never kept an object";
}

TEST(HamerlyBounds, FloatKeepsOnlySeqLabels) { check_hamerly<float>(); }
TEST(HamerlyBounds, DoubleKeepsOnlySeqLabels) { check_hamerly<double>(); }

// Ignoring the centroids' steps keeps objects whose nearest centroid changed.
TEST(HamerlyBounds, WithoutDriftGivesWrongLabels) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> u(0, 1);
  const std::size_t d = 2, k = 16, n = 4000;
  std::vector<double> xs(n * d);
  for (auto& v : xs) v = u(rng);
  const std::vector<double> first(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(k * d));
  std::size_t kept = 0;
  EXPECT_GT(hamerly_wrong(xs, first, d, k, false, kept), 0u);
}

// The host's directed roundings are the exact ones: each result is on the right side of the
// exact value (in long double) and one step from it at most.
TEST(HamerlyBounds, DirectedRoundingBracketsTheExactValue) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> e(-15, 15), m(-1, 1);  // sums exact in long double
  using km::kernels::add_down;
  using km::kernels::add_up;
  for (int t = 0; t < 20000; ++t) {
    const float a = static_cast<float>(m(rng) * std::exp2(e(rng))), b = static_cast<float>(m(rng) * std::exp2(e(rng)));
    const long double sum = static_cast<long double>(a) + b, prod = static_cast<long double>(a) * b;
    const float su = add_up(a, b), sd = add_down(a, b), pu = km::kernels::mul_up(a, b), pd = km::kernels::mul_down(a, b);
    ASSERT_TRUE(su >= sum && sd <= sum && std::nextafter(su, -INFINITY) < sum && std::nextafter(sd, INFINITY) > sum)
        << a << " + " << b;
    EXPECT_TRUE(pu >= prod && pd <= prod) << a << " * " << b;
    const float q = std::fabs(a), ru = km::kernels::sqrt_up(q), rd = km::kernels::sqrt_down(q);
    EXPECT_TRUE(static_cast<double>(ru) * ru >= q && static_cast<double>(rd) * rd <= q) << "sqrt " << q;
    EXPECT_LE(ru, std::nextafter(rd, INFINITY));
  }
}

// The inertia by algebra (margin.hpp: algebraic_term, algebraic_unsure; the delta kernel's
// BOUNDS and kAlgebraic paths): Q + sum_c [n |w|^2 - 2 w.(S - n z)] against every object's squared
// distance summed directly in long double. Q and S are summed in long double too (the kernel's
// are exact fixed-point sums), so the difference is the algebra's own rounding, which must lie
// within its bound. `spread` places the clusters' centres, `noise` their objects about them,
// `offset` the whole set from the origin; each object labelled with its cluster, the centroids
// near the clusters' centres but not their means (the identity holds for any).
struct AlgebraicCase {
  double inertia, bound, direct;
};
AlgebraicCase algebraic_case(double offset, double spread, double noise, unsigned seed) {
  const int n = 3000, d = 7, k = 9;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> centre(k * d), x(static_cast<std::size_t>(n) * d), c(k * d), z(d, 0.0);
  for (double& v : centre) v = offset + spread * u(rng);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x[i * d + j] = centre[(i % k) * d + j] + noise * u(rng);
  for (int t = 0; t < k * d; ++t) c[t] = centre[t] + 0.1 * noise * u(rng);
  for (int m = 0; m < k; ++m)
    for (int j = 0; j < d; ++j) z[j] += c[m * d + j] / k;
  long double q = 0, direct = 0;
  std::vector<long double> sums(k * d, 0.0L);
  std::vector<double> counts(k, 0.0);
  for (int i = 0; i < n; ++i) {
    const int m = i % k;
    counts[m] += 1;
    for (int j = 0; j < d; ++j) {
      const long double v = x[i * d + j];
      q += (v - z[j]) * (v - z[j]);
      direct += (v - c[m * d + j]) * (v - c[m * d + j]);
      sums[m * d + j] += v;
    }
  }
  double parts = 0, sizes = 0;
  for (int m = 0; m < k; ++m) {
    double part = 0, size = 0;
    for (int j = 0; j < d; ++j)
      km::kernels::algebraic_term(static_cast<double>(sums[m * d + j]), counts[m], c[m * d + j], z[j], part, size);
    parts += part;
    sizes += size;
  }
  const double qd = static_cast<double>(q);
  return {qd + parts, (2 * d + 24) * 0x1p-53 * (std::fabs(qd) + sizes), static_cast<double>(direct)};
}

TEST(Algebraic, InertiaWithinItsBound) {
  // Clusters of their own size apart, near the origin and far from it; tight ones far out.
  for (const double offset : {0.0, 50.0, 1e4}) {
    for (const double noise : {0.5, 1e-2, 1e-5}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + " noise " + std::to_string(noise));
      const AlgebraicCase r = algebraic_case(offset, 1.0, noise, 3);
      EXPECT_LE(std::fabs(r.inertia - r.direct), r.bound + 9 * 0x1p-53 * r.direct) << r.inertia << " vs " << r.direct;
    }
  }
}

TEST(Algebraic, BoundFailsOnCancellationOnly) {
  // Loose clusters: the algebra is taken. Clusters 1e-5 wide, their centres 1 apart, 100 from
  // the origin: Q and the parts cancel by ~10 orders, so the 1e-11 guard refuses the algebra.
  const AlgebraicCase loose = algebraic_case(10.0, 1.0, 0.5, 5);
  EXPECT_FALSE(km::kernels::algebraic_unsure(loose.inertia, loose.bound, 9, 1e-11)) << loose.bound / loose.inertia;
  const AlgebraicCase tight = algebraic_case(100.0, 1.0, 1e-5, 5);
  EXPECT_TRUE(km::kernels::algebraic_unsure(tight.inertia, tight.bound, 9, 1e-11)) << tight.bound / tight.inertia;
  EXPECT_TRUE(km::kernels::algebraic_unsure(-1.0, 0.0, 9, 1e-11)) << "a negative total";
}

}  // namespace
