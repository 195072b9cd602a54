// The exactness bound of fused's tensor path (kernels/kmeans/6_fused_tensor.cuh): how far
// its candidate key can sit from the truth, and so how close two candidates must be before
// the direct formula has to decide. Plain constexpr/inline, read by nvcc and the host
// compiler alike: the kernels use it and a CPU test checks it against an emulation.
//
// Notation, for one object x and one centroid c (d coordinates, stored in T):
//   S = x.c, N = |c|^2, the key K = N - 2S = |x - c|^2 - |x|^2 (|x|^2 is common to all c).
// The kernel computes Â = fl(N̂ - 2Ŝ), where
//   Ŝ  is the tensor cores' sum of x̃_p c̃_p, x̃ = x rounded to the mma's input format
//      (relative error <= u_in: 2^-11 for TF32, 0 for FP64) and the sum accumulated in a
//      format of unit roundoff u_acc. Tensor cores may align and truncate rather than round,
//      so each of the d additions is charged 2 u_acc:
//        |Ŝ - S| <= (2 u_in + u_in^2 + γ (1 + u_in)^2) P,  γ = 2 d u_acc / (1 - 2 d u_acc),
//      with P = sum |x_p c_p| <= |x| |c| (Cauchy-Schwarz);
//   N̂  is |c|^2 summed in T in any order: |N̂ - N| <= γ_d(u) N, γ_d(u) = d u / (1 - d u);
//   the final subtraction rounds once: u |Â| <= u (N + 2P) (1 + small).
// So |Â - K| <= E = a |c|^2 + b |x| |c|, with a = γ_d(u) + u and b = 2 (2 u_in + u_in^2 +
// γ (1 + u_in)^2) + 2 u, each inflated by 1% for the second-order terms; the kernel takes
// |c| <= C = the largest centroid norm.
//
// seq computes D = the direct sum of (x_p - c_p)^2 in T, in order: |D - T| <= g T, where
// T = |x - c|^2 and g = γ_{d+2}(u) (the difference, the square, d - 1 additions). Let b be the
// candidate of smallest Â. If seq chose j != b then D_j <= D_b, so
//   (1 - g)(|x|^2 + Â_j - E) <= (1 - g) T_j <= D_j <= D_b <= (1 + g) T_b <= (1 + g) W,
//   W = |x|^2 + Â_b + E, hence Â_j - Â_b <= M = 2E + (2g / (1 - g)) W.
// Every centroid whose key exceeds the smallest by more than M is therefore not seq's
// choice, ties and lowest-index rule included: when only one candidate lies within M its
// label is seq's; otherwise the candidates within M are recomputed with seq's formula.
// Products that underflow to zero add at most d * (smallest normal of T) of absolute error;
// that is added too.
#pragma once

#include <cmath>
#include <cstddef>

#if defined(__CUDACC__)
#define KM_MARGIN_HD __host__ __device__
#else
#define KM_MARGIN_HD
#endif

namespace km::kernels {

struct CandidateBound {
  double a = 0, b = 0, g2 = 0, tiny = 0;
};

// u_in: the mma inputs' relative rounding; u_acc: the accumulation's unit roundoff; u: T's;
// min_normal: T's smallest normal number.
KM_MARGIN_HD inline CandidateBound candidate_bound(std::size_t d, double u_in, double u_acc, double u,
                                                   double min_normal) {
  const double dd = static_cast<double>(d);
  const double gamma_acc = 2 * dd * u_acc / (1 - 2 * dd * u_acc);
  const double gamma_d = dd * u / (1 - dd * u);
  const double g = (dd + 2) * u / (1 - (dd + 2) * u);
  CandidateBound r;
  r.a = 1.01 * (gamma_d + u);
  r.b = 1.01 * (2 * (2 * u_in + u_in * u_in + gamma_acc * (1 + u_in) * (1 + u_in)) + 2 * u);
  r.g2 = 1.01 * 2 * g / (1 - g);
  r.tiny = 8 * (dd + 2) * min_normal;
  return r;
}

// M for an object of squared norm xnorm2 whose smallest key is `best`, with centroid norms
// at most sqrt(cmax2).
KM_MARGIN_HD inline double candidate_margin(const CandidateBound& k, double xnorm2, double cmax2, double best) {
  const double c = sqrt(cmax2), xn = sqrt(xnorm2);
  const double e = k.a * cmax2 + k.b * xn * c + k.tiny;
  const double w = xnorm2 + best + e;
  return 2 * e + k.g2 * (w > 0 ? w : 0) + k.tiny;
}

}  // namespace km::kernels
