// The cosine and dot metrics on the host (kernels/kmeans/unit_norm.hpp says why the
// Euclidean assignment against unit-length centroids is theirs): the objects' normalisation
// for cosine, the initial centroids' for both, and each metric's objective.
#pragma once

#include <cstdint>
#include <vector>

#include "io/dataset.hpp"
#include "kmeans/params.hpp"

namespace km {

// cosine: each object divided by its length (unit_norm.hpp's arithmetic); an object of length
// 0 stays 0. A copy: the caller's data is left as it is (its sample weights are borrowed, so
// `data` must outlive the copy).
template <class T>
Dataset<T> unit_rows(const Dataset<T>& data);

// The initial (or given) centroids made unit length, row by row, except rows already of length
// 1 to within rounding (|length - 1| <= 4 u + 2 d 2^-53, u T's unit roundoff), which stay as
// they are: so that an object of the normalised data, or the centroids a fit returned, keep
// their bits (predict with a fit's centroids gives the fit's labels). Throws InputError for a
// centroid of length 0 or not finite (cosine and dot need a direction); drawn_by: the --init that
// drew them from the data (the message then says so), nullptr for given centroids.
template <class T>
void unit_centroids(std::vector<T>& centroids, std::size_t d, const char* drawn_by = nullptr);

// The --init name that drew a fit's initial centroids from its data, nullptr where they were given.
inline const char* drawn_by(const Params& params) {
  return params.init == Init::given ? nullptr : to_string(params.init);
}

// The objective a fit with `metric` minimises, for the labels and centroids given, in double,
// chunked as inertia_chunks (cpu_steps.hpp: the same bits on any thread count and any split of
// the rows into MPI ranks): euclidean, sum |x - c|^2; cosine (data: the normalised objects),
// sum (1 - x.c); dot, -sum x.c; each term times the object's sample weight where there are
// weights. chunk_sums receives each chunk's sum.
template <class T>
double objective_chunks(const Dataset<T>& data, const T* centroids, const std::int32_t* labels, Metric metric,
                        std::vector<double>& chunk_sums);
template <class T>
double objective(const Dataset<T>& data, const T* centroids, const std::int32_t* labels, Metric metric) {
  std::vector<double> chunk_sums;
  return objective_chunks(data, centroids, labels, metric, chunk_sums);
}

}  // namespace km
