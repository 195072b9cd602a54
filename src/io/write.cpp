#include "io/write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <thread>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <type_traits>
#include <vector>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "io/load.hpp"

namespace km {

namespace fs = std::filesystem;

namespace {

// The same file (device and inode), when both exist.
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

void check_output_path(const std::string& path, const std::vector<ReadFile>& reads) {
  if (path.empty()) throw UsageError("--output: the path is empty");
  Format format;
  try {
    format = format_from_path(path);
  } catch (const InputError&) {
    throw UsageError(strprintf("--output '%s': unknown extension (expected .h5, .hdf5, .csv or .npy)", path.c_str()));
  }
  if (format != Format::hdf5 && format != Format::csv && format != Format::npy)
    throw UsageError(strprintf("--output '%s': results are written as .h5, .hdf5, .csv or .npy", path.c_str()));
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError(strprintf("--output '%s': directory '%s' does not exist", path.c_str(), dir.c_str()));
  if (::access(dir.c_str(), W_OK) != 0)
    throw UsageError(strprintf("--output '%s': directory '%s' is not writable", path.c_str(), dir.c_str()));
  std::vector<std::string> written = {path};
  if (format != Format::hdf5) written.push_back(labels_path_for(path));
  for (const std::string& w : written) {
    // The rename would replace a directory's name (and the old one be deleted when empty).
    struct stat st {};
    if (::stat(w.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw UsageError(strprintf("--output '%s': '%s' exists and is not a regular file (%s)", path.c_str(), w.c_str(),
                                 S_ISDIR(st.st_mode)                           ? "a directory"
                                 : S_ISFIFO(st.st_mode)                        ? "a FIFO"
                                 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                               : "a socket"));
    for (const ReadFile& r : reads)
      if (!r.path.empty() && same_file(w, r.path))
        throw UsageError(strprintf("--output '%s' would overwrite %s '%s' (as '%s'); choose another name",
                                   path.c_str(), r.role.c_str(), r.path.c_str(), w.c_str()));
  }
}

std::string labels_path_for(const std::string& path) {
  fs::path p(path);
  return (p.parent_path() / (p.stem().string() + ".labels" + p.extension().string())).string();
}

std::string temporary_path_for(const std::string& path) {
  fs::path p(path);
  std::string name(".");  // built by append: GCC 12 warns falsely on "." + std::string
  name.append(p.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  return (p.parent_path() / name).string();
}

void (*g_between_pair_renames_for_tests)() = nullptr;

// Temporary files alive now, for the signal handler: fixed storage, async-signal-safe.
namespace {

constexpr int kMaxTemporaries = 8;
constexpr std::size_t kMaxPath = 4096;
char g_temporary[kMaxTemporaries][kMaxPath];
volatile std::sig_atomic_t g_temporary_used[kMaxTemporaries];

// While a .csv/.npy pair is being committed (CommitWindow), a signal waits: the handler, on
// whichever thread it runs, only records it, and the committing thread acts on it once both
// files are in place. Acting at once would leave the new labels beside the old centroids, or
// delete the old labels stepped aside. 0: idle, 1: committing, 2: a handler is ending the run.
std::atomic<int> g_commit_state{0};
static_assert(std::atomic<int>::is_always_lock_free, "used in a signal handler");
volatile std::sig_atomic_t g_deferred_signal = 0;

extern "C" void remove_temporaries_and_reraise(int sig) {
  int idle = 0;
  if (!g_commit_state.compare_exchange_strong(idle, 2)) {
    if (idle == 1) g_deferred_signal = sig;  // the committing thread delivers it
    return;                                  // (2: another thread's handler is ending the run)
  }
  for (int i = 0; i < kMaxTemporaries; ++i)
    if (g_temporary_used[i]) ::unlink(g_temporary[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// The renames that commit a pair, as one step for the signals of install_signal_handlers: one
// that comes meanwhile takes effect (temporaries removed, the program ended) when the window
// closes.
class CommitWindow {
 public:
  CommitWindow() {
    for (int idle = 0; !g_commit_state.compare_exchange_weak(idle, 1); idle = 0) {
      if (idle == 2)
        for (;;) ::pause();  // a handler is ending the program
      std::this_thread::yield();  // another thread commits its pair
    }
  }
  ~CommitWindow() {
    g_commit_state.store(0);
    if (const int sig = g_deferred_signal) {
      g_deferred_signal = 0;
      remove_temporaries_and_reraise(sig);
    }
  }
  CommitWindow(const CommitWindow&) = delete;
  CommitWindow& operator=(const CommitWindow&) = delete;
};

// Makes a rename durable: the directory's entry is synced after it (as databases do).
// Filesystems that cannot sync a directory (EINVAL) are left as they are.
void sync_directory_of(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw InputError(strprintf("cannot open directory '%s': %s", dir.c_str(), std::strerror(errno)));
  const int rc = ::fsync(fd), err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL)
    throw InputError(strprintf("cannot sync directory '%s': %s", dir.c_str(), std::strerror(err)));
}

// The handler for every signal whose default ends the program, where that default is in force:
// a signal the caller ignores stays ignored (nohup's SIGHUP, a shell's SIGPIPE), one it handles
// stays handled. Checked again for each temporary, so that a disposition set meanwhile counts.
void install_signal_handlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGVTALRM, SIGPROF}) {
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) != 0 || (now.sa_flags & SA_SIGINFO) || now.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temporaries_and_reraise;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

// Writes `path` (a temporary) through body; errors name `shown`, the file the user asked for.
// A full disk (ENOSPC) and the file-size limit (EFBIG, SIGXFSZ being ignored) end the same way.
template <class Fn>
void write_text_file(const std::string& path, const std::string& shown, Fn&& body) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw InputError(strprintf("cannot create '%s': %s", path.c_str(), std::strerror(errno)));
  errno = 0;
  body(f);
  int err = std::ferror(f) ? (errno ? errno : EIO) : 0;
  if (std::fflush(f) != 0 && !err) err = errno;
  if (std::fclose(f) != 0 && !err) err = errno;
  if (err) throw InputError(strprintf("failed writing '%s': %s (disk full?)", shown.c_str(), std::strerror(err)));
}

// A NumPy .npy (version 1.0): the header dict padded to a multiple of 64 bytes, then the
// little-endian values in C order.
void write_npy(std::FILE* f, const char* descr, const std::vector<std::size_t>& shape, const void* data,
               std::size_t bytes) {
  std::string dims;
  for (std::size_t s : shape) dims += std::to_string(s) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // "(3, 2)" but "(5,)"
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xff),
                                    static_cast<unsigned char>(header.size() >> 8)};
  std::fwrite(prefix, 1, sizeof prefix, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::fwrite(data, 1, bytes, f);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw InputError(strprintf("cannot rename into '%s': %s", to.c_str(), std::strerror(errno)));
}

}  // namespace

void write_npy_file(const std::string& path, const char* descr, const std::vector<std::size_t>& shape,
                    const void* data, std::size_t bytes) {
  TemporaryFile tmp(temporary_path_for(path));
  write_text_file(tmp.path(), path, [&](std::FILE* f) { write_npy(f, descr, shape, data, bytes); });
  tmp.commit_to(path);
  sync_directory_of(path);
}

template <class T>
void write_result(const std::string& path, const ResultView<T>& r) {
  const Format format = format_from_path(path);
  TemporaryFile tmp(temporary_path_for(path));
  if (format == Format::hdf5) {
    write_hdf5_file(tmp.path(), r, path);
    tmp.commit_to(path);
    sync_directory_of(path);
    return;
  }
  const std::string labels_path = labels_path_for(path);
  TemporaryFile tmp_labels(temporary_path_for(labels_path));
  if (format == Format::npy) {
    const std::size_t b = std::max<std::size_t>(r.batch, 1);
    const std::vector<std::size_t> centroid_shape =
        r.batch ? std::vector<std::size_t>{r.batch, r.k, r.d} : std::vector<std::size_t>{r.k, r.d};
    const std::vector<std::size_t> label_shape = r.batch ? std::vector<std::size_t>{r.batch, r.n} : std::vector<std::size_t>{r.n};
    write_text_file(tmp.path(), path, [&](std::FILE* f) {
      write_npy(f, std::is_same_v<T, float> ? "<f4" : "<f8", centroid_shape, r.centroids, b * r.k * r.d * sizeof(T));
    });
    write_text_file(tmp_labels.path(), labels_path, [&](std::FILE* f) {
      write_npy(f, "<i4", label_shape, r.labels, b * r.n * sizeof(std::int32_t));
    });
  } else {
    // Enough digits that the text reads back to the same binary value.
    const int digits = std::is_same_v<T, float> ? 9 : 17;
    write_text_file(tmp.path(), path, [&](std::FILE* f) {
      for (std::size_t c = 0; c < r.k; ++c) {
        for (std::size_t j = 0; j < r.d; ++j)
          std::fprintf(f, j ? ",%.*g" : "%.*g", digits, static_cast<double>(r.centroids[c * r.d + j]));
        std::fputc('\n', f);
      }
    });
    write_text_file(tmp_labels.path(), labels_path, [&](std::FILE* f) {
      for (std::size_t i = 0; i < r.n; ++i) {
        std::fprintf(f, "%d\n", r.labels[i]);
        if ((i & 0xfffff) == 0xfffff) progress::update("writing", static_cast<double>(i), static_cast<double>(r.n), "labels");
      }
    });
    progress::end_stage();
  }
  // Both files or neither: an existing labels file steps aside first and comes back if the
  // centroids cannot be committed; a signal meanwhile waits until the pair is whole.
  tmp.sync();
  tmp_labels.sync();
  TemporaryFile old_labels(temporary_path_for(labels_path + ".old"));
  {
    CommitWindow window;
    const bool had_labels = ::access(labels_path.c_str(), F_OK) == 0;
    if (had_labels) rename_or_throw(labels_path, old_labels.path());
    try {
      tmp_labels.commit_to(labels_path);
      if (g_between_pair_renames_for_tests) g_between_pair_renames_for_tests();
      try {
        tmp.commit_to(path);
      } catch (...) {
        std::remove(labels_path.c_str());
        throw;
      }
    } catch (...) {
      if (had_labels) std::rename(old_labels.path().c_str(), labels_path.c_str());
      throw;
    }
  }
  sync_directory_of(path);
}

TemporaryFile::TemporaryFile(std::string path) : path_(std::move(path)) {
  install_signal_handlers();
  if (path_.size() >= kMaxPath) return;
  for (int i = 0; i < kMaxTemporaries; ++i)
    if (!g_temporary_used[i]) {
      std::memcpy(g_temporary[i], path_.c_str(), path_.size() + 1);
      g_temporary_used[i] = 1;
      slot_ = i;
      break;
    }
}

TemporaryFile::~TemporaryFile() {
  if (!committed_) std::remove(path_.c_str());
  if (slot_ >= 0) g_temporary_used[slot_] = 0;
}

void TemporaryFile::sync() {
  if (synced_) return;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  const int rc = fd < 0 ? -1 : ::fsync(fd), err = errno;
  if (fd >= 0) ::close(fd);
  if (rc != 0) throw InputError(strprintf("cannot sync '%s': %s (disk full?)", path_.c_str(), std::strerror(err)));
  synced_ = true;
}

void TemporaryFile::commit_to(const std::string& final_path) {
  sync();  // the contents reach the disk before the name does
  rename_or_throw(path_, final_path);
  committed_ = true;
  if (slot_ >= 0) g_temporary_used[slot_] = 0;
  slot_ = -1;
}

template void write_result(const std::string&, const ResultView<float>&);
template void write_result(const std::string&, const ResultView<double>&);

}  // namespace km
