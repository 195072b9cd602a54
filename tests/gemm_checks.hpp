// What the GEMM tests share (tests/cpu/gemm.cpp, tests/gpu/gemm.cpp): the shape table, the
// CPU reference (OpenBLAS) and its scale, and the comparison within the rounding bound.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "gemm/cpu_gemm.hpp"
#include "gemm/gemm.hpp"
#include "io/dataset.hpp"

namespace kmtest {

using km::gemm::Op;

struct Dims {
  int m, n, k;
};
// 1×1×1; odd sizes that use no vector path; sizes that are multiples of 4 (the 16-byte
// paths) with partial edge tiles; several blocks in both directions with k spanning many
// pipeline stages.
inline const std::vector<Dims> kDims = {{1, 1, 1},     {17, 33, 9},    {130, 70, 260}, {64, 64, 64},
                                        {129, 257, 35}, {132, 136, 260}, {300, 260, 520}};
inline constexpr Op kOps[] = {Op::nn, Op::tn, Op::nt};

inline std::string label(Op op, const Dims& d) {
  return std::string(km::gemm::op_name(op)) + " " + std::to_string(d.m) + "x" + std::to_string(d.n) + "x" +
         std::to_string(d.k);
}

template <class T>
double u() {
  return sizeof(T) == 8 ? km::gemm::kUnitRoundoffDouble : km::gemm::kUnitRoundoffFloat;
}

// The CPU reference and its scale for a problem.
template <class T>
struct Expected {
  km::HostBuffer<T> ref, scale;
  explicit Expected(const km::gemm::Problem<T>& p)
      : ref(std::size_t(p.m) * p.n), scale(std::size_t(p.m) * p.n) {
    km::gemm::cpu_blas(p.args(ref.data()), 0);
    km::gemm::cpu_scale(p.args(nullptr), scale.data(), 0);
  }
};

template <class T>
void expect_close(const km::gemm::Problem<T>& p, const T* got, const T* ref, const T* scale, double u_result,
                  const std::string& what) {
  const double tol = (p.k + 2) * (u_result + u<T>());
  const km::gemm::Check c = km::gemm::compare<T>(got, ref, scale, p.m, p.n, std::size_t(p.n), tol);
  EXPECT_TRUE(c.passed()) << what << ": " << c.mismatches << " mismatches, max error " << c.max_rel_error
                          << " (tolerance " << tol << "): " << c.first_mismatches;
}

}  // namespace kmtest
