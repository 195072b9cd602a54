// Generated lab data. Values come from a counter-based hash of (seed, stream, index), so
// a seed gives the same data for any thread count, and generation runs in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/dataset.hpp"
#include "io/hash.hpp"

namespace km {

// The lab's size rule: MB * 2^20 / (coords * 8) objects (8 bytes per value, whatever the
// precision, so float and double runs cluster the same objects).
std::size_t objects_for_size(double megabytes, std::size_t coords);

// Uniform values in [0, 1).
template <class T>
Dataset<T> generate_uniform(std::size_t n, std::size_t d, std::uint64_t seed);
// Rows [first, first + count) of generate_uniform(n, d, seed), the same values (one MPI rank's share).
template <class T>
Dataset<T> generate_uniform_rows(std::size_t n, std::size_t d, std::uint64_t seed, std::size_t first,
                                 std::size_t count);

struct BlobOptions {
  std::size_t n = 0, d = 0, k = 0;
  std::uint64_t seed = 0;
  double cluster_std = 1.0;   // standard deviation of each Gaussian blob
  double center_box = 10.0;   // centres uniform in [-center_box, center_box]^d
  std::size_t first = 0;      // generate rows [first, first + count) of the n (one MPI rank's share)
  std::size_t count = 0;      // 0: all n
};

template <class T>
struct Blobs {
  Dataset<T> data;
  std::vector<T> centers;             // k*d, row-major
  std::vector<std::int32_t> labels;   // n: the blob each object was drawn from
};

// Isotropic Gaussian blobs with known centres; object i belongs to a uniformly random blob.
// With first/count, data and labels hold those rows only, with the values the whole data has.
template <class T>
Blobs<T> generate_blobs(const BlobOptions& options);

}  // namespace km
