// Data for the cosine and dot metrics' tests (CPU and GPU): directions spread around the origin
// (uniform in [-0.5, 0.5)), clustered (blobs), quantised (multiples of 1/255 in [-0.5, 0.5]:
// exact ties among the objects' directions) and offset (uniform + 1000: every direction within
// 3e-4 radians of the others, so the cosines tie to a few ulps).
#pragma once

#include <cmath>
#include <string>

#include "io/generate.hpp"
#include "kmeans/params.hpp"
#include "test_util.hpp"

namespace kmtest {

inline const char* metric_data_name(int kind) {
  static const char* const names[] = {"spread", "blobs", "quantised", "offset"};
  return names[kind];
}

template <class T>
km::Dataset<T> metric_data(int kind, std::size_t n, std::size_t d, std::size_t k, std::uint64_t seed) {
  if (kind == 1) return make_data<T>(true, n, d, k, seed);
  auto data = km::generate_uniform<T>(n, d, seed);
  T* v = data.values.data();
  for (std::size_t i = 0; i < n * d; ++i) {
    const double x = static_cast<double>(v[i]);
    v[i] = kind == 0   ? static_cast<T>(x - 0.5)
           : kind == 2 ? static_cast<T>(std::floor(x * 6) / 255.0 - 0.01)
                       : static_cast<T>(x + 1000.0);
  }
  return data;
}

// The brute-force score of x against c in long double: the cosine of the angle, or the inner product.
template <class T>
long double similarity(const T* x, const T* c, std::size_t d, km::Metric metric) {
  long double dot = 0, xx = 0, cc = 0;
  for (std::size_t j = 0; j < d; ++j) {
    dot += static_cast<long double>(x[j]) * c[j];
    xx += static_cast<long double>(x[j]) * x[j];
    cc += static_cast<long double>(c[j]) * c[j];
  }
  if (metric == km::Metric::dot) return dot / std::sqrt(cc);
  return xx == 0 ? 0 : dot / std::sqrt(xx * cc);
}

}  // namespace kmtest
