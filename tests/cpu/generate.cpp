// Generators: reproducible, in range, blobs where they say they are.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/errors.hpp"
#include "io/generate.hpp"
#include "test_util.hpp"

TEST(Generate, SizeRuleMatchesTheLab) {
  EXPECT_EQ(km::objects_for_size(256, 16), 256u * 1048576u / (16u * 8u));
  EXPECT_EQ(km::objects_for_size(1, 2), 65536u);
  EXPECT_THROW(km::objects_for_size(0, 16), km::UsageError);
  EXPECT_THROW(km::objects_for_size(-3, 16), km::UsageError);
  EXPECT_THROW(km::objects_for_size(1e-9, 16), km::UsageError);
}

TEST(Generate, UniformSameSeedSameData) {
  auto a = km::generate_uniform<double>(1000, 7, 42);
  auto b = km::generate_uniform<double>(1000, 7, 42);
  auto c = km::generate_uniform<double>(1000, 7, 43);
  EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(), 7000 * sizeof(double)), 0);
  EXPECT_NE(std::memcmp(a.values.data(), c.values.data(), 7000 * sizeof(double)), 0);
  double sum = 0;
  for (std::size_t i = 0; i < 7000; ++i) {
    ASSERT_GE(a.values[i], 0.0);
    ASSERT_LT(a.values[i], 1.0);
    sum += a.values[i];
  }
  EXPECT_NEAR(sum / 7000, 0.5, 0.02);
  auto f = km::generate_uniform<float>(1000, 7, 42);  // float is the double data rounded
  for (std::size_t i = 0; i < 7000; ++i) ASSERT_EQ(f.values[i], static_cast<float>(a.values[i]));
}

TEST(Generate, BlobsAreReproducibleAndAroundTheirCentres) {
  const km::BlobOptions o = kmtest::blob_options(5000, 3, 4, 9, 0.5);
  auto a = km::generate_blobs<double>(o);
  auto b = km::generate_blobs<double>(o);
  EXPECT_EQ(std::memcmp(a.data.values.data(), b.data.values.data(), o.n * o.d * sizeof(double)), 0);
  EXPECT_EQ(a.labels, b.labels);
  ASSERT_EQ(a.centers.size(), o.k * o.d);
  std::vector<double> mean(o.k * o.d, 0.0), var(o.k, 0.0);
  std::vector<int> count(o.k, 0);
  for (std::size_t i = 0; i < o.n; ++i) {
    const int l = a.labels[i];
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 4);
    ++count[l];
    for (std::size_t j = 0; j < o.d; ++j) mean[l * o.d + j] += a.data.row(i)[j];
  }
  for (std::size_t c = 0; c < o.k; ++c) {
    EXPECT_GT(count[c], 1000) << "labels are roughly balanced";
    // Five standard errors of a mean of count[c] draws with sigma 0.5.
    const double tolerance = 5 * 0.5 / std::sqrt(count[c]);
    for (std::size_t j = 0; j < o.d; ++j)
      EXPECT_NEAR(mean[c * o.d + j] / count[c], a.centers[c * o.d + j], tolerance);
  }
  for (std::size_t i = 0; i < o.n; ++i) {
    const int l = a.labels[i];
    for (std::size_t j = 0; j < o.d; ++j) var[l] += std::pow(a.data.row(i)[j] - a.centers[l * o.d + j], 2);
  }
  for (std::size_t c = 0; c < o.k; ++c) EXPECT_NEAR(std::sqrt(var[c] / (count[c] * 3.0)), 0.5, 0.03);
}
