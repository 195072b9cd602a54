// The C++ library's refusals (include/kmeans_gpu/kmeans.hpp), through the shipped shared library:
// each bad argument is an InvalidInput with one line naming it, before any work (a GPU-less
// machine: data said to be in GPU memory is a Failure naming why).
#include <gtest/gtest.h>

#include <kmeans_gpu/kmeans.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

using kmtest::expect_error;  // (test_util.hpp: the error's type, words, and one line)

std::vector<float> some_rows() {
  std::vector<float> x(40 * 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i * 37 % 11) / 11.0f;
  return x;
}

TEST(Api, InitialCentroidsMustBeFiniteInThePrecision) {
  const auto x = some_rows();
  kmeans_gpu::Params p;
  p.n_clusters = 3;
  p.implementation = "omp";
  p.init_centroids.assign(12, 0.5);
  p.init_centroids[5] = NAN;
  using kmeans_gpu::InvalidInput;
  expect_error<InvalidInput>([&] { kmeans_gpu::fit(x.data(), 40, 4, p); }, "centroid 1, coordinate 1: nan is not");
  p.init_centroids[5] = 1e300;  // a double, but no float
  expect_error<InvalidInput>([&] { kmeans_gpu::fit(x.data(), 40, 4, p); }, "outside float's range");
  const std::vector<double> xd(x.begin(), x.end());
  EXPECT_NO_THROW(kmeans_gpu::fit(xd.data(), 40, 4, p));  // (in double it is a centroid far away)
  std::vector<double> more(24, 0.5);
  more[13] = INFINITY;  // problem 1's block of a batch
  p.init_centroids = more;
  expect_error<InvalidInput>([&] { kmeans_gpu::batch_fit(xd.data(), 2, 20, 4, p); }, "inf is not a finite number");
  std::vector<float> c(12, 0.5f);
  c[3] = INFINITY;
  expect_error<InvalidInput>([&] { kmeans_gpu::predict(x.data(), 40, 4, c.data(), 3, "omp"); }, "not a finite");
}

TEST(Api, ParametersOutOfRange) {
  const auto x = some_rows();
  kmeans_gpu::Params p;
  p.n_clusters = 3;
  p.implementation = "omp";
  p.tol = NAN;
  using kmeans_gpu::InvalidInput;
  expect_error<InvalidInput>([&] { kmeans_gpu::fit(x.data(), 40, 4, p); }, "tol=nan");
  p.tol = 1e-4;
  p.threads = 100000;
  expect_error<InvalidInput>([&] { kmeans_gpu::fit(x.data(), 40, 4, p); }, "threads=100000: at most");
  p.threads = 0;
  expect_error<InvalidInput>([&] { kmeans_gpu::fit(x.data(), SIZE_MAX, 4, p); }, "too many to address");
}

TEST(Api, DeviceMemoryWithoutAGpu) {
  if (kmeans_gpu::gpu_available()) GTEST_SKIP() << "a GPU is present (tests/gpu/api_device.cpp covers it)";
  const auto x = some_rows();
  kmeans_gpu::Params p;
  p.n_clusters = 3;
  p.memory = kmeans_gpu::Memory::device;
  expect_error<kmeans_gpu::Failure>([&] { kmeans_gpu::fit(x.data(), 40, 4, p); }, "no usable GPU");
  expect_error<kmeans_gpu::InvalidInput>([&] { kmeans_gpu::fit(static_cast<const float*>(nullptr), 40, 4, p); },
                                         "x in GPU memory: a null pointer");
}

}  // namespace
