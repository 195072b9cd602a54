// The CPU emulations the bound tests share (tests/cpu/margin.cpp, bounds.cpp): TF32 rounding
// and truncating float accumulation as the tensor cores may do them, exact sums in __float128,
// and the one-pass delta kernel's float filter with the kernel's own operations.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kmeans/layouts.hpp"
#include "kernels/kmeans/margin.hpp"
#include "kmeans/cpu_steps.hpp"

namespace kmtest {

using Quad = __float128;

inline std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
inline float from_bits(std::uint32_t b) {
  float r;
  std::memcpy(&r, &b, 4);
  return r;
}
inline float tf32_rna(float x) { return from_bits((bits_of(x) + 0x1000u) & ~0x1FFFu); }  // cvt.rna.tf32.f32

inline float truncate_to_float(double v) {  // round toward zero
  float f = static_cast<float>(v);
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return f;
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

}  // namespace kmtest
