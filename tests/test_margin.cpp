// The tensor path's exactness bound (kernels/kmeans/margin.hpp), checked on the CPU against
// an emulation of the worst the tensor cores may do: TF32 inputs rounded to nearest (ties
// away), every FP32 accumulation step truncated toward zero (a rounding twice the nominal
// unit), products exact. Exact reference values in __float128. Then the whole decision (top
// three keys, margin, re-check) against seq's nearest centroid on tie-heavy data.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kmeans/margin.hpp"
#include "kmeans/cpu_steps.hpp"

namespace {

using km::kernels::candidate_bound;
using km::kernels::candidate_margin;
using Quad = __float128;

float to_tf32(float x) {  // cvt.rna.tf32.f32: 10 explicit mantissa bits, ties away from zero
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  b = (b + 0x1000u) & ~0x1FFFu;
  float r;
  std::memcpy(&r, &b, 4);
  return r;
}

float truncate_to_float(double v) {  // round toward zero
  float f = static_cast<float>(v);
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return f;
}

// The key |c|^2 - 2 x.c as the float tensor path may compute it, at its worst.
float emulated_key(const std::vector<float>& x, const std::vector<float>& c) {
  float dot = 0, norm = 0;
  for (std::size_t p = 0; p < x.size(); ++p) {
    const double prod = static_cast<double>(to_tf32(x[p])) * static_cast<double>(to_tf32(c[p]));  // exact
    dot = truncate_to_float(static_cast<double>(dot) + prod);
    norm += c[p] * c[p];
  }
  return norm - 2 * dot;
}

// The same for double with FP64 mma: exact inputs, each step rounded (here: toward zero in
// quad precision, then to double).
double emulated_key(const std::vector<double>& x, const std::vector<double>& c) {
  double dot = 0, norm = 0;
  for (std::size_t p = 0; p < x.size(); ++p) {
    const Quad s = static_cast<Quad>(dot) + static_cast<Quad>(x[p]) * static_cast<Quad>(c[p]);
    double r = static_cast<double>(s);
    if (static_cast<Quad>(std::fabs(r)) > (s < 0 ? -s : s)) r = std::nextafter(r, 0.0);
    dot = r;
    norm += c[p] * c[p];
  }
  return norm - 2 * dot;
}

template <class T>
Quad exact_key(const std::vector<T>& x, const std::vector<T>& c) {
  Quad k = 0;
  for (std::size_t p = 0; p < x.size(); ++p)
    k += static_cast<Quad>(c[p]) * static_cast<Quad>(c[p]) - 2 * static_cast<Quad>(x[p]) * static_cast<Quad>(c[p]);
  return k;
}
template <class T>
Quad exact_distance(const std::vector<T>& x, const std::vector<T>& c) {
  Quad s = 0;
  for (std::size_t p = 0; p < x.size(); ++p) {
    const Quad diff = static_cast<Quad>(x[p]) - static_cast<Quad>(c[p]);
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
km::kernels::CandidateBound bound_for(std::size_t d) {
  if constexpr (sizeof(T) == 8) return candidate_bound(d, 0.0, 0x1p-53, 0x1p-53, DBL_MIN);
  return candidate_bound(d, 0x1p-11, 0x1p-24, 0x1p-24, FLT_MIN);
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

template <class T>
void check_key_bound() {
  std::mt19937_64 rng(7);
  for (std::size_t d : {1, 3, 64, 784, 4096}) {
    const auto b = bound_for<T>(d);
    double worst = 0;  // the largest error seen, as a fraction of the bound
    for (int kind = 0; kind < 4; ++kind)
      for (int trial = 0; trial < 40; ++trial) {
        const auto x = draw<T>(rng, d, kind), c = draw<T>(rng, d, kind);
        const double xn = norm2(x), cn = norm2(c);
        const double e = b.a * cn + b.b * std::sqrt(xn) * std::sqrt(cn) + b.tiny;
        const double err = std::fabs(static_cast<double>(static_cast<Quad>(emulated_key(x, c)) - exact_key(x, c)));
        ASSERT_LE(err, e) << "d=" << d << " kind=" << kind;
        worst = std::max(worst, err / e);
        // seq's direct formula within g T (margin.hpp's second half)
        const double seq = static_cast<double>(km::squared_distance(x.data(), c.data(), d));
        const Quad t = exact_distance(x, c);
        const double g = b.g2 / 2.02;  // g2 = 1.01 * 2g / (1 - g) >= 2.02 g
        ASSERT_LE(std::fabs(static_cast<double>(static_cast<Quad>(seq) - t)), g * static_cast<double>(t) + 1e-300)
            << "d=" << d << " kind=" << kind;
      }
    // The bound is not vacuous: some draw comes within a factor 1000 of it.
    EXPECT_GT(worst, 1e-3) << "d=" << d;
  }
}

TEST(TensorMargin, FloatKeyWithinBound) { check_key_bound<float>(); }
TEST(TensorMargin, DoubleKeyWithinBound) { check_key_bound<double>(); }

// The whole decision on tie-heavy data: keys by the emulation, top three, margin, then seq's
// formula for the close calls. Must give seq's label on every object, and must have
// re-checked some (the data is built with exact ties).
template <class T>
void check_decision() {
  std::mt19937_64 rng(11);
  for (std::size_t d : {1, 3, 16, 64}) {
    const std::size_t n = 600, k = 40;
    std::vector<T> xs(n * d), cs(k * d);
    for (auto& v : xs) v = static_cast<T>(static_cast<double>(rng() % 5) / 255.0);
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t p = 0; p < d; ++p) cs[c * d + p] = xs[(c * 7 % n) * d + p];
    for (std::size_t p = 0; p < d; ++p) cs[(k - 1) * d + p] = cs[p];  // an exact duplicate of centroid 0
    const auto b = bound_for<T>(d);
    double cmax2 = 0;
    for (std::size_t c = 0; c < k; ++c)
      cmax2 = std::max(cmax2, norm2(std::vector<T>(cs.begin() + c * d, cs.begin() + (c + 1) * d)));
    std::size_t rechecked = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::vector<T> x(xs.begin() + i * d, xs.begin() + (i + 1) * d);
      T v1 = INFINITY, v2 = INFINITY, v3 = INFINITY;
      int i1 = -1, i2 = -1;
      for (std::size_t c = 0; c < k; ++c) {
        const T v = emulated_key(x, std::vector<T>(cs.begin() + c * d, cs.begin() + (c + 1) * d));
        if (v < v1) {
          v3 = v2, v2 = v1, i2 = i1, v1 = v, i1 = static_cast<int>(c);
        } else if (v < v2) {
          v3 = v2, v2 = v, i2 = static_cast<int>(c);
        } else if (v < v3) {
          v3 = v;
        }
      }
      const double m = candidate_margin(b, norm2(x), cmax2, static_cast<double>(v1));
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

}  // namespace
