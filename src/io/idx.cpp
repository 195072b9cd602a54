#include "io/idx.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "common/progress.hpp"

namespace km {

namespace {

constexpr double kMaxRatio = 1032;  // deflate: the most uncompressed bytes per compressed byte

// gzread reads compressed and plain files alike.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw InputError(strprintf("'%s': %s (an IDX file, plain or .gz, is needed)", path.c_str(),
                                 std::filesystem::is_directory(path, ec) ? "a folder, not a file" : "no such file"));
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) throw InputError(strprintf("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
  }
  ~GzFile() {
    if (f_) gzclose(f_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Exactly `bytes` bytes, or InputError saying what was being read. A gzip file's last 4 KB
  // of a read go in requests smaller than zlib's buffer: a request that reaches exactly the
  // end of the data straight into `out` stops short of the stream's trailer, and then a file
  // cut before its CRC and size (or inside them) reads as whole; through zlib's buffer it
  // inflates on into the trailer.
  void read(void* out, std::size_t bytes, const char* what) {
    auto* p = static_cast<unsigned char*>(out);
    const std::size_t tail = gzdirect(f_) ? 0 : 4096;
    while (bytes > 0) {
      const std::size_t want = bytes > tail ? bytes - tail : bytes;
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(want, 1u << 30));
      const int got = gzread(f_, p, chunk);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(f_, &code);
        throw InputError(strprintf("'%s': corrupt data while reading the %s (%s)", path_.c_str(), what, msg));
      }
      if (got == 0) throw InputError(strprintf("'%s': truncated: the file ends inside the %s", path_.c_str(), what));
      p += got;
      bytes -= static_cast<std::size_t>(got);
    }
  }
  std::uint32_t u32(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | b[3];
  }
  // Whether anything follows (trailing garbage makes the sizes suspect). At the end of a gzip
  // stream zlib checks its CRC: a damaged file fails here, where its data was already read.
  bool more() {
    unsigned char b;
    const int got = gzread(f_, &b, 1);
    int code = Z_OK;
    const char* msg = gzerror(f_, &code);
    if (got < 0) throw InputError(strprintf("'%s': corrupt data (%s)", path_.c_str(), msg));
    if (got == 0 && code == Z_BUF_ERROR)  // (a gzip stream cut short: its CRC and size never came)
      throw InputError(strprintf("'%s': truncated: %s", path_.c_str(), msg));
    return got == 1;
  }
  const std::string& path() const { return path_; }

  // Refuses a header declaring more content (`bytes`, "what": its words) than the file can
  // hold: a plain file's size less the `header` bytes; a gzip file, at most kMaxRatio bytes
  // for each compressed one (deflate's limit is 1032). Without it, a file that lies would be
  // zero-filled to the declared size before its end was found.
  void check_declared(double bytes, std::size_t header, const std::string& what) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path_, ec);
    if (ec) return;  // read() still finds a short file
    if (gzdirect(f_)) {
      const double held = size > header ? static_cast<double>(size - header) : 0.0;
      if (bytes > held)
        throw InputError(strprintf("'%s': truncated: its header declares %s (%.0f bytes) but the file holds %.0f "
                                   "bytes after the header",
                                   path_.c_str(), what.c_str(), bytes, held));
    } else if (bytes > kMaxRatio * static_cast<double>(size) + 1e6) {
      throw InputError(strprintf("'%s': truncated: its header declares %s (%.0f bytes), more than its %llu "
                                 "compressed bytes can hold",
                                 path_.c_str(), what.c_str(), bytes, static_cast<unsigned long long>(size)));
    }
  }

  // `count` bytes into `out`, which grows as they arrive (its room reserved, not touched), so
  // a short gzip file costs what it holds, not what its header declares.
  void read_growing(std::vector<std::uint8_t>& out, std::size_t count, const char* what) {
    constexpr std::size_t kChunk = std::size_t(1) << 26;
    out.clear();
    out.reserve(count);
    for (std::size_t done = 0; done < count;) {
      const std::size_t step = std::min(kChunk, count - done);
      out.resize(done + step);
      read(out.data() + done, step, what);
      done += step;
      progress::update("reading", static_cast<double>(done) / 1e6, static_cast<double>(count) / 1e6, "MB");
    }
    progress::end_stage();
  }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

void check_magic(GzFile& f, std::uint32_t want, const char* kind) {
  const std::uint32_t magic = f.u32("header");
  if (magic != want)
    throw InputError(strprintf("'%s': magic number 0x%08x, not 0x%08x: not an IDX %s file", f.path().c_str(), magic,
                               want, kind));
}

void check_end(GzFile& f) {
  if (f.more()) throw InputError(strprintf("'%s': data past the sizes its header gives", f.path().c_str()));
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  GzFile f(path);
  check_magic(f, 0x00000803u, "images (ubyte, 3 dimensions)");
  IdxImages im;
  im.count = f.u32("header");
  im.rows = f.u32("header");
  im.cols = f.u32("header");
  if (im.count == 0 || im.rows == 0 || im.cols == 0)
    throw InputError(strprintf("'%s': empty images (%zu of %zu x %zu)", path.c_str(), im.count, im.rows, im.cols));
  if (im.rows * im.cols > (1u << 24))
    throw InputError(strprintf("'%s': images of %zu x %zu pixels are beyond this program's 2^24", path.c_str(),
                               im.rows, im.cols));
  const double bytes = double(im.count) * double(im.rows) * double(im.cols);
  f.check_declared(bytes, 16, strprintf("%zu images of %zu x %zu pixels", im.count, im.rows, im.cols));
  check_host_memory(bytes, strprintf("the images of '%s'", path.c_str()));
  f.read_growing(im.pixels, im.count * im.rows * im.cols, "pixels");
  check_end(f);
  return im;
}

std::vector<std::uint8_t> read_idx_labels(const std::string& path, int classes) {
  GzFile f(path);
  check_magic(f, 0x00000801u, "labels (ubyte, 1 dimension)");
  const std::size_t count = f.u32("header");
  if (count == 0) throw InputError(strprintf("'%s': no labels", path.c_str()));
  f.check_declared(double(count), 8, strprintf("%zu labels", count));
  check_host_memory(double(count), strprintf("the labels of '%s'", path.c_str()));
  std::vector<std::uint8_t> labels;
  f.read_growing(labels, count, "labels");
  check_end(f);
  for (std::size_t i = 0; i < count; ++i)
    if (labels[i] >= classes)
      throw InputError(strprintf("'%s': label %d of item %zu is out of range (0..%d)", path.c_str(), labels[i], i,
                                 classes - 1));
  return labels;
}

IdxSet read_idx_set(const std::string& dir, const std::string& prefix, int classes) {
  const auto pick = [&](const std::string& stem) {
    const std::string plain = dir + "/" + stem;
    std::error_code ec;
    if (std::filesystem::exists(plain, ec)) return plain;
    if (std::filesystem::exists(plain + ".gz", ec)) return plain + ".gz";
    throw InputError(strprintf("'%s': neither it nor '%s.gz' exists (--data names the folder of the IDX files)",
                               plain.c_str(), plain.c_str()));
  };
  IdxSet set;
  const std::string images = pick(prefix + "-images-idx3-ubyte"), labels = pick(prefix + "-labels-idx1-ubyte");
  set.images = read_idx_images(images);
  set.labels = read_idx_labels(labels, classes);
  if (set.labels.size() != set.images.count)
    throw InputError(strprintf("'%s' holds %zu images but '%s' %zu labels", images.c_str(), set.images.count,
                               labels.c_str(), set.labels.size()));
  return set;
}

}  // namespace km
