// HDF5 input and output through the C API (HDF5 1.10+).
#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "common/progress.hpp"
#include <signal.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>

#include "io/load.hpp"
#include "io/write.hpp"

namespace km {

namespace {

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  Closer close_;
};

// HDF5 prints its error stack to stderr by default; we report our own one-line errors.
void silence_hdf5() {
  static const bool done = [] {
    // No clean-up at exit: after a failed write (a full disk, the file-size limit) the file
    // cannot be closed, and HDF5 1.10 crashed in H5F__close_cb closing it again at exit, after
    // the error line. Every file is closed by its Handle; the library must not be in use yet.
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// HDF5 1.10 can crash inside its own metadata code on a damaged file: SIGSEGV/SIGBUS (the
// fuzzer found reads through bad pointers in H5F__accum_read and H5C_protect) or SIGABRT when
// glibc notices the heap it corrupted. Rather than dying on a signal, a crash while the
// library reads the file is reported as one line naming the file, and the program exits 1
// (nothing else is open then: no output has been started). While the guard stands, stderr
// points at /dev/null, so glibc's own abort message does not add a second line (HDF5's
// error stack is off anyway). KMEANS_NO_HDF5_GUARD=1 leaves all this alone (the fuzzer does).
class Hdf5CrashGuard {
 public:
  explicit Hdf5CrashGuard(const std::string& path) {
    if (const char* off = std::getenv("KMEANS_NO_HDF5_GUARD"); off && std::string(off) == "1") return;
    std::snprintf(message_, sizeof message_,
                  "kmeans: error: '%s': the HDF5 library crashed reading this file (damaged or not HDF5?)\n",
                  path.c_str());
    stderr_ = ::dup(2);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (stderr_ < 0 || null_fd < 0 || ::dup2(null_fd, 2) < 0) {
      if (null_fd >= 0) ::close(null_fd);
      if (stderr_ >= 0) ::close(stderr_);
      stderr_ = -1;
      return;
    }
    ::close(null_fd);
    saved_stderr_ = stderr_;
    struct sigaction sa {};
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    active_ = ::sigaction(SIGSEGV, &sa, &old_segv_) == 0 && ::sigaction(SIGBUS, &sa, &old_bus_) == 0 &&
              ::sigaction(SIGABRT, &sa, &old_abrt_) == 0;
  }
  ~Hdf5CrashGuard() {
    if (active_) {
      ::sigaction(SIGSEGV, &old_segv_, nullptr);
      ::sigaction(SIGBUS, &old_bus_, nullptr);
      ::sigaction(SIGABRT, &old_abrt_, nullptr);
    }
    if (stderr_ >= 0) {
      ::dup2(stderr_, 2);
      ::close(stderr_);
      saved_stderr_ = 2;
    }
  }
  Hdf5CrashGuard(const Hdf5CrashGuard&) = delete;
  Hdf5CrashGuard& operator=(const Hdf5CrashGuard&) = delete;

 private:
  static void on_crash(int) {
    const ssize_t ignored = ::write(saved_stderr_, message_, std::strlen(message_));
    (void)ignored;
    ::_exit(1);
  }
  static inline char message_[1024];
  static inline volatile int saved_stderr_ = 2;
  int stderr_ = -1;
  bool active_ = false;
  struct sigaction old_segv_ {}, old_bus_ {}, old_abrt_ {};
};

// Damaged metadata can also make HDF5 allocate without bound (the fuzzer found a 10 KB file
// that grew the process to 24 GB before the kernel killed it). While the library reads a
// file's metadata the address space is capped at its current size + 2 GiB, so such an
// allocation fails inside HDF5 (which reports an error) instead of exhausting the machine;
// release() lifts the cap before the data's own buffer is allocated.
class MetadataMemoryCap {
 public:
  MetadataMemoryCap() {
    if (::getrlimit(RLIMIT_AS, &old_) != 0) return;
    long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    if (pages <= 0) return;
    const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (2ull << 30);
    if (old_.rlim_cur != RLIM_INFINITY && old_.rlim_cur <= cap) return;  // already tighter
    rlimit capped = old_;
    capped.rlim_cur = cap;
    active_ = ::setrlimit(RLIMIT_AS, &capped) == 0;
  }
  ~MetadataMemoryCap() { release(); }
  MetadataMemoryCap(const MetadataMemoryCap&) = delete;
  MetadataMemoryCap& operator=(const MetadataMemoryCap&) = delete;
  void release() {
    if (active_) ::setrlimit(RLIMIT_AS, &old_);
    active_ = false;
  }

 private:
  rlimit old_{};
  bool active_ = false;
};

template <class T>
hid_t native_type() {
  return std::is_same_v<T, float> ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
}

// Selects rows [row, end) of d values in the file's space: of a 2-D dataset (problem < 0), or of
// problem `problem` of a 3-D one (B problems of N rows: a batch). The memory side stays 2-D.
bool select_rows(hid_t space, long long problem, hsize_t row, hsize_t end, hsize_t d) {
  if (problem < 0) {
    const hsize_t start[2] = {row, 0}, count[2] = {end - row, d};
    return H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0;
  }
  const hsize_t start[3] = {static_cast<hsize_t>(problem), row, 0}, count[3] = {1, end - row, d};
  return H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0;
}

// Rows [first, first + count) of a 2-D dataset of d columns (or of one problem of a 3-D one)
// into dst, in strips of about 64 MB (whole chunks of a chunked dataset, each read and
// decompressed once) so that progress shows.
template <class T>
bool read_rows(hid_t ds, hid_t space, hsize_t first, hsize_t count, hsize_t d, hsize_t chunk_rows,
               std::size_t file_bytes, T* dst, long long problem = -1) {
  const hsize_t want = std::max<hsize_t>(1, (hsize_t{64} << 20) / (d * sizeof(T) + 1));
  const hsize_t strip = chunk_rows ? std::max(chunk_rows, want / chunk_rows * chunk_rows) : want;
  const double total_mb = static_cast<double>(count * d * file_bytes) / 1e6;
  for (hsize_t row = first; row < first + count;) {
    const hsize_t end = std::min(first + count, (row / strip + 1) * strip);
    const hsize_t rows[2] = {end - row, d};
    Handle memory(H5Screate_simple(2, rows, nullptr), H5Sclose);
    if (!memory.ok() || !select_rows(space, problem, row, end, d) ||
        H5Dread(ds, native_type<T>(), memory.get(), space, H5P_DEFAULT, dst + (row - first) * d) < 0)
      return false;
    row = end;
    progress::update("reading", static_cast<double>((row - first) * d * file_bytes) / 1e6, total_mb, "MB");
  }
  return true;
}

struct FindState {
  std::vector<std::string> two_d;    // paths of 2-D datasets
  std::vector<std::string> three_d;  // and of 3-D ones (a batch)
};

// HDF5 1.10.3+ and 1.12 both provide the "2" object API; 1.12 renames its info struct.
#if H5_VERSION_GE(1, 12, 0)
using ObjectInfo = H5O_info1_t;
#else
using ObjectInfo = H5O_info_t;
#endif

herr_t collect_2d(hid_t obj, const char* name, const ObjectInfo* info, void* op_data) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  Handle ds(H5Dopen2(obj, name, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) return 0;
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int dimensions = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : 0;
  if (dimensions == 2) static_cast<FindState*>(op_data)->two_d.push_back(std::string("/") + name);
  if (dimensions == 3) static_cast<FindState*>(op_data)->three_d.push_back(std::string("/") + name);
  return 0;
}

// The path of the dataset to read: `dataset_name` (each link on the way checked, so a missing
// group is our error, not an HDF5 failure), or the file's only 2-D dataset, or, without any, its
// only 3-D one (a batch).
std::string resolve_dataset(hid_t file, const std::string& path, const std::string& dataset_name) {
  std::string name = dataset_name;
  if (name.empty()) {
    FindState found;
    H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, collect_2d, &found, H5O_INFO_BASIC);
    if (found.two_d.empty() && found.three_d.size() == 1) return found.three_d[0];
    if (found.two_d.empty())
      throw InputError(strprintf("'%s': no 2-D dataset (objects x coords) in the file%s", path.c_str(),
                                 found.three_d.empty() ? ", nor a 3-D one (a batch)"
                                                       : " (and several 3-D ones: name one with --dataset)"));
    if (found.two_d.size() > 1)
      throw InputError(strprintf("'%s': %zu 2-D datasets (%s, %s, ...); name one with --dataset", path.c_str(),
                                 found.two_d.size(), found.two_d[0].c_str(), found.two_d[1].c_str()));
    return found.two_d[0];
  }
  std::string partial = name.front() == '/' ? "/" : "";
  std::size_t pos = name.front() == '/' ? 1 : 0;
  bool exists = true;
  while (exists) {
    std::size_t slash = name.find('/', pos);
    partial += name.substr(pos, slash == std::string::npos ? slash : slash - pos);
    exists = H5Lexists(file, partial.c_str(), H5P_DEFAULT) > 0;
    if (slash == std::string::npos) break;
    partial += "/";
    pos = slash + 1;
  }
  if (!exists) throw InputError(strprintf("'%s': no dataset named '%s'", path.c_str(), name.c_str()));
  ObjectInfo info;
  herr_t got = H5Oget_info_by_name2(file, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT);
  if (got < 0 || info.type != H5O_TYPE_DATASET)
    throw InputError(strprintf("'%s': '%s' is not a dataset", path.c_str(), name.c_str()));
  return name;
}

// The file opened read-only (an identifier for a Handle), or InputError.
hid_t open_file(const std::string& path) {
  if (H5Fis_hdf5(path.c_str()) <= 0) throw InputError(strprintf("'%s': not an HDF5 file (or empty)", path.c_str()));
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw InputError(strprintf("cannot open '%s' as HDF5", path.c_str()));
  return file;
}

// A dataset's type as the element it holds: 4- and 8-byte floats are float32 and float64 (HDF5
// converts them to the run's precision itself); a 2-byte float is IEEE half or bfloat16 when its
// bit fields are exactly theirs (h5py writes float16 as such a type); anything else is refused.
Element float_element(hid_t type, const std::string& path, const std::string& name) {
  const char* where = path.c_str();
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  if (cls == H5T_INTEGER)
    throw InputError(strprintf("'%s': dataset '%s' has an integer type; refused (store it as float32/float64)", where,
                               name.c_str()));
  if (cls == H5T_OPAQUE && size == 2)
    throw InputError(strprintf("'%s': dataset '%s' has an opaque 2-byte type (as h5py stores bfloat16 arrays), "
                               "which does not say what its values are; store them as float32 (exact) or in an .npy",
                               where, name.c_str()));
  if (cls != H5T_FLOAT)
    throw InputError(strprintf("'%s': dataset '%s' is not a floating-point dataset", where, name.c_str()));
  if (size == 4) return Element::float32;
  if (size == 8) return Element::float64;
  if (size != 2)
    throw InputError(strprintf("'%s': dataset '%s' has a %zu-byte floating-point type; float16, bfloat16, float32 "
                               "or float64 is needed",
                               where, name.c_str(), size));
  std::size_t sign = 0, exponent_at = 0, exponent_bits = 0, mantissa_at = 0, mantissa_bits = 0;
  const bool fields = H5Tget_fields(type, &sign, &exponent_at, &exponent_bits, &mantissa_at, &mantissa_bits) >= 0;
  const std::size_t bias = H5Tget_ebias(type);
  if (fields && H5Tget_precision(type) == 16 && H5Tget_offset(type) == 0 && sign == 15 && mantissa_at == 0 &&
      H5Tget_norm(type) == H5T_NORM_IMPLIED) {
    if (exponent_at == 10 && exponent_bits == 5 && mantissa_bits == 10 && bias == 15) return Element::float16;
    if (exponent_at == 7 && exponent_bits == 8 && mantissa_bits == 7 && bias == 127) return Element::bfloat16;
  }
  throw InputError(strprintf("'%s': dataset '%s' has a 16-bit float type of %zu exponent bits (bias %zu) and %zu "
                             "mantissa bits that is neither IEEE half (5, bias 15, 10) nor bfloat16 (8, bias 127, 7)",
                             where, name.c_str(), exponent_bits, bias, mantissa_bits));
}

// What the file claims must be plausible before anything is allocated or read: a damaged or
// hostile header can declare any shape, chunk or element size. Returns the chunks' rows (0: not
// chunked).
hsize_t check_storage(hid_t ds, const hsize_t* dims, int rank, std::size_t type_size, const std::string& path,
                      const std::string& name) {
  double declared = static_cast<double>(type_size);
  for (int i = 0; i < rank; ++i) declared *= static_cast<double>(dims[i]);
  Handle dcpl(H5Dget_create_plist(ds), H5Pclose);
  if (!dcpl.ok()) throw InputError(strprintf("'%s': cannot read the layout of '%s'", path.c_str(), name.c_str()));
  // Values kept outside the file (external raw files, a virtual dataset's sources) escape the
  // checks here and on the input file: a short raw file reads as zeros, a FIFO blocks, a device
  // reads as data. Refused.
  if (H5Pget_external_count(dcpl.get()) != 0)
    throw InputError(strprintf("'%s': dataset '%s' keeps its values in external files; write them into the HDF5 file "
                               "(or use .npy)",
                               path.c_str(), name.c_str()));
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_VIRTUAL)
    throw InputError(strprintf("'%s': dataset '%s' is a virtual dataset (its values in other datasets or files); "
                               "write a copy of it into the HDF5 file (or use .npy)",
                               path.c_str(), name.c_str()));
  hsize_t chunk[3] = {0, 0, 0};
  if (layout == H5D_CHUNKED) {
    if (H5Pget_chunk(dcpl.get(), rank, chunk) != rank)
      throw InputError(strprintf("'%s': dataset '%s' has a damaged chunk layout", path.c_str(), name.c_str()));
    double chunk_bytes = static_cast<double>(type_size);
    for (int i = 0; i < rank; ++i) chunk_bytes *= static_cast<double>(chunk[i]);
    if (chunk_bytes > 256.0 * 1048576)
      throw InputError(strprintf("'%s': dataset '%s' has chunks of %.0f MiB (at most 256 MiB are read)", path.c_str(),
                                 name.c_str(), chunk_bytes / 1048576));
  }
  std::string shape;
  for (int i = 0; i < rank; ++i) shape += strprintf("%s%llu", i ? " x " : "", static_cast<unsigned long long>(dims[i]));
  const double stored = static_cast<double>(H5Dget_storage_size(ds));
  const bool filtered = H5Pget_nfilters(dcpl.get()) > 0;
  if (!filtered && stored < declared)  // uncompressed: every byte must be there
    throw InputError(strprintf("'%s': dataset '%s' declares %s values (%.0f bytes) but stores %.0f bytes "
                               "(truncated or never written)",
                               path.c_str(), name.c_str(), shape.c_str(), declared, stored));
  for (int f = 0; f < H5Pget_nfilters(dcpl.get()); ++f) {  // a filter this HDF5 lacks: named, before a read fails
    unsigned flags = 0, config = 0;
    std::size_t values = 0;
    char filter_name[64] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(f), &flags, &values, nullptr,
                                           sizeof filter_name, filter_name, &config);
    // (an optional filter that could not run when the file was written left its chunks unfiltered,
    // which HDF5 reads without it)
    if (id < 0 || ((flags & H5Z_FLAG_OPTIONAL) == 0 && H5Zfilter_avail(id) <= 0))
      throw InputError(strprintf("'%s': dataset '%s' is compressed with filter %d (%s), which this program's HDF5 "
                                 "library cannot decode; rewrite it with gzip or without compression",
                                 path.c_str(), name.c_str(), static_cast<int>(id),
                                 filter_name[0] ? filter_name : "unnamed"));
  }
  if (filtered && chunk[0] != 0) {  // compressed: every chunk must be there (HDF5 reads a missing one as fill)
    double expected = 1;
    hsize_t written = 0;
    for (int i = 0; i < rank; ++i) {
      if (chunk[i] == 0)
        throw InputError(strprintf("'%s': dataset '%s' has a damaged chunk layout", path.c_str(), name.c_str()));
      expected *= static_cast<double>((dims[i] + chunk[i] - 1) / chunk[i]);
    }
    Handle space(H5Dget_space(ds), H5Sclose);
    if (!space.ok() || H5Dget_num_chunks(ds, space.get(), &written) < 0)
      throw InputError(strprintf("'%s': cannot count the chunks of dataset '%s'", path.c_str(), name.c_str()));
    if (static_cast<double>(written) < expected)
      throw InputError(strprintf("'%s': dataset '%s' declares %s values in %.0f chunks but stores %llu of them "
                                 "(truncated or never written)",
                                 path.c_str(), name.c_str(), shape.c_str(), expected,
                                 static_cast<unsigned long long>(written)));
  }
  return chunk[rank - 2];  // (a batch's chunks: their rows within a problem)
}

// Reads a 16-bit dataset's rows [part.first, part.first + part.count) into out, converting each
// value exactly (io/element.hpp). HDF5 reads the raw 16 bits (byte-swapped where the file is
// big-endian) strip by strip into a buffer of about 8 MiB, or of one row of chunks when that is
// larger, so that each chunk is read once; only that strip is held beside the data.
template <class T>
void read_16bit_rows(hid_t ds, hid_t space, hid_t file_type, Element element, hsize_t d, hsize_t chunk_rows,
                     const RowSplit& part, T* out, const std::string& path, const std::string& name,
                     long long problem = -1) {
  Handle raw(H5Tcopy(file_type), H5Tclose);
  if (!raw.ok() || H5Tset_order(raw.get(), H5T_ORDER_LE) < 0)
    throw InputError(strprintf("'%s': cannot read dataset '%s'", path.c_str(), name.c_str()));
  hsize_t step = std::max<hsize_t>(1, (hsize_t{1} << 22) / d);
  if (chunk_rows) step = step >= chunk_rows ? step / chunk_rows * chunk_rows : chunk_rows;
  const hsize_t strip_rows = std::min<hsize_t>(step, part.count);
  check_host_memory(static_cast<double>(strip_rows) * static_cast<double>(d) * 2,
                    strprintf("reading '%s' (%llu rows of 16-bit values at a time)", path.c_str(),
                              static_cast<unsigned long long>(strip_rows)));
  std::vector<std::uint16_t> strip(strip_rows * d);
  const hsize_t end = part.first + part.count;
  for (hsize_t row = part.first; row < end;) {
    const hsize_t next = std::min(end, (row / step + 1) * step);  // strips end on multiples of step
    const hsize_t count[2] = {next - row, d};
    Handle memory(H5Screate_simple(2, count, nullptr), H5Sclose);
    if (!memory.ok() || !select_rows(space, problem, row, next, d) ||
        H5Dread(ds, raw.get(), memory.get(), space, H5P_DEFAULT, strip.data()) < 0)
      throw InputError(strprintf("'%s': failed to read rows %llu..%llu of dataset '%s'", path.c_str(),
                                 static_cast<unsigned long long>(row), static_cast<unsigned long long>(next),
                                 name.c_str()));
    T* to = out + (row - part.first) * d;
    const std::size_t values = static_cast<std::size_t>((next - row) * d);
    for (std::size_t i = 0; i < values; ++i) to[i] = static_cast<T>(bits16_to_float(strip[i], element));
    progress::update("reading", static_cast<double>(next - part.first) * d * 2 / 1e6,
                     static_cast<double>(part.count) * d * 2 / 1e6, "MB");
    row = next;
  }
}

// The file and its dataset `wanted` (or the only 2-D one), opened; InputError when it cannot be.
struct OpenDataset {
  Handle file;
  std::string name;
  Handle ds;
  OpenDataset(const std::string& path, const std::string& wanted)
      : file(open_file(path), H5Fclose),
        name(resolve_dataset(file.get(), path, wanted)),
        ds(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose) {
    if (!ds.ok()) throw InputError(strprintf("'%s': cannot open dataset '%s'", path.c_str(), name.c_str()));
  }
};

}  // namespace

Element hdf5_element(const std::string& path, const std::string& dataset_name) {
  const Hdf5CrashGuard guard(path);
  MetadataMemoryCap memory_cap;
  silence_hdf5();
  const OpenDataset opened(path, dataset_name);
  const std::string& name = opened.name;
  const Handle& ds = opened.ds;
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  return float_element(type.get(), path, name);
}

template <class T>
Dataset<T> load_hdf5(const std::string& path, const std::string& dataset_name, int rank, int ranks, RowSplit* split,
                     std::size_t* batch) {
  const Hdf5CrashGuard guard(path);
  MetadataMemoryCap memory_cap;
  silence_hdf5();
  const OpenDataset opened(path, dataset_name);
  const std::string& name = opened.name;
  const Handle& ds = opened.ds;
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int dimensions = H5Sget_simple_extent_ndims(space.get());
  if (dimensions != 2 && !(dimensions == 3 && batch))
    throw InputError(strprintf("'%s': dataset '%s' is %d-D; a 2-D (objects x coords) dataset is needed%s",
                               path.c_str(), name.c_str(), dimensions,
                               dimensions == 3 ? " (a 3-D batch of problems is read as --input only)"
                               : batch         ? ", or a 3-D (problems x objects x coords) batch"
                                               : ""));
  hsize_t dims[3] = {1, 0, 0};  // a 2-D dataset read as one problem
  H5Sget_simple_extent_dims(space.get(), dims + 3 - dimensions, nullptr);
  if (batch) *batch = dimensions == 3 ? static_cast<std::size_t>(dims[0]) : 0;
  if (dimensions == 3) {
    if (ranks > 1)
      throw InputError(strprintf("'%s': a batch of problems (a 3-D dataset) runs in one process, not under mpirun",
                                 path.c_str()));
    if (dims[0] == 0) throw InputError(strprintf("'%s': the batch holds no problems (shape[0] = 0)", path.c_str()));
    if (dims[1] != 0 && dims[0] > static_cast<hsize_t>(INT64_MAX) / dims[1])
      throw InputError(strprintf("'%s': a batch of %llu x %llu objects is too large", path.c_str(),
                                 static_cast<unsigned long long>(dims[0]), static_cast<unsigned long long>(dims[1])));
  }
  const hsize_t problems = dims[0], rows = dims[1], d = dims[2];
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  const Element element = float_element(type.get(), path, name);
  const std::size_t type_size = H5Tget_size(type.get());
  check_shape(static_cast<std::int64_t>(problems * rows), static_cast<std::int64_t>(d), sizeof(T),
              "'" + path + "' dataset '" + name + "'");
  const hsize_t chunk_rows = check_storage(ds.get(), dims + 3 - dimensions, dimensions, type_size, path, name);

  memory_cap.release();  // the data's buffer and the read are bounded by the checks above
  if (dimensions == 3) {  // problem by problem, each as a 2-D dataset's rows
    if (split) *split = RowSplit{0, problems * rows, problems * rows};
    Dataset<T> data(problems * rows, d, path + ":" + name);
    data.element = element_name(element);
    for (hsize_t b = 0; b < problems; ++b) {
      T* to = data.values.data() + b * rows * d;
      const auto problem = static_cast<long long>(b);
      if (is_16bit(element))
        read_16bit_rows(ds.get(), space.get(), type.get(), element, d, chunk_rows, RowSplit{0, rows, rows}, to, path,
                        name, problem);
      else if (!read_rows(ds.get(), space.get(), 0, rows, d, chunk_rows, type_size, to, problem))
        throw InputError(strprintf("'%s': failed to read problem %llu of dataset '%s'", path.c_str(),
                                   static_cast<unsigned long long>(b), name.c_str()));
    }
    return data;
  }
  const RowSplit part = split_rows(rows, rank, ranks);
  if (split) *split = part;
  Dataset<T> data(part.count, d, path + ":" + name);
  data.element = element_name(element);
  if (is_16bit(element)) {
    read_16bit_rows(ds.get(), space.get(), type.get(), element, d, chunk_rows, part, data.values.data(), path, name);
    return data;
  }
  // HDF5 converts float<->double itself, in strips, straight into our buffer. An MPI rank reads
  // its rows only.
  if (!read_rows(ds.get(), space.get(), part.first, part.count, d, chunk_rows, type_size, data.values.data()))
    throw InputError(part.count == rows
                         ? strprintf("'%s': failed to read dataset '%s'", path.c_str(), name.c_str())
                         : strprintf("'%s': failed to read rows %zu..%zu of dataset '%s'", path.c_str(), part.first,
                                     part.first + part.count, name.c_str()));
  return data;
}

template <class T>
void write_hdf5_file(const std::string& path, const ResultView<T>& r, const std::string& shown_as) {
  silence_hdf5();
  const std::string& shown = shown_as.empty() ? path : shown_as;
  // (HDF5 leaves the system's reason in errno: a full disk, the file-size limit, permissions.)
  auto reason = [] {
    const int e = errno;
    return e ? strprintf(": %s%s", std::strerror(e), e == ENOSPC ? " (disk full?)" : "") : std::string();
  };
  errno = 0;
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) throw InputError(strprintf("cannot create '%s'%s", shown.c_str(), reason().c_str()));
  errno = 0;  // (a successful create leaves ENOENT from its probe: not a reason for what follows)
  auto fail = [&](const char* what) {
    throw InputError(strprintf("'%s': failed to write %s%s", shown.c_str(), what, reason().c_str()));
  };

  // No modification times in the object headers: the same result gives the same bytes.
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!dcpl.ok() || H5Pset_obj_track_times(dcpl.get(), 0) < 0) fail("the dataset properties");
  hsize_t cdims[2] = {r.k, r.d};
  Handle cspace(H5Screate_simple(2, cdims, nullptr), H5Sclose);
  Handle cds(H5Dcreate2(file.get(), "centroids", native_type<T>(), cspace.get(), H5P_DEFAULT, dcpl.get(),
                        H5P_DEFAULT),
             H5Dclose);
  if (!cds.ok() || H5Dwrite(cds.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, r.centroids) < 0)
    fail("/centroids");

  hsize_t ldims[1] = {r.n};
  Handle lspace(H5Screate_simple(1, ldims, nullptr), H5Sclose);
  Handle lds(H5Dcreate2(file.get(), "labels", H5T_STD_I32LE, lspace.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
             H5Dclose);
  if (!lds.ok() || H5Dwrite(lds.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.labels) < 0)
    fail("/labels");

  Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a1(H5Acreate2(file.get(), "inertia", H5T_IEEE_F64LE, scalar.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!a1.ok() || H5Awrite(a1.get(), H5T_NATIVE_DOUBLE, &r.inertia) < 0) fail("attribute inertia");
  const std::int32_t iterations = r.iterations;
  Handle a2(H5Acreate2(file.get(), "iterations", H5T_STD_I32LE, scalar.get(), H5P_DEFAULT, H5P_DEFAULT),
            H5Aclose);
  if (!a2.ok() || H5Awrite(a2.get(), H5T_NATIVE_INT32, &iterations) < 0) fail("attribute iterations");
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) fail("the file");
}

template Dataset<float> load_hdf5(const std::string&, const std::string&, int, int, RowSplit*, std::size_t*);
template Dataset<double> load_hdf5(const std::string&, const std::string&, int, int, RowSplit*, std::size_t*);
template void write_hdf5_file(const std::string&, const ResultView<float>&, const std::string&);
template void write_hdf5_file(const std::string&, const ResultView<double>&, const std::string&);

}  // namespace km
