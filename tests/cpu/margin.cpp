// The exactness bounds of kernels/kmeans/margin.hpp, each checked on the CPU against an
// emulation of the worst the hardware may do, with exact values in __float128: the tensor path's
// keys (TF32 rounding, every FP32 accumulation step truncated toward zero), its decision (top
// three keys, margin, re-check) against seq's nearest centroid on tie-heavy data, and k-means||'s
// ceilings; the one-pass delta kernel's float filter and its tensor-core variant; the inertia's
// addends taken from the scores; the ordered keys. Each also shows that a bound made too small
// gives wrong answers, so the check can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "emulation.hpp"
#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/margin.hpp"
#include "kmeans/cpu_steps.hpp"

namespace {

using namespace kmtest;

using km::kernels::candidate_bound;
using km::kernels::candidate_margin;

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

// Float on float16 tensor cores (margin.hpp: f16_candidates_bound), as the wgmma kernel forms
// its keys: x' scaled by 2^ex and rounded to float16, c' rounded to TF32, scaled by 2^ec (from
// cmax2, as the image kernel) and rounded to float16, products exact, every accumulation
// truncated, then keyed + 2^(1 - ex - ec) times the sum, rounded once. With `flush`, float16
// subnormals read as zero (the bound allows tensor cores that flush them).
float to_half(float v, bool flush) {
  const float h = static_cast<float>(static_cast<_Float16>(v));
  return flush && std::fabs(h) < 0x1p-14f ? 0.0f : h;
}
float f16_key(const std::vector<float>& xo, const std::vector<float>& cc, float keyed, int ex, double cmax2,
              bool flush = false) {
  const int ec = km::kernels::f16_scale_exponent(std::sqrt(cmax2));
  float dot = 0;
  for (std::size_t p = 0; p < xo.size(); ++p) {
    const float xh = to_half(xo[p] * std::ldexp(1.0f, ex), flush);
    const float ch = to_half(tf32_rna(cc[p]) * std::ldexp(1.0f, ec), flush);
    dot = truncate_to_float(static_cast<double>(dot) + static_cast<double>(xh) * ch);
  }
  return keyed + std::ldexp(-2.0f, -ex - ec) * dot;
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
// this check can tell a bound too small). F16: float on float16 tensor cores, the objects'
// scale from their largest coordinate times 2^0 to 2^23 (so that some fall below float16's
// normal range: the bound's absolute term).
template <class T, bool TF32 = false, bool F16 = false>
void check_key_bound() {
  static_assert(!TF32 || sizeof(T) == 8, "TF32 candidates are double's");
  static_assert(!F16 || sizeof(T) == 4, "float16 scores are float's");
  constexpr bool centred = centre_objects<T> || TF32;
  std::mt19937_64 rng(7);
  for (std::size_t d : {1, 3, 64, 784, 4096}) {
    auto b = TF32 ? km::kernels::tf32_candidates_bound(d) : bound_for<T>(d);
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
        int ex = 0;
        if constexpr (F16) {
          double largest = 0;
          for (T v : xo) largest = std::max(largest, std::fabs(static_cast<double>(v)));
          ex = km::kernels::f16_scale_exponent(std::ldexp(largest, static_cast<int>(rng() % 24)));
          b = km::kernels::f16_candidates_bound(d, ex);
        }
        const double e = b.a * cn * cn + b.b * xn * cn + b.b_mu * mn * cn + b.x_abs * cn + b.tiny;
        const Quad k = centred ? squared(xo, cc) - squared(xo, std::vector<T>(d, T(0)))
                               : squared(x, mu, &cc) - squared(x, mu);
        Quad key = 0;
        if constexpr (TF32)
          key = static_cast<Quad>(tf32_candidate_key(xo, cc));
        else if constexpr (F16)
          key = static_cast<Quad>(f16_key(xo, cc, keyed_term(cc, mu), ex, norm2(cc), trial % 2 == 1));
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
TEST(TensorMargin, FloatOnF16KeyWithinBound) { check_key_bound<float, false, true>(); }

// The float16 bound's absolute term (x_abs) is needed: an object all of whose coordinates fall
// below float16's normal range once scaled (the data's largest coordinate, 1, sets ex), between
// two centroids whose keys its roundings move apart. With x_abs its keys lie within E and the
// margin sends it to the re-check (seq's label); without, one key leaves E and the margin
// would keep the wrong centroid. Subnormals read as they are and flushed to zero alike.
TEST(TensorMargin, FloatOnF16AbsoluteTermNeeded) {
  const std::size_t d = 64;
  const int ex = km::kernels::f16_scale_exponent(1.0);
  const float u = std::ldexp(1.0f, -38), beta = std::ldexp(1.0f, -23), alpha = beta - u / 2;
  std::vector<float> x(d), c1(d, 0.0f), c2(d, 0.0f);
  for (std::size_t p = 0; p < d; ++p) {
    if (p < d / 2) {
      x[p] = (0.5f + 1.0f / 256) * u;
      c2[p] = alpha;
    } else {
      x[p] = (1.5f - 1.0f / 256) * u;
      c1[p] = beta;
    }
  }
  const std::vector<float> mu(d, 0.0f);
  const double cmax2 = std::max(norm2(c1), norm2(c2)) * (1 + 1e-15), xc2 = norm2(x);
  const int seq_label = km::squared_distance(x.data(), c2.data(), d) < km::squared_distance(x.data(), c1.data(), d);
  for (bool flush : {false, true}) {
    SCOPED_TRACE(flush ? "subnormals flushed" : "subnormals read");
    const float a1 = f16_key(x, c1, keyed_term(c1, mu), ex, cmax2, flush);
    const float a2 = f16_key(x, c2, keyed_term(c2, mu), ex, cmax2, flush);
    const Quad k1 = squared(x, c1) - squared(x, mu), k2 = squared(x, c2) - squared(x, mu);
    const auto b = km::kernels::f16_candidates_bound(d, ex);
    auto without = b;
    without.x_abs = 0;
    const double e = km::kernels::candidate_error(b, xc2, 0.0, cmax2);
    const double e0 = km::kernels::candidate_error(without, xc2, 0.0, cmax2);
    const double err = std::max(std::fabs(static_cast<double>(static_cast<Quad>(a1) - k1)),
                                std::fabs(static_cast<double>(static_cast<Quad>(a2) - k2)));
    EXPECT_LE(err, e);
    EXPECT_GT(err, e0) << "without x_abs the key's error must leave the bound";
    // The decision: the smaller key's centroid, unless the other lies within the margin.
    const int by_keys = a2 < a1;
    const double best = std::min(a1, a2), gap = std::fabs(static_cast<double>(a1) - a2);
    EXPECT_FALSE(gap > km::kernels::candidate_margin(b, xc2, 0.0, cmax2, best) && by_keys != seq_label)
        << "the margin kept a label that is not seq's";
    if (!flush) {  // (flushed, both keys read no object at all and tie: re-checked either way)
      EXPECT_TRUE(gap > km::kernels::candidate_margin(without, xc2, 0.0, cmax2, best) && by_keys != seq_label)
          << "without x_abs the margin must keep the wrong label here, so that this test can fail";
    }
  }
}

// The whole decision on tie-heavy data, as the kernels make it: keys by the emulation, the
// three smallest, the margin, then seq's formula for the close calls. Must give seq's label on
// every object, and must have re-checked some (the data is built with exact ties).
template <class T, bool TF32 = false, bool F16 = false>
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
    int ex = 0;  // F16: the objects' scale from their largest centred coordinate
    auto fb = b;
    if constexpr (F16) {
      double largest = 0;
      for (std::size_t i = 0; i < n * d; ++i)
        largest = std::max(largest, std::fabs(static_cast<double>(xs[i] - mu[i % d])));
      ex = km::kernels::f16_scale_exponent(largest);
      fb = km::kernels::f16_candidates_bound(d, ex);
    }
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
        else if constexpr (F16)
          v = f16_key(xo, cc[c], keyed[c], ex, cmax2);
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
      const double m = candidate_margin(fb, xc2, mu_norm, cmax2, static_cast<double>(v1));
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
TEST(TensorMargin, FloatOnF16DecisionGivesSeqLabels) { check_decision<float, false, true>(); }

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

}  // namespace
