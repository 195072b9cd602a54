// CPU building blocks shared by the implementations and the driver.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/dataset.hpp"

namespace km {

// The reference distance: sum over j in order of (x_j - c_j)^2, in T. Implementations
// that must give seq's labels bit for bit keep exactly this order of operations.
template <class T>
inline T squared_distance(const T* x, const T* c, std::size_t d) {
  T s = 0;
  for (std::size_t j = 0; j < d; ++j) {
    const T diff = x[j] - c[j];
    s += diff * diff;
  }
  return s;
}

// Index of the nearest centroid; the lowest index wins ties.
template <class T>
inline std::int32_t nearest_centroid(const T* x, const T* centroids, std::size_t k, std::size_t d) {
  std::int32_t best = 0;
  T best_dist = squared_distance(x, centroids, d);
  for (std::size_t c = 1; c < k; ++c) {
    const T dist = squared_distance(x, centroids + c * d, d);
    if (dist < best_dist) {
      best_dist = dist;
      best = static_cast<std::int32_t>(c);
    }
  }
  return best;
}

// The update and the empty-cluster rule: centroid = sum / count, or unchanged when
// count == 0. Returns the summed squared shift of the centroids (in double).
template <class T>
double finalize_centroids(const double* sums, const std::int64_t* counts, std::size_t k, std::size_t d,
                          T* centroids);

// scikit-learn's inertia_: sum of squared distances (computed in double) from each object
// to the centroid of its label. Summed over fixed chunks in order: deterministic.
template <class T>
double inertia(const Dataset<T>& data, const T* centroids, const std::int32_t* labels);

// The largest |value| of the data (0 for all zeros), in parallel.
template <class T>
double max_abs_value(const Dataset<T>& data);

}  // namespace km
