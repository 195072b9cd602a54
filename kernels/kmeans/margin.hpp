// The exactness bound of fused's tensor path (kernels/kmeans/6_fused_tensor.cuh): how far
// its candidate key can sit from the truth, and so how close two candidates must be before
// the direct formula has to decide. Plain constexpr/inline, read by nvcc and the host
// compiler alike: the kernels use it and a CPU test checks it against an emulation.
//
// Centring. The kernel compares keys of the centred centroids c' = fl(c - mu) (mu: a centre
// of the data, any vector in T): with S = x.c', m = mu.c', N = |c'|^2,
//   K = N + 2m - 2S = |x - mu - c'|^2 - |x - mu|^2,
// the same for every centroid up to the constant |x - mu|^2. In double only c' is centred
// (once per iteration); the objects enter the mma as they are, and |x| |c'| -- which sets the
// error -- is small because c' is. In float the objects are centred too, x' = fl(x - mu) on
// their way into the mma: then m = 0, mu_norm = 0 below (x' is the object and |x| means |x'|),
// and X = |x'|^2.
//
// The computed key is Â = fl(fl(N̂ + 2 m̂) - 2Ŝ), where
//   Ŝ  is the tensor cores' sum of x̃_p c̃_p, x̃ and c̃ the mma's views of x and c' (relative
//      error <= u_x and u_c: TF32 reads an FP32 operand's bits as they are (truncation,
//      2^-10) or after cvt.rna (2^-11); FP64 mma reads exactly, 0), accumulated in a format
//      of unit roundoff u_acc. Tensor cores may align and truncate rather than round, so each
//      of the d additions is charged 2 u_acc, γ = 2 d u_acc / (1 - 2 d u_acc):
//        |Ŝ - S| <= (u_x + u_c + u_x u_c + γ (1 + u_x)(1 + u_c)) P,  P = sum |x_p c'_p| <= |x| C;
//   N̂, m̂ are sums in T in any order: errors <= γ_d(u) N and γ_d(u) |mu| C, γ_d(u) = d u / (1 - d u);
//   the two roundings after them cost at most u (N + 2|m|) + u (N + 2|m| + 2|S|) (first order).
// With C = the largest |c'| and |x| <= |x - mu| + |mu|:
//   |Â - K| <= E = a C^2 + b |x| C + b_mu |mu| C,
//   a = γ_d + 2u, b = 2 (u_x + u_c + u_x u_c + γ (1 + u_x)(1 + u_c)) + 2u, b_mu = 2 γ_d + 4u,
// each inflated by 1% for second-order terms. c' (and x', when formed) are off from c - mu
// (x - mu) by at most u per coordinate (|e| <= u (|x'| + C)), which moves the distance from
// |x - c|^2 by at most 2 |x - c| |e| + |e|^2 <= 2.02 u (|x'| + C)^2: added to E.
//
// seq computes D = the direct sum of (x_p - c_p)^2 in T, in order: |D - T| <= g T, where
// T = |x - c|^2 and g = γ_{d+2}(u) (the difference, the square, d - 1 additions). Let b be the
// candidate of smallest Â. If seq chose j != b then D_j <= D_b, so, with X = |x - mu|^2,
//   (1 - g)(X + Â_j - E) <= (1 - g) T_j <= D_j <= D_b <= (1 + g) T_b <= (1 + g) W,
//   W = X + Â_b + E, hence Â_j - Â_b <= M = 2E + (2g / (1 - g)) W.
// Every centroid whose key exceeds the smallest by more than M is therefore not seq's
// choice, ties and lowest-index rule included: when only one candidate lies within M its
// label is seq's; otherwise the candidates within M are recomputed with seq's formula.
// Products that underflow to zero add at most d * (smallest normal of T) of absolute error;
// that is added too.
//
// A threshold before the walk (6_fused_wgmma.cuh). For any one centroid q (the object's label
// from the previous iteration), let k_q = N̂_q - 2 s_q with s_q the dot product of the same
// TF32 operands summed in FP32 on the CUDA cores (|s_q - Ŝ_q| <= (γ_d(u) + γ) P, far below
// the b |x| C term of E for d <= 128): then best <= Â_q <= k_q + 2E, and every key the margin
// test can need is at most T = t + M(t), t = k_q + 3E (M grows with best; the third E makes
// T strictly above best + M(best)). Keys at or above T can be left out of the lists: a list
// then holds T (index INT_MAX) where it has fewer keys below T, which the test reads as a key
// beyond the margin.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#if defined(__CUDACC__)
#define KM_MARGIN_HD __host__ __device__
#else
#define KM_MARGIN_HD
#endif

namespace km::kernels {

// gamma_m(u) = m u / (1 - m u): the relative error bound of m roundings of unit u (Higham).
KM_MARGIN_HD inline double rounding_gamma(double m, double u) { return m * u / (1 - m * u); }

struct CandidateBound {
  double a = 0, b = 0, b_mu = 0, centre = 0, g2 = 0, tiny = 0;
  double x_abs = 0;          // an absolute error of the objects' operand, per unit of C (float16's)
  int operand_exponent = 0;  // the objects' operand is x' 2^operand_exponent (float16's; the fold undoes it)
};

// u_x, u_c: the mma's view of the objects and the centroids; u_acc: the accumulation's unit
// roundoff; u: T's; min_normal: T's smallest normal number.
KM_MARGIN_HD inline CandidateBound candidate_bound(std::size_t d, double u_x, double u_c, double u_acc, double u,
                                                   double min_normal) {
  const double dd = static_cast<double>(d);
  const double gamma_acc = rounding_gamma(2 * dd, u_acc);
  const double gamma_d = rounding_gamma(dd, u);
  const double g = rounding_gamma(dd + 2, u);
  CandidateBound r;
  r.a = 1.01 * (gamma_d + 2 * u);
  r.b = 1.01 * (2 * (u_x + u_c + u_x * u_c + gamma_acc * (1 + u_x) * (1 + u_c)) + 2 * u);
  r.b_mu = 1.01 * (2 * gamma_d + 4 * u);
  r.centre = 2.02 * u;
  r.g2 = 1.01 * 2 * g / (1 - g);
  r.tiny = 8 * (dd + 2) * min_normal;
  return r;
}

// M for an object with X = |x - mu|^2 = xc2 whose smallest key is `best`, the centre's norm
// mu_norm and centred centroid norms at most sqrt(cmax2).
// E above, the bound on |Â - K| for any centroid of an object with X = xc2.
KM_MARGIN_HD inline double candidate_error(const CandidateBound& k, double xc2, double mu_norm, double cmax2) {
  const double c = sqrt(cmax2), xc = sqrt(xc2), xr = xc + mu_norm;
  return k.a * cmax2 + k.b * xr * c + k.b_mu * mu_norm * c + k.centre * (xc + c) * (xc + c) + k.x_abs * c + k.tiny;
}

KM_MARGIN_HD inline double candidate_margin(const CandidateBound& k, double xc2, double mu_norm, double cmax2,
                                            double best) {
  const double e = candidate_error(k, xc2, mu_norm, cmax2);
  const double w = xc2 + best + e;
  return 2 * e + k.g2 * (w > 0 ? w : 0) + k.tiny;
}

// Double data on TF32 candidates (fused's tensor path in double, by default): the float
// kernel's keys from x' = fl64(x - mu) and c' = fl64(c - mu), each rounded to float and then to
// TF32 (cvt.rna), N = |c'|^2 summed in double and rounded to float, the sums and the key's fold
// in FP32; seq's formula in double decides the close calls. Read against the bound above with
// x', c' the centred points:
//   the operands: |fl_tf32(fl32(v)) - v| <= (2^-24 + 2^-11 (1 + 2^-24)) |v| < (2^-11 + 2^-23) |v|
//     = u_x = u_c (in the normal range; below it, the absolute errors are covered as in float
//     by the C^2 and centring terms, and by `tiny` at FLT_MIN);
//   N̂: (gamma_d(2^-53)(1 + 2^-24) + 2^-24) N <= gamma_d(2^-24) N, the float bound's;
//   the fold and the accumulation: FP32 (u = u_acc = 2^-24);
//   x', c' off from x - mu, c - mu by at most 2^-53 per coordinate, under the centring term's u;
//   seq in double: gamma_{d+2}(2^-53) <= gamma_{d+2}(2^-24), the g used.
// So the float bound with u_x = u_c = 2^-11 + 2^-23 holds for these keys (tests/test_margin.cpp
// emulates them). The engine takes this path only while max|x| <= 2^48 (and the initial
// centroids too), so that no operand, product or key leaves float's range.
KM_MARGIN_HD inline CandidateBound tf32_candidates_bound(std::size_t d) {
  return candidate_bound(d, 0x1p-11 + 0x1p-23, 0x1p-11 + 0x1p-23, 0x1p-24, 0x1p-24, 0x1p-126);
}

// Float on float16 tensor cores (6_fused_wgmma.cuh: WgmmaF16). The operands are float's
// centred ones, x' = fl32(x - mu) and c' = fl32(c - mu) (c' rounded to TF32 first, cvt.rna), each
// scaled by a power of two -- 2^ex for every object (ex from the largest |x'_p| of the data, set
// once a fit), 2^ec for the centroids (from the largest |c'|^2, each iteration): every scaled
// coordinate below 2^15 and the largest at least 2^14 (f16_scale_exponent) -- and rounded to
// float16 (cvt.rn). In float16's normal range that rounding is within 2^-11 of the value, as
// TF32's (the same 10 fraction bits; a TF32 value there is a float16, so c' is rounded once).
// Below it, a scaled value is within 2^-25 of its float16, and within 2^-14 of what the tensor
// cores use even if they flush float16 subnormals to zero, which the bound assumes: 2^-14 2^-ex
// for an object's coordinate, 2^-14 2^-ec <= 2^-28 C for a centroid's. Against the other
// operand these add at most 2^-14 2^-ex sqrt(d) C (charged as x_abs C, doubled by the key, 1% on
// top) and sqrt(d) 2^-28 |x| C (inside u_c = 2^-11 + sqrt(d) 2^-28). The products of float16
// values are exact in FP32 (22 significant bits; none underflows) and are accumulated in FP32
// (u_acc = 2^-24, each addition charged 2 u_acc as for TF32); the fold multiplies the sum by
// 2^(1 - ex - ec), exactly (ex, ec <= 70: the factor stays a float, 2^-139 at the least). With
// ec at its cap (C below 2^-55) a centroid coordinate's absolute error is at most 2^-84; against
// |x'_p| < 2^(15 - ex), doubled by the key, d 2^(-68 - ex) at most, in `tiny`.
//
// A float16 operand's scale 2^e for coordinates of magnitude at most m: m < 2^q, so 2^e =
// 2^(15 - q) keeps every scaled coordinate below 2^15 (no overflow) and m 2^e >= 2^14, so that
// a coordinate below float16's normal range is off by at most 2^-14 2^-e <= 2^-28 m. e is capped
// at 70 (m below 2^-55: the cap's absolute error is in the bound's `tiny`; the keys' factor
// 2^(1 - ex - ec) stays a float).
KM_MARGIN_HD inline int f16_scale_exponent(double m) {
  int q = 0;
  (void)frexp(m, &q);
  const int e = 15 - q;
  return e < 70 ? e : 70;
}

KM_MARGIN_HD inline CandidateBound f16_candidates_bound(std::size_t d, int ex) {
  const double root_d = std::sqrt(static_cast<double>(d));
  CandidateBound r = candidate_bound(d, 0x1p-11, 0x1p-11 + root_d * 0x1p-28, 0x1p-24, 0x1p-24, 0x1p-126);
  r.x_abs = 1.01 * 2 * root_d * std::ldexp(1.0, -14 - ex);
  const double cap = static_cast<double>(d) * std::ldexp(1.0, -67 - ex);
  if (r.tiny < cap) r.tiny = cap;
  r.operand_exponent = ex;
  return r;
}

// A ceiling (k-means||'s rounds, tensor_nearest.hpp): the caller needs the nearest row only
// where its distance by the re-check's formula, D_j, is strictly below a given h >= 0 (the
// object's distance to the candidates of the rounds before); elsewhere any answer will do, as
// the caller compares D again. From the bound above, T_j >= X + Â_j - E and D_j >= (1 - g) T_j,
// so D_j < h gives Â_j < h / (1 - g) - X + E <= h (1 + g2) - X + E (g2 = 2g / (1 - g) >= g / (1 - g)).
// X is |x - mu|^2, and the kernels hold xc2, the centred copy's |x'|^2: within the centring term
// of E of X (2.02 u (|x'| + C)^2 >= 2.02 u |x'|^2; its double sum's own rounding, d 2^-53, far
// inside the 1% inflation). So every row that can beat h has a key below
//   T_h = h (1 + g2) - xc2 + 3E + tiny
// (the third E covers the double arithmetic of T_h itself, a few roundings of 2^-53 (h + X)),
// and keys at or above T_h may be left out of the lists; a list left with no key below T_h
// means that no row beats h. The margin test among the keys listed is unchanged: the least key
// listed is the least of all (every key left out is above it).
KM_MARGIN_HD inline double ceiling_threshold(const CandidateBound& k, double xc2, double mu_norm, double cmax2,
                                            double h) {
  return h * (1 + k.g2) - xc2 + 3 * candidate_error(k, xc2, mu_norm, cmax2) + k.tiny;
}


// The one-pass delta kernel's float filter (kernels/kmeans/6_fused_delta.cuh). Each object is
// scored against every centroid in float, f_c = fl(cc + sum_p a_p x''_p), a = -2 c'', cc =
// fl(|c''|^2), where x'' = fl_f(fl_T(x - mu)) and c'' = fl_f(fl_T(c - mu)) are the centred
// points rounded to float (each coordinate within 1.0001 u_f of x - mu, c - mu; u_f = 2^-24).
// With x' = x - mu, c' = c - mu exactly, R = max |c'| and S = |x'| + R:
//   moving x' -> x'' and c' -> c'' moves D = |x - c|^2 by at most 2.001 u_f S^2;
//   f_c is within (d + 1) 1.01 u_f S^2 of |c''|^2 - 2 x''.c'' = D''_c - |x''|^2 (an FMA chain
//   of d steps from cc, plus cc's own rounding);
// so f_c + |x''|^2 is within E = (d + 4) u_f S^2 of D_c, and seq's sum in T within
// g D_c <= g S^2, g = gamma_{d+2}(u_T). Ranking needs only f (|x''|^2 is common).
// With index_bits > 0 the kernel writes the centroid's index into the low bits of f's
// mantissa (one min instruction tracks value and index): that moves f by at most
// 2^(bits - 23) |f| <= 2^(bits - 23) 1.01 S^2.
// If the two smallest scores p1 < p2 satisfy p2 - p1 > 2E + 2 g S^2 + 2 pack S^2, every other
// centroid's seq distance exceeds the winner's, so the winner is seq's label (its lowest index
// rule included: there is no tie). S^2 <= 2 (|x'|^2 + R^2), and the kernel's float sums nx of
// |x''|^2 and r2 = max cc are within 0.1% of |x'|^2 and R^2. The test the kernel makes is
//   fl(p2 - p1) > factor (nx + r2) + tiny,
// with 2% for the roundings of the test itself; tiny covers products that underflow
// ((d + 4) 2^-120 is far above their absolute errors, d 2^-149 in float). The engine takes
// this filter only while max|x| <= 2^48, so that no score can overflow.
//
// With `mma` (the delta kernel's MMA scores) f_c is the tensor cores' sum cc + sum_p ã_p x̃_p, x̃
// and ã = -2 c̃ the TF32 roundings (cvt.rna, relative error <= 2^-11 in the normal range; the
// objects' by one integer add, gemm::MmaTf32m16n8k8::convert_half_up, within the same 2^-11) of
// x'' and -2 c'': each exact TF32 product is within (2^-10 + 2^-22) |x''_p a_p| of x''_p a_p, at
// most 1.0003 2^-10 sum |x''_p a_p| <= 1.0003 2^-10 2 |x''| |c''| <= 1.0004 2^-11 S^2 over all
// (2 |x''| |c''| <= (|x''| + |c''|)^2 / 2): 8196 u_f S^2 (a coarser charge than below). The
// accumulation, d + 1 terms of total magnitude at most S^2 in FP32 that may be aligned and
// truncated rather than rounded, is charged both 2 (d + 1) 1.01 u_f S^2 (each addition 2 u_f,
// as the tensor path's bound) and 16 u_f S^2 per mma (8 units in the last place of S^2;
// ceil(d / 8) of them); the centring and cc's rounding 10 u_f S^2. Operands below float's
// normal range (flushed, at worst) move f by at most 2 d 2^-126 S (d <= 32): at most 2^-12 of
// the accumulation's term where S >= 2^-90 (inside the factor's 2% below), far below `tiny`
// where not.
//
// The TF32 term need not be charged in S^2, nor as the worst rounding of the centroids: with
// x̃ = x'' + δx, ã = a + δa, each product's error is δx_p a_p + x''_p δa_p + δx_p δa_p, so a
// score's is at most 2^-11 |x''| |a_c| + (1 + 2^-11) |x''| |δa_c| (|δx_p| <= 2^-11 |x''_p|;
// |a_c| = 2 |c''_c| <= 2 R''), where |δa_c|, the centroid's own roundings' norm, is known exactly
// once the B operands are made. With D = max_c |δa_c| the pair's errors sum to at most
//   2 |x''| (2^-10 R'' + 1.0005 D),
// |x''| and R'' within 0.05% of sqrt(nx) and sqrt(r2), D of the square root of its float sum
// s = max_c fl(sum_p δa_p^2) (d FMAs: 0.001%). D is at most 2^-10 R'' (every δa_p at its worst),
// where this is the 8196 u_f S^2 above at |x''| = R''; it is about half that for centroids in
// general position, and 2 sqrt(nx r2) <= nx + r2 everywhere: at d = 32, K = 64 on uniform data
// 0.56x the objects left to re-score (a CPU emulation of 2^17 objects after 6 Lloyd iterations:
// 1.84% against 3.31%; |x''| R'' in place of S^2 alone, D at its worst, 2.44%). So with `mma`
// the bound is
//   root_b sqrt(nx) + factor (nx + r2) + tiny,
// `factor` then the accumulation's, the centring's, seq's and the index's terms alone, and
// root_b = 1.02 (2 sqrt(1.001)) (2^-10 sqrt(1.001 r2) + 1.0005 sqrt(1.0001 s)) a block's constant
// (mma_root2 below: its square), with the same 2%. The kernel tests it without a square root:
// with l = fl(p2 - p1) - fl(factor (nx + r2) + tiny),
//   l > 0 and fl(l l) > fl(root_b^2 nx),
// each side a few roundings of 2^-24 (an overflow to infinity on the right or an underflow to 0
// on the left only ever calls the object close), far inside the 2% (4% on the squares).
struct FilterBound {
  double factor = 0, tiny = 0;
};
KM_MARGIN_HD inline FilterBound filter_bound(std::size_t d, int index_bits, double u_t, bool mma = false) {
  const double dd = static_cast<double>(d), uf = 0x1p-24;
  const double e = mma ? (2.02 * (dd + 1) + 16 * static_cast<double>((d + 7) / 8) + 10) * uf : (dd + 4) * uf;
  const double g = rounding_gamma(dd + 2, u_t);
  const double pack = index_bits > 0 ? 1.01 * std::ldexp(1.0, index_bits - 23) : 0.0;
  FilterBound r;
  r.factor = 1.02 * 2.0 * 1.001 * (2 * e + 2 * g + 2 * pack);
  r.tiny = (dd + 4) * 0x1p-120;
  return r;
}
// root_b^2 (above) for a block's centroids: r2 their largest fl(|c''|^2), s the largest float sum
// of their B operands' squared TF32 roundings (sum_p (ã_p - a_p)^2); rounded to float.
KM_MARGIN_HD inline float mma_root2(float r2, float s) {
  const double root = 1.02 * 2 * std::sqrt(1.001) *
                      (0x1p-10 * std::sqrt(1.001 * static_cast<double>(r2)) +
                       1.0005 * std::sqrt(1.0001 * static_cast<double>(s)));
  return static_cast<float>(root * root);
}

// The delta kernel's inertia addend from its float scores (6_fused_delta.cuh, in float with the FMA
// scores): for an object the filter called, a = fl(nx + f_w), the winner's score plus nx, in
// place of a distance computed again in T. From the filter's derivation above: f_w + |x''|^2 is
// within (d + 4) u_f S^2 of D = |x - c_w|^2, f_w's index bits move it by at most
// 1.01 2^(bits - 23) S^2, nx (an FMA chain of d steps) is within 1.01 d u_f |x''|^2 <= 1.01 d u_f S^2
// of |x''|^2, and the sum's rounding is u_f |a|; with S^2 <= 2.004 (nx + r2) (nx and r2 within
// 0.1% of |x'|^2 and R^2):
//   |a - D| <= factor (nx + r2) + tiny + u_f |a|,
// factor with 2% for the roundings of the kernel's test. The kernel takes a only where
//   fl(factor (nx + r2) + tiny) <= fl(eta_test a),   eta_test = eta - 4 u_f
// (the sum's rounding and the product's), so |a - D| <= eta a there; elsewhere, and for the
// objects the filter could not call, the distance in T as before. The iteration's inertia, a sum of
// such addends, is then within eta / (1 - eta) of the exact sum of the objects' distances, beside
// the per-object sum's own d u_f. eta = 2^-15 (3.1e-5): at d = 16, K = 16 the test passes nx + r2 up
// to 3.6 a, which 99.98% of uniform objects meet (10^5 in [0, 1)^16 after 6 Lloyd iterations), and
// the inertia stays well inside the 1e-4 the hardening issue allows float (tests/test_margin.cpp:
// ApproxDist; measured at 2^21 x 16, K = 16: within 5.1e-9 of the distances' sum every iteration).
struct ApproxDistBound {
  double factor = 0, tiny = 0, eta = 0, eta_test = 0;
};
KM_MARGIN_HD inline ApproxDistBound approx_dist_bound(std::size_t d, int index_bits) {
  const double dd = static_cast<double>(d), uf = 0x1p-24;
  const double pack = index_bits > 0 ? 1.01 * std::ldexp(1.0, index_bits - 23) : 0.0;
  ApproxDistBound r;
  r.factor = 1.02 * 2.004 * ((dd + 4) * uf + pack + 1.01 * dd * uf);
  r.tiny = (dd + 4) * 0x1p-120;
  r.eta = 0x1p-15;
  r.eta_test = r.eta - 4 * uf;
  return r;
}

// A float's bits as an unsigned integer in the float's order (negative values flipped), and back:
// the least of these is the least float (no NaNs). The delta kernel's tensor-core path finds a
// warp's winner and runner-up among distinct keys by two warp minima of these (the least; then
// the least of each lane's other key: its runner-up in the lane that holds the least, its best
// elsewhere).
KM_MARGIN_HD inline unsigned ordered_key(float f) {
#if defined(__CUDA_ARCH__)
  const unsigned u = __float_as_uint(f);
#else
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
#endif
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
KM_MARGIN_HD inline float key_from_ordered(unsigned o) {
  const unsigned u = (o & 0x80000000u) ? (o & 0x7fffffffu) : ~o;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// A lane's operand for that second minimum: its runner-up where its best is the least, else its best.
KM_MARGIN_HD inline unsigned second_key_operand(float best, float second, unsigned least) {
  return ordered_key(ordered_key(best) == least ? second : best);
}

// Float arithmetic rounded up (_up) or down (_down), for the delta kernel's Hamerly bounds: the
// device's own directed-rounding instructions, and on the host the same results from exact
// double arithmetic (a product of floats is exact in double; a sum is exact as TwoSum's pair;
// a square root is checked by squaring), so that a CPU test runs the kernel's bound code.
#if defined(__CUDA_ARCH__)
__device__ inline float add_up(float a, float b) { return __fadd_ru(a, b); }
__device__ inline float add_down(float a, float b) { return __fadd_rd(a, b); }
__device__ inline float mul_up(float a, float b) { return __fmul_ru(a, b); }
__device__ inline float mul_down(float a, float b) { return __fmul_rd(a, b); }
__device__ inline float sqrt_up(float a) { return __fsqrt_ru(a); }
__device__ inline float sqrt_down(float a) { return __fsqrt_rd(a); }
__device__ inline float double_up(double v) { return __double2float_ru(v); }
#else
// The float nearest s + e (e: the exact remainder of s), moved one step toward `dir` when it
// falls short of the exact value on that side.
inline float round_toward(double s, double e, float dir) {
  float f = static_cast<float>(s);
  const double fd = static_cast<double>(f);
  if (dir > 0 ? (fd < s || (fd == s && e > 0)) : (fd > s || (fd == s && e < 0))) f = std::nextafter(f, dir);
  return f;
}
inline float add_toward(float a, float b, float dir) {
  const double x = a, y = b, s = x + y, bb = s - x, e = (x - (s - bb)) + (y - bb);  // TwoSum
  return round_toward(s, e, dir);
}
inline float add_up(float a, float b) { return add_toward(a, b, INFINITY); }
inline float add_down(float a, float b) { return add_toward(a, b, -INFINITY); }
inline float mul_up(float a, float b) { return round_toward(static_cast<double>(a) * b, 0, INFINITY); }
inline float mul_down(float a, float b) { return round_toward(static_cast<double>(a) * b, 0, -INFINITY); }
inline float sqrt_up(float a) {  // the least float whose square is at least a
  if (!(a < INFINITY) || a <= 0) return std::sqrt(a);  // inf, NaN, zeros: exact
  float f = static_cast<float>(std::sqrt(static_cast<double>(a)));
  while (static_cast<double>(f) * f < a) f = std::nextafter(f, INFINITY);
  for (float g = std::nextafter(f, 0.0f); f > 0 && static_cast<double>(g) * g >= a; g = std::nextafter(f, 0.0f)) f = g;
  return f;
}
inline float sqrt_down(float a) {  // the greatest float whose square is at most a
  if (!(a < INFINITY) || a <= 0) return std::sqrt(a);
  float f = static_cast<float>(std::sqrt(static_cast<double>(a)));
  while (f > 0 && static_cast<double>(f) * f > a) f = std::nextafter(f, 0.0f);
  for (float g = std::nextafter(f, INFINITY); static_cast<double>(g) * g <= a; g = std::nextafter(f, INFINITY)) f = g;
  return f;
}
inline float double_up(double v) { return round_toward(v, 0, INFINITY); }
#endif

// Hamerly's bounds (6_fused_delta.cuh, BOUNDS). With the filter's scores (filter_bound above)
// every centroid's |x - c|^2 lies within h = factor (nx + r2) + tiny of f_c + nx (the factor is
// at least twice that error and the packed index's), so sqrt(best + nx + h) bounds the
// winner's distance from above and sqrt(second + nx - h) every other's from below. seq's
// distances are within g = gamma_{d+2}(u_T) of the true ones (relative, every term a square):
// if kap_up u < kap_dn l, with kap_up >= sqrt(1 + g) and kap_dn <= sqrt(1 - g), seq's sum for
// the winner is below every other's, so seq's label is the winner's. As the centroids move by
// s_c per iteration (rounded up), u grows by at most s_a and l shrinks by at most max s: the
// pair is stored as (kap_up u - C^[a], kap_dn l + M^) against the running sums C^[c] of
// kap_up s_c and M^ of max s, rounded up, so that an object not read needs no write.
struct HamerlyBounds {
  float upper = INFINITY, lower = 0;  // the pair that never keeps (a re-checked object's)
};
inline void hamerly_kappa(std::size_t d, double u_t, float& up, float& down) {
  const double g = rounding_gamma(static_cast<double>(d) + 2, u_t);
  up = std::nextafter(static_cast<float>(1 + g), INFINITY);
  down = std::nextafter(static_cast<float>(1 - g), 0.0f);
}
KM_MARGIN_HD inline HamerlyBounds hamerly_store(float best, float second, float nx, float h, float kap_up,
                                                float kap_down, float drift_label, float drift_max) {
  const float up = sqrt_up(fmaxf(0.0f, add_up(add_up(best, nx), h)));
  const float lo = sqrt_down(fmaxf(0.0f, add_down(add_down(second, nx), -h)));
  HamerlyBounds b;
  b.upper = add_up(mul_up(up, kap_up), -drift_label);
  b.lower = add_down(mul_down(lo, kap_down), drift_max);
  return b;
}
KM_MARGIN_HD inline bool hamerly_keep(float upper, float lower, float drift_label, float drift_max) {
  return add_up(upper, drift_label) < add_down(lower, -drift_max);
}
// A centroid's step from its squared shift (summed in double, relative error below
// (d + 5) 2^-53 < 2^-40 for d <= 32), rounded up.
KM_MARGIN_HD inline float hamerly_step(double squared_shift) {
  return double_up(std::sqrt(squared_shift) * (1 + 0x1p-40));
}

// The inertia by algebra (update.cuh: algebraic_part; 6_fused_delta.cuh: BOUNDS, kAlgebraic):
// per cluster sum |x - c|^2 = Q - 2 w.(S - n z) + n |w|^2, w = c - z, Q = sum |x - z|^2, S = sum x,
// n the count. One coordinate's share of the last two terms (sum = S_j, c = c_j, z = z_j) added
// to `part`, and beside it to `size` the magnitudes whose roundings the evaluation carries.
KM_MARGIN_HD inline void algebraic_term(double sum, double count, double c, double z, double& part, double& size) {
  const double w = c - z;
  const double r = sum - count * z;
  part += w * (count * w - 2 * r);
  // r's own roundings are relative to |sum| + count |z_j|, which exceed |r| when the
  // cluster's mean sits near z far from the origin: those magnitudes count too.
  size += std::fabs(w) * (2 * std::fabs(r) + count * std::fabs(w) + 2 * (std::fabs(sum) + count * std::fabs(z)));
}

// Whether the algebra's total `inertia` (Q and the k parts summed) may be off by more than
// `guard` of itself: `bound` is (2d + 24) 2^-53 (|Q| + the sizes), the k + 2 roundings of the
// total on top; cancellation (clusters far tighter than their distance from z) fails it.
KM_MARGIN_HD inline bool algebraic_unsure(double inertia, double bound, int k, double guard) {
  return !(inertia >= 0 && bound + (k + 2) * 0x1p-53 * inertia <= guard * inertia);
}

}  // namespace km::kernels
