// The data front end: one load() that dispatches on the file extension.
//   .h5/.hdf5  2-D float dataset: IEEE half, bfloat16, float32, float64 (options.dataset names
//              it, else the only 2-D one)
//   .csv       numbers, optional header row
//   .npy       2-D float16/bfloat16/float32/float64, little-endian, C order
//   .bin       classic binary: int32 N, int32 d, then N*d float32 row-major
//   .txt       classic text: one object per line, blank-separated, optional leading integer id
// Every reader streams into one exactly-sized buffer (no second copy) and refuses NaN/Inf.
// 16-bit values become float exactly (io/element.hpp), strip by strip as they are read; the
// Dataset's `element` names what the file held.
#pragma once

#include <optional>
#include <string>

#include "dist/team.hpp"
#include "io/dataset.hpp"
#include "io/element.hpp"

namespace km {

struct LoadOptions {
  std::string dataset;                 // HDF5 dataset path; empty = the only 2-D dataset
  std::optional<std::size_t> coords;   // --coords given by the user: must match the file
  // One MPI rank's share (dist/team.hpp: split_rows): .h5 (a hyperslab), .npy and .bin (by
  // byte offset) read only these rows; .csv and .txt are parsed whole and keep them.
  int rank = 0, ranks = 1;
  RowSplit* split = nullptr;           // receives the rows read, of how many
  // Given: a 3-D .npy array or HDF5 dataset (B, N, d) -- B problems of N objects -- is read as
  // B * N rows of d, and *batch receives B (0 for a 2-D array). Not given: a 3-D array is refused.
  std::size_t* batch = nullptr;
  // A 1-D .npy array is read as n rows of one value (--weights); otherwise it is refused.
  bool column = false;
};

enum class Format { hdf5, csv, npy, bin, txt };

// Throws InputError for an unknown extension.
Format format_from_path(const std::string& path);

// Throws InputError naming the reason (no such file, a symbolic link loop, permission
// denied, a directory, a FIFO or device) unless `path` is a regular file we can open.
void require_regular_readable(const std::string& path);

template <class T>
Dataset<T> load(const std::string& path, const LoadOptions& options = {});

// What load() would read the values from, without reading them: an .npy file's header or an
// HDF5 dataset's type (text for .csv and .txt, float32 for .bin). Throws InputError as load()
// would for a file it cannot read.
Element input_element(const std::string& path, const std::string& dataset = {});

// Implemented in hdf5_io.cpp.
// rank/ranks: read that rank's rows only (a hyperslab); split receives them. batch: as
// LoadOptions::batch (a 3-D dataset (B, N, d) read as B * N rows).
Element hdf5_element(const std::string& path, const std::string& dataset_name);
template <class T>
Dataset<T> load_hdf5(const std::string& path, const std::string& dataset_name, int rank = 0, int ranks = 1,
                     RowSplit* split = nullptr, std::size_t* batch = nullptr);

}  // namespace km
