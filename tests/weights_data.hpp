// Sample weights for the weighted fits' tests (CPU and GPU): continuous in [0, 3) with about
// one object in ten weighing 0, or small integers (1 to 4), seeded.
#pragma once

#include <cstdint>

#include "io/dataset.hpp"

namespace kmtest {

template <class T>
km::HostBuffer<T> sample_weights(std::size_t n, std::uint64_t seed, bool integers = false) {
  km::HostBuffer<T> w(n);
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) * 0x1p-53;
    if (integers)
      w[i] = static_cast<T>(1 + static_cast<int>(u * 4));
    else
      w[i] = u < 0.1 ? T(0) : static_cast<T>(u * 3);
  }
  return w;
}

}  // namespace kmtest
