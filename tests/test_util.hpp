// Helpers the tests share: quick mode, a run by name, errors expected, distances, data, and
// small files of every format made in a temporary directory.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>
#include <omp.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "io/generate.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/registry.hpp"

namespace kmtest {

// KMEANS_TEST_QUICK=1 (for the sanitizers, which slow kernels down a hundredfold): the tests
// that honour it take fewer shapes that still reach every kernel path.
inline bool quick() {
  const char* v = std::getenv("KMEANS_TEST_QUICK");
  return v && std::string(v) == "1";
}

// OpenMP's thread count set for a scope and restored after it (an ASSERT's return included), so
// that a test cannot change the threads of the tests after it in the same process.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) : old_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  void set(int threads) { omp_set_num_threads(threads); }
  ~ScopedThreads() { omp_set_num_threads(old_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int old_;
};

// The registry's implementation `name` run on the data.
template <class T>
km::Result<T> run_impl(const std::string& name, const km::Dataset<T>& data, const km::Params& p) {
  return km::run(km::find_implementation(name), data, p);
}

// Runs fn, which must throw E whose message contains `needle` and is one line.
template <class E = km::InputError, class F>
void expect_error(F&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "must be one line: " << e.what();
  }
}

// Squared distance in double between two points of d coordinates.
template <class T>
double dist2(const T* x, const T* c, std::size_t d) {
  double s = 0;
  for (std::size_t j = 0; j < d; ++j) s += (double(x[j]) - double(c[j])) * (double(x[j]) - double(c[j]));
  return s;
}

// Blob-generator options for n objects of d coordinates around k centres (k >= 1).
inline km::BlobOptions blob_options(std::size_t n, std::size_t d, std::size_t k, std::uint64_t seed,
                                    double cluster_std = km::BlobOptions{}.cluster_std) {
  km::BlobOptions o;
  o.n = n;
  o.d = d;
  o.k = k < 1 ? 1 : k;
  o.seed = seed;
  o.cluster_std = cluster_std;
  return o;
}

// Uniform data in [0, 1), or blobs around k centres.
template <class T>
km::Dataset<T> make_data(bool blobs, std::size_t n, std::size_t d, std::size_t k, std::uint64_t seed) {
  if (!blobs) return km::generate_uniform<T>(n, d, seed);
  return std::move(km::generate_blobs<T>(blob_options(n, d, k, seed)).data);
}

// A fresh directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("kmeans-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline void write_bytes(const std::string& path, const void* data, std::size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

// Classic .bin: int32 N, int32 d, then the floats (which may be fewer than N*d on purpose).
inline void write_bin(const std::string& path, std::int32_t n, std::int32_t d, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 4);
  out.write(reinterpret_cast<const char*>(&d), 4);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
}

// .npy version 1.0 with the header dict given as text (padded as numpy pads it).
inline void write_npy_header(const std::string& path, std::string header, const void* data, std::size_t bytes) {
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  write_bytes(path, out.data(), out.size());
}

// .npy version 1.0 with any descr and shape text, e.g. ("<f8", "(3, 2)").
inline void write_npy(const std::string& path, const std::string& descr, const std::string& shape, const void* data,
                      std::size_t bytes, bool fortran = false) {
  write_npy_header(path,
                   "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " +
                       shape + ", }",
                   data, bytes);
}

// An HDF5 file with one dataset of the given rank and native type.
inline void write_h5(const std::string& path, const std::string& name, const std::vector<hsize_t>& dims,
                     hid_t type, const void* data, const std::string& extra_name = "") {
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  auto add = [&](const std::string& n) {
    hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t ds = H5Dcreate2(file, n.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(ds);
    H5Pclose(lcpl);
    H5Sclose(space);
  };
  add(name);
  if (!extra_name.empty()) add(extra_name);
  H5Fclose(file);
}

}  // namespace kmtest
