#include "gemm/gemm.hpp"

#include <omp.h>

#include <cmath>
#include <limits>

#include "common/errors.hpp"

namespace km::gemm {

Op parse_op(const std::string& s) {
  if (s == "nn") return Op::nn;
  if (s == "tn") return Op::tn;
  if (s == "nt") return Op::nt;
  throw UsageError("--op=" + s + " is not one of nn (C=A·B), tn (C=Aᵀ·B), nt (D=A·Bᵀ+C)");
}

const char* op_name(Op op) { return op == Op::nn ? "nn" : op == Op::tn ? "tn" : "nt"; }
const char* op_formula(Op op) { return op == Op::nn ? "C=A·B" : op == Op::tn ? "C=Aᵀ·B" : "D=A·Bᵀ+C"; }

Shape a_shape(Op op, int m, int k) {
  return op == Op::tn ? Shape{std::size_t(k), std::size_t(m)} : Shape{std::size_t(m), std::size_t(k)};
}
Shape b_shape(Op op, int n, int k) {
  return op == Op::nt ? Shape{std::size_t(n), std::size_t(k)} : Shape{std::size_t(k), std::size_t(n)};
}

double gemm_flops(Op op, int m, int n, int k) {
  const double mn = double(m) * double(n);
  return 2.0 * mn * double(k) + (op == Op::nt ? mn : 0.0);
}

template <class T>
GemmArgs<T> Problem<T>::args(T* d) const {
  GemmArgs<T> g;
  g.op = op;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.data();
  g.lda = a_shape(op, m, k).cols;
  g.b = b.data();
  g.ldb = b_shape(op, n, k).cols;
  g.c = op == Op::nt ? c.data() : nullptr;
  g.d = d;
  g.ldc = std::size_t(n);
  return g;
}

namespace {

// splitmix64 of (seed, matrix, index): independent of the thread that fills the entry.
inline double uniform_pm1(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1p-52 - 1.0;  // [-1, 1)
}

void check_dims(int m, int n, int k) {
  if (m < 1 || n < 1 || k < 1) throw UsageError(strprintf("matrix sizes must be positive (m=%d n=%d k=%d)", m, n, k));
}

template <class T>
HostBuffer<T> filled(std::size_t count, std::uint64_t seed, std::uint64_t stream) {
  HostBuffer<T> out(count);
  T* p = out.data();
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(uniform_pm1(seed, stream, i));
  return out;
}

template <class T>
HostBuffer<T> constant(std::size_t count, T v) {
  HostBuffer<T> out(count);
  T* p = out.data();
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < count; ++i) p[i] = v;
  return out;
}

}  // namespace

// A problem whose matrices come from fill(stream, count): 1 for A, 2 for B, 3 for C.
template <class T, class Fill>
Problem<T> build_problem(Op op, int m, int n, int k, Fill fill) {
  check_dims(m, n, k);
  Problem<T> p;
  p.op = op;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = fill(1, a_shape(op, m, k).size());
  p.b = fill(2, b_shape(op, n, k).size());
  if (op == Op::nt) p.c = fill(3, std::size_t(m) * std::size_t(n));
  return p;
}

template <class T>
Problem<T> make_problem(Op op, int m, int n, int k, std::uint64_t seed) {
  return build_problem<T>(op, m, n, k, [&](std::uint64_t stream, std::size_t count) {
    return filled<T>(count, seed, stream);
  });
}

template <class T>
Problem<T> make_constant_problem(Op op, int m, int n, int k, T value) {
  return build_problem<T>(op, m, n, k, [&](std::uint64_t, std::size_t count) { return constant<T>(count, value); });
}

template <class T>
Check compare(const T* got, const T* ref, const T* scale, int m, int n, std::size_t ld, double tolerance) {
  Check c;
  c.tolerance = tolerance;
  double worst = 0;
  std::size_t bad = 0;
#pragma omp parallel for reduction(max : worst) reduction(+ : bad) schedule(static)
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      const std::size_t at = std::size_t(i) * ld + std::size_t(j);
      const double diff = std::fabs(double(got[at]) - double(ref[at]));
      // The smallest normal number stands in for a zero scale (all-zero row and column).
      const double s = std::max(double(scale[at]), double(std::numeric_limits<T>::min()));
      const double e = std::isfinite(double(got[at])) ? diff / s : std::numeric_limits<double>::infinity();
      worst = std::max(worst, e);
      if (!(e <= tolerance)) ++bad;
    }
  }
  c.max_rel_error = worst;
  c.mismatches = bad;
  if (bad) {
    int shown = 0;
    for (int i = 0; i < m && shown < 5; ++i)
      for (int j = 0; j < n && shown < 5; ++j) {
        const std::size_t at = std::size_t(i) * ld + std::size_t(j);
        const double s = std::max(double(scale[at]), double(std::numeric_limits<T>::min()));
        const double e = std::fabs(double(got[at]) - double(ref[at])) / s;
        if (!(e <= tolerance)) {
          c.first_mismatches += strprintf("%s(%d,%d): got %.17g, want %.17g", shown ? "; " : "", i, j,
                                          double(got[at]), double(ref[at]));
          ++shown;
        }
      }
  }
  return c;
}

Check check_constant(const double* got, Op op, int m, int n, int k, std::size_t ld) {
  const double v = kConstantValue;
  double want = 0;
  for (int p = 0; p < k; ++p) want += v * v;  // exact: every partial sum fits in 53 bits for k < 2^26
  if (op == Op::nt) want += v;
  Check c;
  c.tolerance = 4.0 * (k + 2) * kUnitRoundoffDouble;
  double worst = 0;
  std::size_t bad = 0;
#pragma omp parallel for reduction(max : worst) reduction(+ : bad) schedule(static)
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double x = got[std::size_t(i) * ld + std::size_t(j)];
      const double e = std::isfinite(x) ? std::fabs(x - want) / want : std::numeric_limits<double>::infinity();
      worst = std::max(worst, e);
      if (!(e <= c.tolerance)) ++bad;
    }
  c.max_rel_error = worst;
  c.mismatches = bad;
  if (bad) {
    for (int i = 0; i < m && c.first_mismatches.empty(); ++i)
      for (int j = 0; j < n; ++j) {
        const double x = got[std::size_t(i) * ld + std::size_t(j)];
        if (!(std::fabs(x - want) / want <= c.tolerance)) {
          c.first_mismatches = strprintf("(%d,%d): got %.17g, want %.17g (A = B = 1 + 2^-25)", i, j, x, want);
          break;
        }
      }
  }
  return c;
}

template struct Problem<float>;
template struct Problem<double>;
template Problem<float> make_problem<float>(Op, int, int, int, std::uint64_t);
template Problem<double> make_problem<double>(Op, int, int, int, std::uint64_t);
template Problem<float> make_constant_problem<float>(Op, int, int, int, float);
template Problem<double> make_constant_problem<double>(Op, int, int, int, double);
template Check compare<float>(const float*, const float*, const float*, int, int, std::size_t, double);
template Check compare<double>(const double*, const double*, const double*, int, int, std::size_t, double);

}  // namespace km::gemm
