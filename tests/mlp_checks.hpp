// What the MLP tests share (tests/cpu/mlp.cpp, tests/gpu/mlp.cpp): a teacher task with a known
// answer, small options, and a kernel's loss curve and weights against cpu-blas's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "io/hash.hpp"
#include "mlp/mlp.hpp"

namespace kmtest {

// A task with a known answer: x uniform in [-1, 1)^d, the label the arg-max of a fixed
// linear map of x (a teacher), so a network that learns reaches high accuracy.
template <class T>
km::mlp::Samples<T> teacher_set(std::size_t n, std::size_t d, int classes, std::uint64_t seed) {
  km::mlp::Samples<T> s;
  s.n = n;
  s.d = d;
  s.x.resize(n * d);
  s.y.resize(n);
  std::vector<double> teacher(static_cast<std::size_t>(classes) * d);  // the classes' weights
  for (std::size_t q = 0; q < teacher.size(); ++q) teacher[q] = km::unit_double(km::hash64(99, q / d, q % d)) - 0.5;
  for (std::size_t i = 0; i < n; ++i) {
    double best = -1e300;
    for (std::size_t j = 0; j < d; ++j) s.x[i * d + j] = T(2 * km::unit_double(km::hash64(seed, 1, i * d + j)) - 1);
    for (std::size_t c = 0; c < static_cast<std::size_t>(classes); ++c) {
      double v = 0;
      for (std::size_t j = 0; j < d; ++j) v += double(s.x[i * d + j]) * teacher[c * d + j];
      if (v > best) best = v, s.y[i] = static_cast<int>(c);
    }
  }
  return s;
}

inline km::mlp::Options small_options(const std::string& kernel) {
  km::mlp::Options o;
  o.hidden = {24, 16};
  o.batch = 32;
  o.epochs = 3;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.seed = 5;
  o.backend.kernel = kernel;
  return o;
}

template <class T>
void check_same_curve(const std::string& kernel, km::gemm::GpuOptions gpu = {}) {
  const auto train = teacher_set<T>(400, 20, 10, 1), test = teacher_set<T>(100, 20, 10, 2);
  auto ref_o = small_options("cpu-blas");
  auto o = small_options(kernel);
  o.backend.gpu = gpu;
  km::mlp::Trainer<T> ref(ref_o, train.d, 10), got(o, train.d, 10);
  // Float: the products' order differs between kernels (u = 2^-24, sums of up to 32 terms),
  // and 39 steps of SGD carry those differences on; double: 2^-53.
  const double tol = sizeof(T) == 4 ? 2e-4 : 1e-11;
  for (int e = 1; e <= o.epochs; ++e) {
    const auto a = ref.epoch(e, train, test), b = got.epoch(e, train, test);
    EXPECT_NEAR(b.train_loss, a.train_loss, tol * a.train_loss) << kernel << " epoch " << e;
    EXPECT_NEAR(b.test_loss, a.test_loss, tol * a.test_loss) << kernel << " epoch " << e;
  }
  for (int l = 0; l < 3; ++l) {
    const auto a = ref.weights(l), b = got.weights(l);
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
    EXPECT_LT(worst, sizeof(T) == 4 ? 1e-4 : 1e-12) << kernel << " layer " << l;
  }
}

}  // namespace kmtest
