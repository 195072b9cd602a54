// The tensor path's exactness bound (kernels/kmeans/margin.hpp), checked on the CPU against
// an emulation of the worst the tensor cores may do: centred objects and centroids rounded to
// TF32 (to nearest, ties away), products exact, every FP32 accumulation
// step truncated toward zero (a rounding twice the nominal unit). Exact reference values in __float128. Then the whole decision (top
// three keys, margin, re-check) against seq's nearest centroid on tie-heavy data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kmeans/cells.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/margin.hpp"
#include "kmeans/cpu_steps.hpp"

namespace {

using km::kernels::candidate_bound;
using km::kernels::candidate_margin;
using Quad = __float128;

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float from_bits(std::uint32_t b) {
  float r;
  std::memcpy(&r, &b, 4);
  return r;
}
float tf32_rna(float x) { return from_bits((bits_of(x) + 0x1000u) & ~0x1FFFu); }  // cvt.rna.tf32.f32

float truncate_to_float(double v) {  // round toward zero
  float f = static_cast<float>(v);
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return f;
}

// Float centres the objects too (x' = x - mu in T); double only the centroids.
template <class T>
constexpr bool centre_objects = sizeof(T) == 4;

// What centre_centroids computes for one centroid: c' = c - mu in T, keyed = |c'|^2 + 2 mu.c'
// (|c'|^2 when the objects are centred).
template <class T>
T keyed_term(const std::vector<T>& cc, const std::vector<T>& mu) {
  T s = 0, m = 0;
  for (std::size_t p = 0; p < cc.size(); ++p) {
    s += cc[p] * cc[p];
    m += mu[p] * cc[p];
  }
  return centre_objects<T> ? s : s + 2 * m;
}

// The key keyed - 2 x'.c' as the float tensor path may compute it, at its worst: x' and c'
// rounded to TF32, products exact, every accumulation truncated. x is the object as the mma
// sees it before rounding (x' here).
float emulated_key(const std::vector<float>& x, const std::vector<float>& cc, float keyed) {
  float dot = 0;
  for (std::size_t p = 0; p < x.size(); ++p)
    dot = truncate_to_float(static_cast<double>(dot) + static_cast<double>(tf32_rna(x[p])) * tf32_rna(cc[p]));
  return keyed - 2 * dot;
}

// The same for double with FP64 mma: exact inputs, each accumulation rounded toward zero.
double emulated_key(const std::vector<double>& x, const std::vector<double>& cc, double keyed) {
  double dot = 0;
  for (std::size_t p = 0; p < x.size(); ++p) {
    const Quad s = static_cast<Quad>(dot) + static_cast<Quad>(x[p]) * static_cast<Quad>(cc[p]);
    double r = static_cast<double>(s);
    if (static_cast<Quad>(std::fabs(r)) > (s < 0 ? -s : s)) r = std::nextafter(r, 0.0);
    dot = r;
  }
  return keyed - 2 * dot;
}

// Double data on TF32 candidates (margin.hpp: tf32_candidates_bound), as fused's tensor path
// forms them: x' and c' centred in double, each rounded to float and then to TF32 (cvt.rna),
// N = |c'|^2 summed in double and rounded to float, then the float emulation's worst case.
float tf32_candidate_key(const std::vector<double>& xo, const std::vector<double>& cc) {
  std::vector<float> xf(xo.size()), cf(cc.size());
  double n = 0;
  for (std::size_t p = 0; p < xo.size(); ++p) {
    xf[p] = static_cast<float>(xo[p]);
    cf[p] = static_cast<float>(cc[p]);
    n += cc[p] * cc[p];
  }
  return emulated_key(xf, cf, static_cast<float>(n));
}

template <class T>
Quad squared(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>* c = nullptr) {
  Quad s = 0;  // |a - b - c|^2, exactly enough
  for (std::size_t p = 0; p < a.size(); ++p) {
    const Quad diff = static_cast<Quad>(a[p]) - static_cast<Quad>(b[p]) - (c ? static_cast<Quad>((*c)[p]) : Quad(0));
    s += diff * diff;
  }
  return s;
}
template <class T>
double norm2(const std::vector<T>& v) {
  double s = 0;
  for (T e : v) s += static_cast<double>(e) * static_cast<double>(e);
  return s;
}
template <class T>
std::vector<T> minus(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> r(a.size());
  for (std::size_t p = 0; p < a.size(); ++p) r[p] = a[p] - b[p];
  return r;
}

template <class T>
km::kernels::CandidateBound bound_for(std::size_t d) {
  if constexpr (sizeof(T) == 8) return candidate_bound(d, 0.0, 0.0, 0x1p-53, 0x1p-53, DBL_MIN);
  return candidate_bound(d, 0x1p-11, 0x1p-11, 0x1p-24, 0x1p-24, FLT_MIN);
}

// Vectors of several kinds: centred, offset (large |x| next to small distances: heavy
// cancellation in the key), mixed magnitudes, quantised.
template <class T>
std::vector<T> draw(std::mt19937_64& rng, std::size_t d, int kind) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(d);
  for (auto& e : v) {
    switch (kind) {
      case 0: e = static_cast<T>(u(rng)); break;
      case 1: e = static_cast<T>(1000 + u(rng)); break;
      case 2: e = static_cast<T>(u(rng) * std::pow(10.0, static_cast<int>(rng() % 12) - 6)); break;
      default: e = static_cast<T>(static_cast<double>(rng() % 256) / 255.0); break;
    }
  }
  return v;
}

// |Â - K| <= E for one (x, c), K = |x - mu - c'|^2 - |x - mu|^2, and the centring term. TF32:
// double data on TF32 candidates, whose keys must also break the pure FP64 bound somewhere (so
// this check can tell a bound too small).
template <class T, bool TF32 = false>
void check_key_bound() {
  static_assert(!TF32 || sizeof(T) == 8, "TF32 candidates are double's");
  constexpr bool centred = centre_objects<T> || TF32;
  std::mt19937_64 rng(7);
  for (std::size_t d : {1, 3, 64, 784, 4096}) {
    const auto b = TF32 ? km::kernels::tf32_candidates_bound(d) : bound_for<T>(d);
    const auto fp64 = bound_for<double>(d);
    double worst = 0, worst_fp64 = 0;  // the largest error seen, as a fraction of the bound (and of FP64's)
    for (int kind = 0; kind < 4; ++kind)
      for (int trial = 0; trial < 40; ++trial) {
        const auto x = draw<T>(rng, d, kind), c = draw<T>(rng, d, kind), mu = draw<T>(rng, d, kind);
        const auto cc = minus(c, mu);
        // The object as the mma sees it, its norm in the bound, and the key's exact value.
        const auto xo = centred ? minus(x, mu) : x;
        const double cn = std::sqrt(norm2(cc)), xn = std::sqrt(norm2(xo));
        const double mn = centred ? 0.0 : std::sqrt(norm2(mu));
        const double e = b.a * cn * cn + b.b * xn * cn + b.b_mu * mn * cn + b.tiny;
        const Quad k = centred ? squared(xo, cc) - squared(xo, std::vector<T>(d, T(0)))
                               : squared(x, mu, &cc) - squared(x, mu);
        Quad key = 0;
        if constexpr (TF32)
          key = static_cast<Quad>(tf32_candidate_key(xo, cc));
        else
          key = static_cast<Quad>(emulated_key(xo, cc, keyed_term(cc, mu)));
        const double err = std::fabs(static_cast<double>(key - k));
        ASSERT_LE(err, e) << "d=" << d << " kind=" << kind;
        worst = std::max(worst, err / e);
        worst_fp64 = std::max(worst_fp64, err / (fp64.a * cn * cn + fp64.b * xn * cn + fp64.tiny));
        // centring: the distance the key stands for against |x - c|^2
        const double xc = std::sqrt(centred ? norm2(xo) : static_cast<double>(squared(x, mu)));
        const Quad stands_for = centred ? squared(xo, cc) : squared(x, mu, &cc);
        ASSERT_LE(std::fabs(static_cast<double>(stands_for - squared(x, c))), b.centre * (xc + cn) * (xc + cn) + 1e-300)
            << "d=" << d << " kind=" << kind;
        // seq's direct formula within g T (margin.hpp's second half)
        const double seq = static_cast<double>(km::squared_distance(x.data(), c.data(), d));
        const Quad t = squared(x, c);
        const double g = b.g2 / 2.02;  // g2 = 1.01 * 2g / (1 - g) >= 2.02 g
        ASSERT_LE(std::fabs(static_cast<double>(static_cast<Quad>(seq) - t)), g * static_cast<double>(t) + 1e-300)
            << "d=" << d << " kind=" << kind;
      }
    // The bound is not vacuous: some draw comes within a factor 1000 of it.
    EXPECT_GT(worst, 1e-3) << "d=" << d;
    if constexpr (TF32) {
      EXPECT_GT(worst_fp64, 1.0) << "d=" << d << ": TF32 keys must break the FP64 bound";
    }
  }
}

TEST(TensorMargin, FloatKeyWithinBound) { check_key_bound<float>(); }
TEST(TensorMargin, DoubleKeyWithinBound) { check_key_bound<double>(); }
TEST(TensorMargin, DoubleOnTf32KeyWithinBound) { check_key_bound<double, true>(); }

// The whole decision on tie-heavy data, as the kernels make it: keys by the emulation, the
// three smallest, the margin, then seq's formula for the close calls. Must give seq's label on
// every object, and must have re-checked some (the data is built with exact ties).
template <class T, bool TF32 = false>
void check_decision() {
  constexpr bool centred = centre_objects<T> || TF32;
  std::mt19937_64 rng(11);
  for (std::size_t d : {1, 3, 16, 64}) {
    const std::size_t n = 600, k = 40;
    std::vector<T> xs(n * d), cs(k * d);
    for (auto& v : xs) v = static_cast<T>(static_cast<double>(rng() % 5) / 255.0);
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t p = 0; p < d; ++p) cs[c * d + p] = xs[(c * 7 % n) * d + p];
    for (std::size_t p = 0; p < d; ++p) cs[(k - 1) * d + p] = cs[p];  // an exact duplicate of centroid 0
    std::vector<T> mu(d);
    for (std::size_t p = 0; p < d; ++p) {
      double s = 0;
      for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(xs[i * d + p]);
      mu[p] = static_cast<T>(s / static_cast<double>(n));
    }
    const auto b = TF32 ? km::kernels::tf32_candidates_bound(d) : bound_for<T>(d);
    std::vector<std::vector<T>> cc(k);
    std::vector<T> keyed(k);
    double cmax2 = 0;
    for (std::size_t c = 0; c < k; ++c) {
      cc[c] = minus(std::vector<T>(cs.begin() + c * d, cs.begin() + (c + 1) * d), mu);
      keyed[c] = keyed_term(cc[c], mu);
      cmax2 = std::max(cmax2, norm2(cc[c]));
    }
    const double mu_norm = centred ? 0.0 : std::sqrt(norm2(mu)) * (1 + 1e-12);
    std::size_t rechecked = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::vector<T> x(xs.begin() + i * d, xs.begin() + (i + 1) * d);
      const auto xo = centred ? minus(x, mu) : x;
      T v1 = INFINITY, v2 = INFINITY, v3 = INFINITY;
      int i1 = -1, i2 = -1;
      for (std::size_t c = 0; c < k; ++c) {
        T v = 0;
        if constexpr (TF32)
          v = tf32_candidate_key(xo, cc[c]);
        else
          v = emulated_key(xo, cc[c], keyed[c]);
        if (v < v1) {
          v3 = v2, v2 = v1, i2 = i1, v1 = v, i1 = static_cast<int>(c);
        } else if (v < v2) {
          v3 = v2, v2 = v, i2 = static_cast<int>(c);
        } else if (v < v3) {
          v3 = v;
        }
      }
      const double xc2 = centred ? norm2(xo) : static_cast<double>(squared(x, mu));
      const double m = candidate_margin(b, xc2, mu_norm, cmax2, static_cast<double>(v1));
      int label = i1;
      if (!(static_cast<double>(v2) - static_cast<double>(v1) > m)) {
        ++rechecked;
        if (static_cast<double>(v3) - static_cast<double>(v1) > m) {
          const int lo = std::min(i1, i2), hi = std::max(i1, i2);
          const T dlo = km::squared_distance(x.data(), &cs[lo * d], d), dhi = km::squared_distance(x.data(), &cs[hi * d], d);
          label = dhi < dlo ? hi : lo;
        } else {
          label = km::nearest_centroid(x.data(), cs.data(), k, d);
        }
      }
      ASSERT_EQ(label, km::nearest_centroid(x.data(), cs.data(), k, d)) << "d=" << d << " object " << i;
    }
    EXPECT_GT(rechecked, 0u) << "d=" << d << ": the data has exact ties, so some must be re-checked";
  }
}

TEST(TensorMargin, FloatDecisionGivesSeqLabels) { check_decision<float>(); }
TEST(TensorMargin, DoubleDecisionGivesSeqLabels) { check_decision<double>(); }
TEST(TensorMargin, DoubleOnTf32DecisionGivesSeqLabels) { check_decision<double, true>(); }

// k-means||'s ceiling (margin.hpp: "A ceiling"), for the keys its rounds use (float's tensor
// path, and double data on TF32 candidates): every row whose distance by the CPU's k-means||
// formula (squared_distance_double) is below h has a key below T_h rounded up to float, so
// leaving out the keys at or above it never loses a row that beats h. The ceilings h sit on
// the rows' own distances, one step either side of them, and between: quantised data with
// exact ties among the rows. Returns how many rows that beat h had a key at or above the
// threshold built with `e_factor` E's in place of 3 (0 for the bound itself; the test below
// shows that without the E terms some are lost, so this check can fail).
template <class T>
std::size_t ceiling_losses(double e_factor) {
  std::mt19937_64 rng(23);
  std::size_t lost = 0, beaten = 0;
  for (std::size_t d : {3, 16, 64, 128}) {
    const auto b = sizeof(T) == 8 ? km::kernels::tf32_candidates_bound(d) : bound_for<float>(d);
    for (int kind : {0, 3}) {
      const std::size_t n = 200, m = 30;
      std::vector<std::vector<T>> xs(n), rows(m);
      for (auto& x : xs) x = draw<T>(rng, d, kind);
      for (std::size_t t = 0; t < m; ++t) rows[t] = xs[(t / 2 * 2) * 7 % n];  // equal rows in pairs: ties
      std::vector<T> mu(d);
      for (std::size_t p = 0; p < d; ++p) {
        double s = 0;
        for (const auto& x : xs) s += static_cast<double>(x[p]);
        mu[p] = static_cast<T>(s / static_cast<double>(n));
      }
      std::vector<std::vector<T>> cc(m);
      double cmax2 = 0;
      for (std::size_t t = 0; t < m; ++t) {
        cc[t] = minus(rows[t], mu);
        cmax2 = std::max(cmax2, norm2(cc[t]));
      }
      for (std::size_t i = 0; i < n; ++i) {
        const auto xo = minus(xs[i], mu);
        const double xc2 = norm2(xo);
        std::vector<double> dist(m);
        std::vector<float> key(m);
        for (std::size_t t = 0; t < m; ++t) {
          dist[t] = km::squared_distance_double(xs[i].data(), rows[t].data(), d);
          if constexpr (sizeof(T) == 8)
            key[t] = tf32_candidate_key(xo, cc[t]);
          else
            key[t] = emulated_key(xo, cc[t], keyed_term(cc[t], mu));
        }
        const double on = dist[rng() % m], between = (dist[rng() % m] + dist[rng() % m]) / 2;
        for (double h : {on, std::nextafter(on, INFINITY), std::nextafter(on, 0.0), between, 0.0}) {
          const double e = km::kernels::candidate_error(b, xc2, 0.0, cmax2);
          const double full = km::kernels::ceiling_threshold(b, xc2, 0.0, cmax2, h);
          const float threshold = static_cast<float>(std::nextafter(full + (e_factor - 3) * e, INFINITY));
          for (std::size_t t = 0; t < m; ++t)
            if (dist[t] < h) {
              ++beaten;
              if (!(key[t] < threshold)) ++lost;
            }
        }
      }
    }
  }
  EXPECT_GT(beaten, 1000u) << "the ceilings must let many rows beat them";
  return lost;
}
TEST(TensorMargin, FloatCeilingKeepsEveryRowThatBeatsIt) { EXPECT_EQ(ceiling_losses<float>(3), 0u); }
TEST(TensorMargin, DoubleOnTf32CeilingKeepsEveryRowThatBeatsIt) { EXPECT_EQ(ceiling_losses<double>(3), 0u); }
TEST(TensorMargin, CeilingWithoutErrorTermsLosesRows) {
  EXPECT_GT(ceiling_losses<float>(0) + ceiling_losses<double>(0), 0u);
}


// The one-pass delta kernel's float filter (6_fused_delta.cuh, margin.hpp: filter_bound),
// emulated on the CPU with the kernel's own operations (IEEE float fma, min and max are the
// same bits on both): centre = the centroids' mean in T, c'' and x'' rounded to float, scores
// with the index in the low bits for K <= 64, the runner-up, the test, seq's formula for the
// close calls. Returns the labels and counts the re-checks. `shrink` divides the margin (the
// test below shows a margin too small gives wrong labels, so this check can fail).
// The kernel's scores of one object against centroids cs ([k][d]) with `factor` divided by
// `shrink`: the winner's and the runner-up's (index bits included), nx, the margin h, and the
// candidate label.
// With `mma` the scores are the tensor-core kernel's (MMA) at their worst: x'' and -2 c'' rounded
// to TF32 (cvt.rna), the products exact, every accumulation from cc truncated toward zero; and the
// factor filter_bound's for them unless `fma_factor` (then the FMA scores', which the test below
// shows too narrow for them).
template <class T>
struct DeltaScorer {
  DeltaScorer(const std::vector<T>& cs, std::size_t d_, std::size_t k_, double shrink, bool mma_ = false,
              bool fma_factor = false)
      : d(d_), k(k_), bits(km::kernels::delta_index_bits(k_)), mu(d_), a(k_ * d_), cc(k_), mma(mma_) {
    const auto b =
        km::kernels::filter_bound(d, bits, sizeof(T) == 8 ? 0x1p-53 : 0x1p-24, mma && !fma_factor);
    factor = static_cast<float>(b.factor / shrink);
    tiny = static_cast<float>(b.tiny);
    for (std::size_t j = 0; j < d; ++j) {
      T m = 0;
      for (std::size_t c = 0; c < k; ++c) m += cs[c * d + j];
      mu[j] = m / static_cast<T>(k);
    }
    for (std::size_t c = 0; c < k; ++c) {
      double sq = 0;
      for (std::size_t j = 0; j < d; ++j) {
        const float v = static_cast<float>(cs[c * d + j] - mu[j]);
        a[c * d + j] = -2.0f * v;
        sq += static_cast<double>(v) * v;
      }
      cc[c] = static_cast<float>(sq);
      r2 = std::max(r2, cc[c]);
      // The kernel's largest sum of a centroid's squared TF32 roundings (6_fused_delta.cuh, MMA).
      float rounding = 0;
      for (std::size_t j = 0; j < d; ++j) {
        const float delta = tf32_rna(a[c * d + j]) - a[c * d + j];
        rounding = std::fma(delta, delta, rounding);
      }
      roundings = std::max(roundings, rounding);
    }
    root_test = mma && !fma_factor;
    if (root_test) root2 = static_cast<float>(km::kernels::mma_root2(r2, roundings) / (shrink * shrink));
    mask = bits ? (1u << bits) - 1 : 0;
  }
  struct Scores {
    float best = INFINITY, second = INFINITY, nx = 0, h = 0;
    int label = 0;
    bool close = false;
  };
  Scores score(const T* x) const {
    Scores r;
    std::vector<float> xf(d);
    for (std::size_t j = 0; j < d; ++j) {
      xf[j] = static_cast<float>(x[j] - mu[j]);
      r.nx = std::fma(xf[j], xf[j], r.nx);
    }
    int bi = 0;
    for (std::size_t c = 0; c < k; ++c) {
      float f = cc[c];
      for (std::size_t j = 0; j < d; ++j)
        f = mma ? truncate_to_float(static_cast<double>(f) +
                                    static_cast<double>(tf32_rna(a[c * d + j])) * tf32_rna(xf[j]))
                : std::fma(a[c * d + j], xf[j], f);
      if (bits) {
        f = from_bits((bits_of(f) & ~mask) | static_cast<std::uint32_t>(c));
      } else if (f < r.best) {
        bi = static_cast<int>(c);
      }
      r.second = std::fmin(r.second, std::fmax(r.best, f));
      r.best = std::fmin(r.best, f);
    }
    r.label = bits ? static_cast<int>(bits_of(r.best) & mask) : bi;
    r.h = factor * (r.nx + r2) + tiny;
    if (root_test) {
      // The kernel's test of the TF32 term (margin.hpp: filter_bound with mma), in its float steps.
      const float l = (r.second - r.best) - r.h;
      r.close = !(l > 0.0f && l * l > root2 * r.nx);
    } else {
      r.close = !(r.second - r.best > r.h);
    }
    return r;
  }
  std::size_t d, k;
  int bits;
  std::vector<T> mu;
  std::vector<float> a, cc;
  float r2 = 0, factor = 0, root2 = 0, tiny = 0, roundings = 0;
  std::uint32_t mask = 0;
  bool mma = false, root_test = false;
};

// The one-pass delta kernel's float filter (6_fused_delta.cuh, margin.hpp: filter_bound),
// emulated on the CPU with the kernel's own operations (IEEE float fma, min and max are the
// same bits on both): centre = the centroids' mean in T, c'' and x'' rounded to float, scores
// with the index in the low bits for K <= 64, the runner-up, the test, seq's formula for the
// close calls. Returns the labels and counts the re-checks. `shrink` divides the margin (the
// test below shows a margin too small gives wrong labels, so this check can fail).
template <class T>
std::vector<int> delta_filter_labels(const std::vector<T>& xs, const std::vector<T>& cs, std::size_t d,
                                     std::size_t k, double shrink, std::size_t& rechecked, bool mma = false,
                                     bool fma_factor = false) {
  const std::size_t n = xs.size() / d;
  const DeltaScorer<T> scorer(cs, d, k, shrink, mma, fma_factor);
  std::vector<int> labels(n);
  rechecked = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto r = scorer.score(&xs[i * d]);
    int label = r.label;
    if (r.close) {
      ++rechecked;
      label = km::nearest_centroid(&xs[i * d], cs.data(), k, d);
    }
    labels[i] = label;
  }
  return labels;
}

// Near-ties on purpose: each object sits almost on the bisector of two centroids (off it by
// a relative `spread`, by default 1e-8, below float's resolution), plus tie-heavy quantised data
// and uniform data.
template <class T>
std::vector<T> near_tie_objects(const std::vector<T>& cs, std::size_t d, std::size_t k, std::size_t n,
                                std::mt19937_64& rng, double spread = 1e-8) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> xs(n * d);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c1 = rng() % k, c2 = (c1 + 1 + rng() % (k - 1)) % k;
    const double t = 0.5 + spread * u(rng);
    for (std::size_t j = 0; j < d; ++j)
      xs[i * d + j] = static_cast<T>(t * cs[c1 * d + j] + (1 - t) * cs[c2 * d + j]);
  }
  return xs;
}

// The same near-ties moved far from every centroid, each along a direction orthogonal to its two
// centroids' difference (so still near their bisector): |x''| far above R, where the MMA margin's
// sqrt(nx r2) term is far below the (nx + r2) it replaced (margin.hpp: filter_bound with mma).
template <class T>
std::vector<T> far_tie_objects(const std::vector<T>& cs, std::size_t d, std::size_t k, std::size_t n,
                               std::mt19937_64& rng, double offset) {
  std::normal_distribution<double> gauss(0, 1);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> xs(n * d);
  std::vector<double> e(d), w(d);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c1 = rng() % k, c2 = (c1 + 1 + rng() % (k - 1)) % k;
    double ee = 0, we = 0, ww = 0;
    for (std::size_t j = 0; j < d; ++j) {
      e[j] = static_cast<double>(cs[c1 * d + j]) - static_cast<double>(cs[c2 * d + j]);
      w[j] = gauss(rng);
      ee += e[j] * e[j];
      we += w[j] * e[j];
    }
    for (std::size_t j = 0; j < d; ++j) {
      if (ee > 0) w[j] -= we / ee * e[j];
      ww += w[j] * w[j];
    }
    const double t = 0.5 + 1e-8 * u(rng), scale = ww > 0 ? offset / std::sqrt(ww) : 0.0;
    for (std::size_t j = 0; j < d; ++j)
      xs[i * d + j] = static_cast<T>(t * cs[c1 * d + j] + (1 - t) * cs[c2 * d + j] + scale * w[j]);
  }
  return xs;
}

template <class T>
void check_delta_filter(bool mma = false) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  std::size_t near_rechecked = 0;
  for (std::size_t d : mma ? std::vector<std::size_t>{9, 16, 24, 32} : std::vector<std::size_t>{1, 2, 3, 8, 16, 32}) {
    for (std::size_t k : {2, 16, 64, 100}) {
      std::vector<T> cs(k * d);
      for (auto& v : cs) v = static_cast<T>(10 + u(rng));
      const std::size_t n = 1500;
      std::vector<T> uniform(n * d), quantised(n * d);
      for (auto& v : uniform) v = static_cast<T>(10 + u(rng));
      for (auto& v : quantised) v = static_cast<T>(static_cast<double>(rng() % 4) / 255.0);
      std::vector<T> qcs(k * d);
      for (std::size_t c = 0; c < k; ++c)
        for (std::size_t j = 0; j < d; ++j) qcs[c * d + j] = quantised[((c * 13) % n) * d + j];
      const std::vector<T> near = near_tie_objects(cs, d, k, n, rng);
      const std::vector<T> far = far_tie_objects(cs, d, k, n, rng, 40.0);
      for (int set = 0; set < (mma ? 4 : 3); ++set) {
        const auto& xs = set == 0 ? uniform : set == 1 ? quantised : set == 2 ? near : far;
        const auto& cen = set == 1 ? qcs : cs;
        std::size_t rechecked = 0;
        const auto labels = delta_filter_labels(xs, cen, d, k, 1.0, rechecked, mma);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(labels[i], km::nearest_centroid(&xs[i * d], cen.data(), k, d))
              << "d=" << d << " k=" << k << " set " << set << " object " << i;
        }
        if (set == 1 && k > 2) {
          EXPECT_GT(rechecked, 0u) << "quantised data has exact ties";
        }
        if (set == 2) near_rechecked += rechecked;
      }
    }
  }
  EXPECT_GT(near_rechecked, 0u);
}

TEST(DeltaFilter, FloatGivesSeqLabels) { check_delta_filter<float>(); }
TEST(DeltaFilter, DoubleGivesSeqLabels) { check_delta_filter<double>(); }
// The tensor-core scores (MMA, d 9-32) with their widened margin (the kernel re-scores their close
// calls with FMAs first; here seq's formula takes them directly).
TEST(DeltaFilter, MmaFloatGivesSeqLabels) { check_delta_filter<float>(true); }
TEST(DeltaFilter, MmaDoubleGivesSeqLabels) { check_delta_filter<double>(true); }

// TF32 scores need the widened margin: with the FMA scores' factor, objects off a bisector by
// far more than float's resolution (1e-5 relative) but within TF32's get labels that are not seq's.
TEST(DeltaFilter, MmaWithFmaMarginGivesWrongLabels) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  const std::size_t d = 32, k = 64, n = 4000;
  std::vector<float> cs(k * d);
  for (auto& c : cs) c = static_cast<float>(u(rng));
  const std::vector<float> xs = near_tie_objects(cs, d, k, n, rng, 1e-5);
  std::size_t rechecked = 0, wrong = 0, wrong_widened = 0;
  const auto labels = delta_filter_labels(xs, cs, d, k, 1.0, rechecked, true, true);
  const auto widened = delta_filter_labels(xs, cs, d, k, 1.0, rechecked, true, false);
  for (std::size_t i = 0; i < n; ++i) {
    const int seq = km::nearest_centroid(&xs[i * d], cs.data(), k, d);
    wrong += labels[i] != seq;
    wrong_widened += widened[i] != seq;
  }
  EXPECT_GT(wrong, 0u);
  EXPECT_EQ(wrong_widened, 0u);
}

// The margin matters: divided by 10^4, near-ties are let through with labels that are not seq's.
TEST(DeltaFilter, TooSmallMarginGivesWrongLabels) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0, 1);
  const std::size_t d = 2, k = 16, n = 4000;
  std::vector<double> cs(k * d);
  for (auto& v : cs) v = 10 + u(rng);
  const auto xs = near_tie_objects(cs, d, k, n, rng);
  std::size_t rechecked = 0, wrong = 0;
  const auto labels = delta_filter_labels(xs, cs, d, k, 1e4, rechecked);
  for (std::size_t i = 0; i < n; ++i) wrong += labels[i] != km::nearest_centroid(&xs[i * d], cs.data(), k, d);
  EXPECT_GT(wrong, 0u);
}

// The delta kernel's inertia addends from its float scores (margin.hpp: approx_dist_bound) with
// the kernel's arithmetic (DeltaScorer: x'', nx, the winner's score with its index bits; the
// kernel's test, one fma against eta_test a): wherever the test takes a = fl(nx + f_w) for an
// object the filter called, |a - D| <= eta a, D the exact distance to the winner (long double).
// Data: uniform offset from the origin, quantised, near-ties, and objects near a centroid (D far
// below S^2, where the bound must refuse); d = 8, 16, 32 (the kernels' widths from 8), K = 2, 16,
// 64 (index packed) and 100 (not). Returns the violations; `taken` and `called` count the objects
// the test took and those the filter called. `shrink` divides the bound's factor and tiny.
std::size_t approx_dist_violations(double shrink, std::size_t& taken, std::size_t& called) {
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> u(0, 1);
  std::size_t bad = 0;
  taken = called = 0;
  for (std::size_t d : {8, 16, 32}) {
    for (std::size_t k : {2, 16, 64, 100}) {
      std::vector<float> cs(k * d);
      for (auto& v : cs) v = static_cast<float>(10 + u(rng));
      const std::size_t n = 1000;
      std::vector<float> uniform(n * d), quantised(n * d), near_c(n * d);
      for (auto& v : uniform) v = static_cast<float>(10 + u(rng));
      for (auto& v : quantised) v = static_cast<float>(static_cast<double>(rng() % 4) / 255.0);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t c = rng() % k;
        for (std::size_t j = 0; j < d; ++j) near_c[i * d + j] = static_cast<float>(cs[c * d + j] + 1e-3 * u(rng));
      }
      std::vector<float> qcs(k * d);
      for (std::size_t c = 0; c < k; ++c)
        for (std::size_t j = 0; j < d; ++j) qcs[c * d + j] = quantised[((c * 13) % n) * d + j];
      const std::vector<float> near = near_tie_objects(cs, d, k, n, rng);
      const km::kernels::ApproxDistBound b = km::kernels::approx_dist_bound(d, km::kernels::delta_index_bits(k));
      const float factor = static_cast<float>(b.factor / shrink), tiny = static_cast<float>(b.tiny / shrink),
                  eta_test = static_cast<float>(b.eta_test);
      for (int set = 0; set < 4; ++set) {
        const auto& xs = set == 0 ? uniform : set == 1 ? quantised : set == 2 ? near : near_c;
        const auto& cen = set == 1 ? qcs : cs;
        const DeltaScorer<float> scorer(cen, d, k, 1.0);
        for (std::size_t i = 0; i < n; ++i) {
          const auto r = scorer.score(&xs[i * d]);
          if (r.close) continue;
          ++called;
          const float a = r.nx + r.best;
          if (!(std::fma(factor, r.nx + scorer.r2, tiny) <= eta_test * a)) continue;
          ++taken;
          long double exact = 0;
          for (std::size_t j = 0; j < d; ++j) {
            const long double e = static_cast<long double>(xs[i * d + j]) - cen[static_cast<std::size_t>(r.label) * d + j];
            exact += e * e;
          }
          if (std::fabs(static_cast<long double>(a) - exact) > static_cast<long double>(b.eta) * a) ++bad;
        }
      }
    }
  }
  return bad;
}

TEST(ApproxDist, TakenAddendsWithinEta) {
  std::size_t taken = 0, called = 0;
  EXPECT_EQ(approx_dist_violations(1.0, taken, called), 0u);
  EXPECT_GT(taken, called / 3) << "uniform, quantised and near-tie data: most called objects taken";
  EXPECT_LT(taken, called) << "objects near a centroid: refused";
}

// The bound matters: divided by 10^4, the test takes objects near their centroid whose addend is
// off by more than eta.
TEST(ApproxDist, TooSmallBoundTakesWrongAddends) {
  std::size_t taken = 0, called = 0;
  EXPECT_GT(approx_dist_violations(1e4, taken, called), 0u);
}


// The delta kernel's cell table at d = 2 (cells.hpp): every object whose computed cell is
// labelled must have seq's label there. Objects: uniform, on the centroids' bisectors (exact
// and near ties), on and beside the cells' edges and corners; centroids uniform or on a coarse
// lattice (bisectors along the cells' edges, duplicates). `proved` false labels each cell by the
// centroid nearest its centre without the corner test: the check must then find wrong labels.
// Returns the objects found wrong; `labelled` counts those the table labelled.
template <class T>
std::size_t cell_table_wrong(std::size_t k, int side, bool lattice, bool proved, std::uint64_t seed,
                             std::size_t& labelled, std::size_t& objects) {
  using km::kernels::CellGrid;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const double offset = lattice ? 0 : 100;  // away from the origin: the index's rounding counts
  std::vector<T> cs(k * 2);                 // row-major [k][2] for seq
  for (std::size_t c = 0; c < k; ++c)
    for (int p = 0; p < 2; ++p)
      cs[c * 2 + p] = static_cast<T>(lattice ? std::floor(u(rng) * 4) : offset + u(rng));
  std::vector<T> xs;
  auto add = [&](double a, double b) {
    xs.push_back(static_cast<T>(a));
    xs.push_back(static_cast<T>(b));
  };
  const double lo[2] = {offset - 0.1, offset - 0.1}, hi[2] = {offset + (lattice ? 4.1 : 1.1), offset + (lattice ? 4.1 : 1.1)};
  for (int i = 0; i < 20000; ++i) add(lo[0] + u(rng) * (hi[0] - lo[0]), lo[1] + u(rng) * (hi[1] - lo[1]));
  for (std::size_t a = 0; a < k; ++a)
    for (std::size_t b = a + 1; b < k; ++b) {
      // Points on the bisector of a and b, exactly (in T's rounding) and a few ulps off.
      const double ax = cs[a * 2], ay = cs[a * 2 + 1], bx = cs[b * 2], by = cs[b * 2 + 1];
      for (int t = 0; t < 40; ++t) {
        const double s = (u(rng) - 0.5) * 3;
        const double px = 0.5 * (ax + bx) - s * (by - ay), py = 0.5 * (ay + by) + s * (bx - ax);
        const double ulp = std::numeric_limits<T>::epsilon() * (std::fabs(px) + std::fabs(py) + 1);
        for (int q = -2; q <= 2; ++q) add(px + q * ulp * (bx - ax), py + q * ulp * (by - ay));
      }
    }
  const CellGrid g = km::kernels::cell_grid(lo, hi, side, std::numeric_limits<T>::epsilon() / 2,
                                            static_cast<double>(std::numeric_limits<T>::min()));
  EXPECT_EQ(g.side, side);
  for (int i = 0; i <= side; ++i)
    for (int t = 0; t < 8; ++t) {  // the cells' edges and corners, on them and beside them
      const double ex = static_cast<double>(g.lo[0]) + i * static_cast<double>(g.w[0]);
      const double ey = static_cast<double>(g.lo[1]) + (u(rng) * side) * static_cast<double>(g.w[1]);
      const double ulp = std::numeric_limits<T>::epsilon() * (std::fabs(ex) + 1);
      add(ex + (t - 4) * ulp, ey);
      add(ey, ex + (t - 4) * ulp);
      const double cy = static_cast<double>(g.lo[1]) + (i + (t % 3) - 1) * static_cast<double>(g.w[1]);
      add(ex + (t - 4) * ulp, cy);
    }
  // The range's own corners and edges (the largest T at or below hi, the least at or above lo):
  // the lean lookup's clamp.
  auto inward = [](double v, double toward) {
    T t = static_cast<T>(v);
    if ((toward < v && static_cast<double>(t) > v) || (toward > v && static_cast<double>(t) < v))
      t = std::nextafter(t, static_cast<T>(toward));
    return static_cast<double>(t);
  };
  const double in_lo[2] = {inward(lo[0], hi[0]), inward(lo[1], hi[1])}, in_hi[2] = {inward(hi[0], lo[0]), inward(hi[1], lo[1])};
  for (int q = 0; q < 4; ++q) add(q & 1 ? in_hi[0] : in_lo[0], q & 2 ? in_hi[1] : in_lo[1]);
  for (int t = 0; t < 50; ++t) {
    add(in_hi[0], lo[1] + u(rng) * (hi[1] - lo[1]));
    add(lo[0] + u(rng) * (hi[0] - lo[0]), in_hi[1]);
  }
  std::vector<T> coords(2 * k);  // [2][k] for the table
  for (std::size_t c = 0; c < k; ++c) {
    coords[c] = cs[c * 2];
    coords[k + c] = cs[c * 2 + 1];
  }
  std::vector<int> table(static_cast<std::size_t>(side) * side);
  for (int j = 0; j < side; ++j)
    for (int i = 0; i < side; ++i) {
      int label = km::kernels::cell_label(coords.data(), static_cast<int>(k), i, j, g);
      if (!proved) {  // the centroid nearest the centre, unproved
        const T centre[2] = {static_cast<T>(g.lo[0] + (i + 0.5) * g.w[0]), static_cast<T>(g.lo[1] + (j + 0.5) * g.w[1])};
        label = km::nearest_centroid(centre, cs.data(), k, 2);
      }
      table[static_cast<std::size_t>(j) * side + i] = label;
    }
  std::size_t wrong = 0, candidate_checks = 0;
  labelled = 0;
  objects = xs.size() / 2;
  for (std::size_t i = 0; i < objects; ++i) {
    // The lean passes' lookup (cell_in_range), for the objects of the range the grid was built on.
    const double x0 = static_cast<double>(xs[2 * i]), x1 = static_cast<double>(xs[2 * i + 1]);
    if (x0 >= lo[0] && x0 <= hi[0] && x1 >= lo[1] && x1 <= hi[1]) {
      const int lean = km::kernels::cell_in_range(xs[2 * i], xs[2 * i + 1], g);
      if (lean < 0 || lean >= side * side) {
        ADD_FAILURE() << "object (" << x0 << ", " << x1 << "): lean cell " << lean << " off the grid";
      } else if (table[static_cast<std::size_t>(lean)] == km::kernels::kCellMixed) {
        // A mixed cell's object: seq's label among the cell's candidates.
        const int seq = km::nearest_centroid(&xs[2 * i], cs.data(), k, 2);
        const unsigned long long cand =
            km::kernels::cell_candidates(coords.data(), static_cast<int>(k), lean % side, lean / side, g);
        if (proved && !(cand >> seq & 1u)) {
          ++wrong;
          ADD_FAILURE() << "k=" << k << " side=" << side << " object (" << x0 << ", " << x1 << "): seq's " << seq
                        << " not among cell " << lean << "'s candidates " << cand;
        }
        ++candidate_checks;
      } else {
        const int seq = km::nearest_centroid(&xs[2 * i], cs.data(), k, 2);
        if (seq != table[static_cast<std::size_t>(lean)]) {
          ++wrong;
          if (proved)
            ADD_FAILURE() << "k=" << k << " side=" << side << " lattice=" << lattice << " object (" << x0 << ", "
                          << x1 << "): lean cell " << lean << " says " << table[static_cast<std::size_t>(lean)]
                          << ", seq " << seq;
        }
      }
    }
    const int cell = km::kernels::cell_of(xs[2 * i], xs[2 * i + 1], g);
    if (cell < 0 || table[static_cast<std::size_t>(cell)] == km::kernels::kCellMixed) continue;
    ++labelled;
    const int seq = km::nearest_centroid(&xs[2 * i], cs.data(), k, 2);
    if (seq != table[static_cast<std::size_t>(cell)]) {
      ++wrong;
      if (proved)
        ADD_FAILURE() << "k=" << k << " side=" << side << " lattice=" << lattice << " object (" << xs[2 * i] << ", "
                      << xs[2 * i + 1] << "): cell " << cell << " says " << table[static_cast<std::size_t>(cell)]
                      << ", seq " << seq;
    }
  }
  if (proved && k > 1) {
    EXPECT_GT(candidate_checks, 0u) << "k=" << k << " side=" << side << ": no object of a mixed cell";
  }
  return wrong;
}

template <class T>
void check_cell_table() {
  for (const std::size_t k : {1u, 2u, 5u, 16u, 64u})
    for (const int side : {4, 64, 128})
      for (const bool lattice : {false, true}) {
        std::size_t labelled = 0, objects = 0;
        EXPECT_EQ(cell_table_wrong<T>(k, side, lattice, true, 17 + k + side, labelled, objects), 0u);
        // The table does its job: most uniform objects take a cell's label at 128 x 128.
        if (side == 128 && k <= 16 && !lattice) {
          EXPECT_GT(labelled, objects / 2) << "k=" << k << " lattice=" << lattice;
        }
      }
}

TEST(CellTable, FloatGivesSeqLabels) { check_cell_table<float>(); }
TEST(CellTable, DoubleGivesSeqLabels) { check_cell_table<double>(); }

// Without the corner test (each cell labelled by the centroid nearest its centre), objects
// beside the Voronoi edges get labels that are not seq's: the check above can fail.
TEST(CellTable, UnprovedLabelsAreWrong) {
  std::size_t labelled = 0, objects = 0;
  EXPECT_GT(cell_table_wrong<double>(16, 64, false, false, 5, labelled, objects), 0u);
  EXPECT_GT(cell_table_wrong<float>(16, 64, true, false, 5, labelled, objects), 0u);
}

// The grid refuses what its proofs do not cover: a coordinate without extent, a range too
// narrow for its magnitude, a non-finite bound, a side beyond the index's rounding budget.
TEST(CellTable, GridRefusesWhatItCannotProve) {
  const double lo[2] = {0, 0}, hi[2] = {1, 1}, flat[2] = {1, 0};
  EXPECT_EQ(km::kernels::cell_grid(lo, hi, 128, 0x1p-24, FLT_MIN).side, 128);
  EXPECT_EQ(km::kernels::cell_grid(lo, flat, 128, 0x1p-24, FLT_MIN).side, 0);
  const double far_lo[2] = {0x1p40, 0}, far_hi[2] = {0x1p40 + 0x1p-10, 1};
  EXPECT_EQ(km::kernels::cell_grid(far_lo, far_hi, 128, 0x1p-53, DBL_MIN).side, 0);
  const double inf_hi[2] = {INFINITY, 1};
  EXPECT_EQ(km::kernels::cell_grid(lo, inf_hi, 128, 0x1p-24, FLT_MIN).side, 0);
  EXPECT_EQ(km::kernels::cell_grid(lo, hi, 0, 0x1p-24, FLT_MIN).side, 0);
  EXPECT_EQ(km::kernels::cell_grid(lo, hi, km::kernels::kCellMaxSide + 4, 0x1p-24, FLT_MIN).side, 0);
  // Each object of the range lands in a cell; beyond it, none.
  const km::kernels::CellGrid g = km::kernels::cell_grid(lo, hi, 128, 0x1p-24, FLT_MIN);
  EXPECT_GE(km::kernels::cell_of(0.0f, 0.0f, g), 0);
  EXPECT_GE(km::kernels::cell_of(1.0f, 1.0f, g), 0);
  EXPECT_EQ(km::kernels::cell_of(-0.01f, 0.5f, g), -1);
  EXPECT_EQ(km::kernels::cell_of(0.5f, NAN, g), -1);
}

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

}  // namespace

namespace {

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

}  // namespace

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

// margin.hpp: ordered_key / key_from_ordered, and the delta kernel's top two of a warp's keys by
// two minima of them (the tensor-core path's re-score, at register width 32).
TEST(Keys, OrderedKeyKeepsOrder) {
  std::mt19937_64 rng(17);
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MAX,
                          -FLT_MAX, INFINITY, -INFINITY};
  std::uniform_real_distribution<double> mag(-40.0, 40.0);
  for (int i = 0; i < 2000; ++i) {
    const float x = static_cast<float>(std::exp2(mag(rng)));
    v.push_back(i % 2 ? x : -x);
  }
  for (const float a : v) {
    const float back = km::kernels::key_from_ordered(km::kernels::ordered_key(a));
    EXPECT_EQ(std::memcmp(&a, &back, sizeof a), 0) << a;
    for (int t = 0; t < 8; ++t) {
      const float b = v[rng() % v.size()];
      if (a < b) {
        EXPECT_LT(km::kernels::ordered_key(a), km::kernels::ordered_key(b)) << a << " " << b;
      }
      if (b < a) {
        EXPECT_GT(km::kernels::ordered_key(a), km::kernels::ordered_key(b)) << a << " " << b;
      }
    }
  }
  EXPECT_LT(km::kernels::ordered_key(-0.0f), km::kernels::ordered_key(0.0f));
}

TEST(Keys, TopTwoByTwoMinima) {
  // 32 lanes, centroids lane and lane + 32 (INFINITY past K), keys with the index in their low
  // six bits as the kernel's: the least key and the least of each lane's other one (its runner-up
  // where it holds the least, else its best) are the smallest and second smallest of all.
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<float> score(-3.0f, 3.0f);
  for (const int k : {1, 2, 5, 32, 33, 48, 64}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> keys;
      float lo[32], hi[32];
      auto key = [&](int c) {
        if (c >= k) return INFINITY;
        const float f = trial % 3 == 0 ? score(rng) * 1e-3f : score(rng);  // near ties too
        unsigned u;
        std::memcpy(&u, &f, sizeof u);
        u = (u & ~63u) | static_cast<unsigned>(c);
        float out;
        std::memcpy(&out, &u, sizeof out);
        keys.push_back(out);
        return out;
      };
      for (int lane = 0; lane < 32; ++lane) {
        const float f0 = key(lane), f1 = key(lane + 32);
        lo[lane] = std::fmin(f0, f1);
        hi[lane] = std::fmax(f0, f1);
      }
      unsigned least = ~0u, next = ~0u;
      for (int lane = 0; lane < 32; ++lane) least = std::min(least, km::kernels::ordered_key(lo[lane]));
      for (int lane = 0; lane < 32; ++lane)
        next = std::min(next, km::kernels::second_key_operand(lo[lane], hi[lane], least));
      std::sort(keys.begin(), keys.end());
      const float best = km::kernels::key_from_ordered(least), second = km::kernels::key_from_ordered(next);
      ASSERT_EQ(best, keys[0]) << "k " << k;
      ASSERT_EQ(second, k > 1 ? keys[1] : INFINITY) << "k " << k;
    }
  }
}

// The cells' sorted order (cells.hpp: owned_chunks): over random cell sizes (empty cells, cells
// smaller and larger than a chunk, a whole run ending on a chunk's edge), every whole chunk has one
// owner, the cell holding its first object; its single chunks hold that cell's objects alone, and
// a cell owns at most one chunk beyond them, which runs on into a later cell. Without the partition
// a chunk would be read twice or never.
TEST(CellOrder, EveryWholeChunkOneOwner) {
  std::mt19937_64 rng(11);
  for (const unsigned chunk : {1u, 4u, 128u}) {
    for (int round = 0; round < 200; ++round) {
      const int cells = 1 + static_cast<int>(rng() % 300);
      std::vector<unsigned> starts(1, 0);
      for (int c = 0; c < cells; ++c) {
        const unsigned kind = static_cast<unsigned>(rng() % 4);
        const unsigned size = kind == 0 ? 0u : kind == 1 ? static_cast<unsigned>(rng() % chunk + 1)
                                          : kind == 2 ? chunk * static_cast<unsigned>(rng() % 3 + 1)
                                                      : static_cast<unsigned>(rng() % (5 * chunk) + 1);
        starts.push_back(starts.back() + size);
      }
      const unsigned n = starts.back(), whole = n / chunk;
      std::vector<int> owner(whole, -1);
      for (int c = 0; c < cells; ++c) {
        const auto o = km::kernels::owned_chunks(starts[c], starts[c + 1], whole, chunk);
        ASSERT_LE(o.first, o.single_end);
        ASSERT_LE(o.single_end, o.end);
        ASSERT_LE(o.end - o.single_end, 1u) << "at most one shared chunk a cell";
        ASSERT_LE(o.end, whole);
        for (unsigned q = o.first; q < o.end; ++q) {
          ASSERT_EQ(owner[q], -1) << "chunk " << q << " owned twice";
          owner[q] = c;
          ASSERT_GE(q * chunk, starts[c]) << "its first object is the owner's";
          ASSERT_LT(q * chunk, starts[c + 1]);
          const bool single = (q + 1) * chunk <= starts[c + 1];
          EXPECT_EQ(single, q < o.single_end) << "chunk " << q << " of cell " << c;
        }
      }
      for (unsigned q = 0; q < whole; ++q) ASSERT_NE(owner[q], -1) << "chunk " << q << " of " << whole << " unowned";
    }
  }
}

// A held cell's inertia by algebra (cells.hpp: held_cell_inertia) from sums formed as cell_stats
// forms them (32 lanes' strided sums in double, then the warp's tree), against the objects' exact
// sum (long double, per object): wherever it says sure, within 2^-40 of it. Uniform objects in
// cells far from the origin (the algebra's terms far above q only when the centroid sits on the
// objects) with the centroid inside, beside or far from the cell: most must be sure (else no cell
// would ever be skipped). All of a cell's objects on one point with the centroid just off it (as
// on quantised data): q cancels, the algebra's own error far above 2^-40 q, and it must refuse.
namespace {
struct CellCase {
  double s0 = 0, s1 = 0, s2 = 0, n = 0;
  long double exact = 0;
};
CellCase cell_case(const std::vector<double>& xs, const std::vector<double>& ys, double m0, double m1, double c0,
                   double c1) {
  double lane[3][32] = {};
  CellCase r;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double a = xs[i] - m0, b = ys[i] - m1;
    lane[0][i % 32] += a;
    lane[1][i % 32] += b;
    lane[2][i % 32] += a * a + b * b;
    const long double da = static_cast<long double>(xs[i]) - c0, db = static_cast<long double>(ys[i]) - c1;
    r.exact += da * da + db * db;
  }
  for (int off = 16; off > 0; off /= 2)
    for (int l = 0; l < off; ++l)
      for (int q = 0; q < 3; ++q) lane[q][l] += lane[q][l + off];
  r.s0 = lane[0][0];
  r.s1 = lane[1][0];
  r.s2 = lane[2][0];
  r.n = static_cast<double>(xs.size());
  return r;
}
}  // namespace

TEST(CellOrder, HeldInertiaWithinItsBound) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int sure = 0, cases = 0;
  for (int round = 0; round < 600; ++round) {
    const double w = std::ldexp(1.0, static_cast<int>(rng() % 20) - 10), m0 = (u(rng) - 0.5) * 2000 * w,
                 m1 = (u(rng) - 0.5) * 2000 * w;
    const std::size_t n = std::size_t{128} << (rng() % 6);
    std::vector<double> xs(n), ys(n);
    for (std::size_t i = 0; i < n; ++i) {
      xs[i] = m0 + (u(rng) - 0.5) * w;
      ys[i] = m1 + (u(rng) - 0.5) * w;
    }
    const double reach = round % 3 == 0 ? 0.5 : round % 3 == 1 ? 2.0 : 40.0;  // inside, beside, far
    const double c0 = m0 + (u(rng) - 0.5) * 2 * reach * w, c1 = m1 + (u(rng) - 0.5) * 2 * reach * w;
    const CellCase c = cell_case(xs, ys, m0, m1, c0, c1);
    const auto h = km::kernels::held_cell_inertia(c.s0, c.s1, c.s2, c.n, c0 - m0, c1 - m1, w, w);
    ++cases;
    if (h.sure) {
      ++sure;
      EXPECT_LE(std::fabs(static_cast<long double>(h.q) - c.exact), 0x1p-40L * c.exact)
          << "n " << n << " w " << w << " reach " << reach;
    }
  }
  EXPECT_GT(sure, cases * 9 / 10) << "the bound refused most uniform cells";
  // All objects on one point p, the centroid 1e-7 of a cell off it.
  int refused = 0, wide = 0;
  for (int round = 0; round < 100; ++round) {
    const double w = 1.0 / 64, m0 = 0.3 + w / 2, m1 = 0.7 + w / 2;
    const double p0 = m0 + (u(rng) - 0.5) * w, p1 = m1 + (u(rng) - 0.5) * w;
    const std::size_t n = 29000;
    const std::vector<double> xs(n, p0), ys(n, p1);
    const double c0 = p0 + 1e-7 * w * (u(rng) - 0.5), c1 = p1 + 1e-7 * w * (u(rng) - 0.5);
    const CellCase c = cell_case(xs, ys, m0, m1, c0, c1);
    const auto h = km::kernels::held_cell_inertia(c.s0, c.s1, c.s2, c.n, c0 - m0, c1 - m1, w, w);
    if (!h.sure) ++refused;
    else
      EXPECT_LE(std::fabs(static_cast<long double>(h.q) - c.exact), 0x1p-40L * c.exact);
    if (std::fabs(static_cast<long double>(h.q) - c.exact) > 0x1p-40L * c.exact) ++wide;
  }
  EXPECT_EQ(refused, 100) << "cancelling cells taken by algebra";
  EXPECT_GT(wide, 50) << "the algebra was within 2^-40 anyway: the case tests nothing";
}
