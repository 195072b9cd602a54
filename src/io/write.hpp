// Result writers. Every output goes to a temporary file beside the target and is renamed
// into place only when complete, so a failure never leaves a partial file.
//   .h5/.hdf5  /centroids (K x d, the run's precision), /labels (N, int32),
//              attributes inertia (double) and iterations (int32) on the root group
//   .csv       the centroids, one per row; labels beside it as <name>.labels.csv
//   .npy       the centroids (K x d, the run's precision); labels (N, int32) as <name>.labels.npy
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace km {

template <class T>
struct ResultView {
  const T* centroids;  // k*d row-major
  std::size_t k, d;
  const std::int32_t* labels;  // n
  std::size_t n;
  double inertia;
  int iterations;
  // > 0: a batch of this many problems, each of k centroids and n labels, one after another
  // (B * k * d and B * n values), written as .npy arrays of shape (B, k, d) and (B, n).
  std::size_t batch = 0;
};

// A file the run reads, and what an error calls it ("the input file", "the --init file").
struct ReadFile {
  std::string role, path;
};

// Checks, before any work is done, that the output can be written: a known extension, an
// existing, writable directory, no file it would write (for .csv and .npy also the labels
// file) existing as anything but a regular file, and none being a file the run reads
// (compared by device and inode, so links and other spellings count too). Throws UsageError
// naming the problem.
void check_output_path(const std::string& path, const std::vector<ReadFile>& reads);
inline void check_output_path(const std::string& path, const std::string& input = "") {
  check_output_path(path, input.empty() ? std::vector<ReadFile>{} : std::vector<ReadFile>{{"the input file", input}});
}

// A temporary file that is removed unless committed, also when a signal ends the program while
// it exists (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, the timers' and the user signals, where
// their default is in force: the handler removes it, then lets the signal act).
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  const std::string& path() const { return path_; }
  // Flushes its contents to the disk (fsync); throws InputError on failure.
  void sync();
  // Syncs it, then renames it to final_path (atomic within the directory); throws InputError
  // on failure. The caller syncs the directory after its last rename.
  void commit_to(const std::string& final_path);

 private:
  std::string path_;
  int slot_ = -1;
  bool committed_ = false;
  bool synced_ = false;
};

// For tests: when set, called between the two renames that commit a .csv/.npy pair (labels,
// then centroids), where a signal must leave the old pair or the new one.
extern void (*g_between_pair_renames_for_tests)();

// One array as a NumPy .npy (descr "<f4", "<f8", "<i4"...; C order), written whole or not
// at all (through a TemporaryFile).
void write_npy_file(const std::string& path, const char* descr, const std::vector<std::size_t>& shape,
                    const void* data, std::size_t bytes);

// "<dir>/<stem>.labels.csv" for "<dir>/<stem>.csv" (likewise .npy).
std::string labels_path_for(const std::string& path);

// Writes .h5/.hdf5 or .csv by the extension (callers check the path with
// check_output_path before the run).
template <class T>
void write_result(const std::string& path, const ResultView<T>& result);

// Implemented in hdf5_io.cpp; writes to exactly `path` (the caller handles the rename); errors
// name `shown`, the file the user asked for (path when empty).
template <class T>
void write_hdf5_file(const std::string& path, const ResultView<T>& result, const std::string& shown = {});

// A temporary name in the same directory, so the final rename is atomic.
std::string temporary_path_for(const std::string& path);

}  // namespace km
