#include "kmeans/metric.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/errors.hpp"
#include "kernels/kmeans/unit_norm.hpp"
#include "kmeans/cpu_steps.hpp"

namespace km {

template <class T>
Dataset<T> unit_rows(const Dataset<T>& data) {
  Dataset<T> out(data.n, data.d, data.source);
  if (data.weighted()) out.weights = HostBuffer<T>::borrow(data.weights.data(), data.n);  // (the caller's)
  const std::size_t d = data.d;
  const auto n = static_cast<std::ptrdiff_t>(data.n);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const T* x = data.row(static_cast<std::size_t>(i));
    T* y = out.values.data() + static_cast<std::size_t>(i) * d;
    const double norm = kernels::ordered_norm([&](int j) { return x[j]; }, static_cast<int>(d));
    if (norm > 0)
      for (std::size_t j = 0; j < d; ++j) y[j] = kernels::unit_coordinate(x[j], norm);
    else  // 0 stays 0; NaN and infinity go on to the range check (NaN then)
      for (std::size_t j = 0; j < d; ++j) y[j] = norm == 0 ? T(0) : std::numeric_limits<T>::quiet_NaN();
  }
  return out;
}

namespace {

// What to do about a row of length 0 that the --init `drawn_by` took from the data. Only first
// takes such rows (the others skip them: init_detail.hpp, draw_nonzero_row).
std::string zero_row_advice(const char* drawn_by) {
  if (std::string(drawn_by) != "first") return strprintf("; --init=%s took it from the data", drawn_by);
  return "; --init=first took it from the data: remove rows of length 0, use another --init (the others skip "
         "them), or give initial centroids";
}

}  // namespace

template <class T>
void unit_centroids(std::vector<T>& centroids, std::size_t d, const char* drawn_by) {
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double slack = 4 * u + 2 * static_cast<double>(d) * 0x1p-53;
  for (std::size_t c = 0; c * d < centroids.size(); ++c) {
    T* row = centroids.data() + c * d;
    const double norm = kernels::ordered_norm([&](int j) { return row[j]; }, static_cast<int>(d));
    if (!(norm > 0) || !std::isfinite(norm))
      throw InputError(strprintf("initial centroid %zu has length %g: the cosine and dot metrics need centroids "
                                 "with a direction (a non-zero, finite length)%s",
                                 c, norm,
                                 drawn_by ? zero_row_advice(drawn_by).c_str() : ""));
    if (std::fabs(norm - 1) <= slack) continue;
    for (std::size_t j = 0; j < d; ++j) row[j] = kernels::unit_coordinate(row[j], norm);
  }
}

template <class T>
double objective_chunks(const Dataset<T>& data, const T* centroids, const std::int32_t* labels, Metric metric,
                        std::vector<double>& chunk_sums) {
  if (metric == Metric::euclidean) return inertia_chunks(data, centroids, labels, chunk_sums);
  const std::size_t d = data.d;
  const double offset = metric == Metric::cosine ? 1.0 : 0.0;
  // Each object's x.c in double, in coordinate order; the chunks as inertia_chunks'.
  return chunked_sum(
      data.n, chunk_sums,
      [&](std::size_t i) {
        const T* x = data.row(i);
        const T* c = centroids + static_cast<std::size_t>(labels[i]) * d;
        double dot = 0;
        for (std::size_t j = 0; j < d; ++j) dot += static_cast<double>(x[j]) * static_cast<double>(c[j]);
        return static_cast<double>(data.weight(i)) * (offset - dot);
      },
      inertia_chunk(d));
}

template Dataset<float> unit_rows(const Dataset<float>&);
template Dataset<double> unit_rows(const Dataset<double>&);
template void unit_centroids(std::vector<float>&, std::size_t, const char*);
template void unit_centroids(std::vector<double>&, std::size_t, const char*);
template double objective_chunks(const Dataset<float>&, const float*, const std::int32_t*, Metric,
                                 std::vector<double>&);
template double objective_chunks(const Dataset<double>&, const double*, const std::int32_t*, Metric,
                                 std::vector<double>&);

}  // namespace km
