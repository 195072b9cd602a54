#include "io/write.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <type_traits>

#include "common/errors.hpp"
#include "io/load.hpp"

namespace km {

namespace fs = std::filesystem;

void check_output_path(const std::string& path) {
  Format format;
  try {
    format = format_from_path(path);
  } catch (const InputError&) {
    throw UsageError(strprintf("--output '%s': unknown extension (expected .h5, .hdf5 or .csv)", path.c_str()));
  }
  if (format != Format::hdf5 && format != Format::csv)
    throw UsageError(strprintf("--output '%s': results are written as .h5, .hdf5 or .csv", path.c_str()));
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError(strprintf("--output '%s': directory '%s' does not exist", path.c_str(), dir.c_str()));
  if (::access(dir.c_str(), W_OK) != 0)
    throw UsageError(strprintf("--output '%s': directory '%s' is not writable", path.c_str(), dir.c_str()));
  if (fs::is_directory(path, ec)) throw UsageError(strprintf("--output '%s' is a directory", path.c_str()));
}

std::string labels_path_for(const std::string& csv_path) {
  fs::path p(csv_path);
  return (p.parent_path() / (p.stem().string() + ".labels.csv")).string();
}

std::string temporary_path_for(const std::string& path) {
  fs::path p(path);
  std::string name(".");  // built by append: GCC 12 warns falsely on "." + std::string
  name.append(p.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  return (p.parent_path() / name).string();
}

namespace {

// Removes the temporary file unless the write was committed.
struct TempFile {
  std::string path;
  bool committed = false;
  ~TempFile() {
    if (!committed) std::remove(path.c_str());
  }
};

template <class Fn>
void write_text_file(const std::string& path, Fn&& body) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw InputError(strprintf("cannot create '%s': %s", path.c_str(), std::strerror(errno)));
  body(f);
  const bool bad = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || bad) throw InputError(strprintf("failed writing '%s' (disk full?)", path.c_str()));
}

void commit(TempFile& tmp, const std::string& final_path) {
  if (std::rename(tmp.path.c_str(), final_path.c_str()) != 0)
    throw InputError(strprintf("cannot rename into '%s': %s", final_path.c_str(), std::strerror(errno)));
  tmp.committed = true;
}

}  // namespace

template <class T>
void write_result(const std::string& path, const ResultView<T>& r) {
  check_output_path(path);
  const Format format = format_from_path(path);
  TempFile tmp{temporary_path_for(path)};
  if (format == Format::hdf5) {
    write_hdf5_file(tmp.path, r);
    commit(tmp, path);
    return;
  }
  // Enough digits that the text reads back to the same binary value.
  const int digits = std::is_same_v<T, float> ? 9 : 17;
  write_text_file(tmp.path, [&](std::FILE* f) {
    for (std::size_t c = 0; c < r.k; ++c) {
      for (std::size_t j = 0; j < r.d; ++j)
        std::fprintf(f, j ? ",%.*g" : "%.*g", digits, static_cast<double>(r.centroids[c * r.d + j]));
      std::fputc('\n', f);
    }
  });
  const std::string labels_path = labels_path_for(path);
  TempFile tmp_labels{temporary_path_for(labels_path)};
  write_text_file(tmp_labels.path, [&](std::FILE* f) {
    for (std::size_t i = 0; i < r.n; ++i) std::fprintf(f, "%d\n", r.labels[i]);
  });
  commit(tmp_labels, labels_path);
  commit(tmp, path);
}

template void write_result(const std::string&, const ResultView<float>&);
template void write_result(const std::string&, const ResultView<double>&);

}  // namespace km
