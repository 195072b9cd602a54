#include "io/generate.hpp"

#include <cmath>
#include <numbers>

#include "common/errors.hpp"

namespace km {

std::size_t objects_for_size(double megabytes, std::size_t coords) {
  if (!(megabytes > 0)) throw UsageError("--size must be positive");
  if (coords == 0) throw UsageError("--coords must be positive");
  const double n = std::floor(megabytes * 1048576.0 / (static_cast<double>(coords) * 8.0));
  if (n < 1)
    throw UsageError(strprintf("--size=%g MB holds no object of %zu coordinates", megabytes, coords));
  if (!(n < 9.2e18)) throw UsageError(strprintf("--size=%g MB: too large", megabytes));  // beyond a 64-bit count
  return static_cast<std::size_t>(n);
}

namespace {
enum Stream : std::uint64_t { kUniform = 1, kCenters = 2, kLabels = 3, kNoise1 = 4, kNoise2 = 5 };
}

template <class T>
Dataset<T> generate_uniform(std::size_t n, std::size_t d, std::uint64_t seed) {
  return generate_uniform_rows<T>(n, d, seed, 0, n);
}

template <class T>
Dataset<T> generate_uniform_rows(std::size_t n, std::size_t d, std::uint64_t seed, std::size_t first,
                                 std::size_t count) {
  check_shape(static_cast<std::int64_t>(n), static_cast<std::int64_t>(d), sizeof(T), "generated data");
  if (first > n || count > n - first) throw UsageError("generated rows out of range");
  Dataset<T> data(count, d, "uniform");
  T* v = data.values.data();
  const std::size_t total = count * d, offset = first * d;
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < total; ++i) v[i] = static_cast<T>(unit_double(hash64(seed, kUniform, offset + i)));
  return data;
}

template <class T>
Blobs<T> generate_blobs(const BlobOptions& o) {
  check_shape(static_cast<std::int64_t>(o.n), static_cast<std::int64_t>(o.d), sizeof(T), "generated data");
  if (o.k == 0) throw UsageError("blobs need at least one cluster");
  Blobs<T> b;
  const std::size_t count = o.count ? o.count : o.n - o.first;
  if (o.first > o.n || count > o.n - o.first) throw UsageError("generated rows out of range");
  b.data = Dataset<T>(count, o.d, "blobs");
  b.centers.resize(o.k * o.d);
  for (std::size_t i = 0; i < b.centers.size(); ++i)
    b.centers[i] = static_cast<T>((2 * unit_double(hash64(o.seed, kCenters, i)) - 1) * o.center_box);
  b.labels.resize(count);
  T* v = b.data.values.data();
  const double two_pi = 2 * std::numbers::pi;
#pragma omp parallel for schedule(static)
  for (std::size_t r = 0; r < count; ++r) {
    const std::size_t i = o.first + r;
    const auto label = static_cast<std::int32_t>(hash64(o.seed, kLabels, i) % o.k);
    b.labels[r] = label;
    for (std::size_t j = 0; j < o.d; ++j) {
      const std::size_t at = i * o.d + j;
      // Box-Muller: u1 in (0, 1] keeps the log finite.
      const double u1 = 1.0 - unit_double(hash64(o.seed, kNoise1, at));
      const double u2 = unit_double(hash64(o.seed, kNoise2, at));
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
      v[r * o.d + j] = static_cast<T>(b.centers[label * o.d + j] + o.cluster_std * z);
    }
  }
  return b;
}

template Dataset<float> generate_uniform(std::size_t, std::size_t, std::uint64_t);
template Dataset<double> generate_uniform(std::size_t, std::size_t, std::uint64_t);
template Dataset<float> generate_uniform_rows(std::size_t, std::size_t, std::uint64_t, std::size_t, std::size_t);
template Dataset<double> generate_uniform_rows(std::size_t, std::size_t, std::uint64_t, std::size_t, std::size_t);
template Blobs<float> generate_blobs(const BlobOptions&);
template Blobs<double> generate_blobs(const BlobOptions&);

}  // namespace km
