// Result writers. Every output goes to a temporary file beside the target and is renamed
// into place only when complete, so a failure never leaves a partial file.
//   .h5/.hdf5  /centroids (K x d, the run's precision), /labels (N, int32),
//              attributes inertia (double) and iterations (int32) on the root group
//   .csv       the centroids, one per row; labels beside it as <name>.labels.csv
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace km {

template <class T>
struct ResultView {
  const T* centroids;  // k*d row-major
  std::size_t k, d;
  const std::int32_t* labels;  // n
  std::size_t n;
  double inertia;
  int iterations;
};

// Checks, before any work is done, that the output can be written: a known extension and
// an existing, writable directory. Throws UsageError naming the problem.
void check_output_path(const std::string& path);

// "<dir>/<stem>.labels.csv" for "<dir>/<stem>.csv".
std::string labels_path_for(const std::string& csv_path);

template <class T>
void write_result(const std::string& path, const ResultView<T>& result);

// Implemented in hdf5_io.cpp; writes to exactly `path` (the caller handles the rename).
template <class T>
void write_hdf5_file(const std::string& path, const ResultView<T>& result);

// A temporary name in the same directory, so the final rename is atomic.
std::string temporary_path_for(const std::string& path);

}  // namespace km
