// The GEMM workload: the three products of a training step, on the CPU and the GPU.
//   nn:  C = A·B        A m×k (lda ≥ k),  B k×n (ldb ≥ n)
//   tn:  C = Aᵀ·B       A stored k×m (lda ≥ m), B k×n
//   nt:  D = A·Bᵀ + C   A m×k, B stored n×k (ldb ≥ k), C and D m×n
// All matrices are row-major. Every kernel has the same signature (GemmArgs), so the
// registry, the CLI, the tests and the sweep treat them alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/dataset.hpp"

namespace km::gemm {

enum class Op { nn, tn, nt };
Op parse_op(const std::string& s);  // throws UsageError
const char* op_name(Op op);
const char* op_formula(Op op);

// Operand views. For nn and tn, c is null and d receives the product; for nt, d = A·Bᵀ + c.
// c and d share ldc.
template <class T>
struct GemmArgs {
  Op op = Op::nn;
  int m = 0, n = 0, k = 0;
  const T* a = nullptr;
  std::size_t lda = 0;
  const T* b = nullptr;
  std::size_t ldb = 0;
  const T* c = nullptr;
  T* d = nullptr;
  std::size_t ldc = 0;
};

// Element accessors in the op's storage order (host and device).
template <class T>
inline T a_elem(const GemmArgs<T>& g, std::size_t i, std::size_t p) {
  return g.op == Op::tn ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
}
template <class T>
inline T b_elem(const GemmArgs<T>& g, std::size_t p, std::size_t j) {
  return g.op == Op::nt ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
}

// Shapes of the stored operands: rows × cols of A and B as laid out in memory.
struct Shape {
  std::size_t rows = 0, cols = 0;
  std::size_t size() const { return rows * cols; }
};
Shape a_shape(Op op, int m, int k);
Shape b_shape(Op op, int n, int k);

// 2·m·n·k, plus m·n for the +C of nt.
double gemm_flops(Op op, int m, int n, int k);

// Host problem: operands filled with uniform values in [-1, 1) from a counter hash (the
// same seed gives the same matrices for any thread count), or with one constant.
template <class T>
struct Problem {
  Op op = Op::nn;
  int m = 0, n = 0, k = 0;
  HostBuffer<T> a, b, c;  // page-aligned (pinned in place for uploads); c empty for nn and tn
  GemmArgs<T> args(T* d) const;
};
template <class T>
Problem<T> make_problem(Op op, int m, int n, int k, std::uint64_t seed);
template <class T>
Problem<T> make_constant_problem(Op op, int m, int n, int k, T value);

// Unit roundoff of the arithmetic a result was computed in.
constexpr double kUnitRoundoffDouble = 0x1p-53;
constexpr double kUnitRoundoffFloat = 0x1p-24;
constexpr double kUnitRoundoffTf32 = 0x1p-11;  // 10 stored mantissa bits, round to nearest

// Error of a result against a reference, element by element, relative to the element's
// own scale s_ij = (|A|·|B|)_ij + |C_ij|: the standard bound for a dot product of length k
// computed in any order is |fl(x) − x| ≤ γ_k·s_ij with γ_k ≈ k·u, so the result and the
// reference may differ by up to about k·(u_result + u_reference)·s_ij. Scaling by s_ij
// (not by |x|) keeps the test meaningful where cancellation makes x tiny.
struct Check {
  double max_rel_error = 0;  // max |x − ref| / s
  double tolerance = 0;      // (k + 2)·(u_result + u_reference)
  std::size_t mismatches = 0;
  std::string first_mismatches;  // up to 5 "(i,j): got x, want y" entries
  bool passed() const { return mismatches == 0; }
};
template <class T>
Check compare(const T* got, const T* ref, const T* scale, int m, int n, std::size_t ld, double tolerance);

// The constant test: with A = B = C = v = 1 + 2⁻²⁵ every entry is exactly k·v² (+ v for nt)
// in double, while any path that rounds inputs to float or TF32 gets k (+1): a relative
// error of 2⁻²⁴. The tolerance (4(k + 2)·2⁻⁵³) is far below that.
constexpr double kConstantValue = 1.0 + 0x1p-25;
Check check_constant(const double* got, Op op, int m, int n, int k, std::size_t ld);

}  // namespace km::gemm
