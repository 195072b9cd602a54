#include "kmeans/cpu_steps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace km {

template <class T>
double finalize_centroids(const double* sums, const std::int64_t* counts, std::size_t k, std::size_t d,
                          T* centroids) {
  double shift = 0;
  for (std::size_t c = 0; c < k; ++c) {
    if (counts[c] == 0) continue;  // empty cluster keeps its previous centroid
    const double inv = 1.0 / static_cast<double>(counts[c]);
    for (std::size_t j = 0; j < d; ++j) {
      const T updated = static_cast<T>(sums[c * d + j] * inv);
      const double delta = static_cast<double>(updated) - static_cast<double>(centroids[c * d + j]);
      shift += delta * delta;
      centroids[c * d + j] = updated;
    }
  }
  return shift;
}

template <class T>
double inertia(const Dataset<T>& data, const T* centroids, const std::int32_t* labels) {
  std::vector<double> chunk_sums;
  return inertia_chunks(data, centroids, labels, chunk_sums);
}

template <class T>
double inertia_chunks(const Dataset<T>& data, const T* centroids, const std::int32_t* labels,
                      std::vector<double>& chunk_sums) {
  // Chunks of about 2^18 values, a power of two objects (a function of d only, so the sum is
  // the same on any thread count, and a chunk never straddles two MPI ranks, whose rows start
  // at multiples of kSumChunk): wide data gets enough chunks for every core (60,000 x 784 was
  // 4 chunks of 16,384 objects, 20 ms on a 16-core box).
  const std::size_t chunk = inertia_chunk(data.d);
  return chunked_sum(
      data.n, chunk_sums,
      [&](std::size_t i) {
        return squared_distance_double(data.row(i), centroids + static_cast<std::size_t>(labels[i]) * data.d, data.d);
      },
      chunk);
}

template <class T>
double max_abs_value(const Dataset<T>& data) {
  const std::size_t total = data.n * data.d;
  const T* v = data.values.data();
  double m = 0;
  bool bad = false;
#pragma omp parallel for reduction(max : m) reduction(|| : bad) schedule(static)
  for (std::size_t i = 0; i < total; ++i) {
    const double a = std::abs(static_cast<double>(v[i]));
    bad = bad || !std::isfinite(a);
    m = std::max(m, a);
  }
  return bad ? std::numeric_limits<double>::quiet_NaN() : m;
}

template double max_abs_value(const Dataset<float>&);
template double max_abs_value(const Dataset<double>&);
template double finalize_centroids(const double*, const std::int64_t*, std::size_t, std::size_t, float*);
template double finalize_centroids(const double*, const std::int64_t*, std::size_t, std::size_t, double*);
template double inertia(const Dataset<float>&, const float*, const std::int32_t*);
template double inertia(const Dataset<double>&, const double*, const std::int32_t*);
template double inertia_chunks(const Dataset<float>&, const float*, const std::int32_t*, std::vector<double>&);
template double inertia_chunks(const Dataset<double>&, const double*, const std::int32_t*, std::vector<double>&);

}  // namespace km
