#include "io/load.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>
#include <type_traits>
#include <vector>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "io/element.hpp"
#include "io/text_reader.hpp"

namespace km {

namespace fs = std::filesystem;

namespace {

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

// RAII FILE* for the binary readers.
struct File {
  std::FILE* f = nullptr;
  explicit File(const std::string& path) {
    f = std::fopen(path.c_str(), "rb");
    if (!f) throw InputError(strprintf("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
  }
  ~File() {
    if (f) std::fclose(f);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
};

std::uint64_t file_size(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) throw InputError(strprintf("cannot open '%s': %s", path.c_str(), ec.message().c_str()));
  return size;
}

void read_exact(std::FILE* f, void* dst, std::size_t bytes, const std::string& path) {
  if (std::fread(dst, 1, bytes, f) != bytes)
    throw InputError(strprintf("'%s': unexpected end of file", path.c_str()));
}

// Reads count little-endian values of type S from f into dst (type T), converting in
// chunks so the file is never held twice.
template <class S, class T>
void read_values(std::FILE* f, T* dst, std::size_t count, const std::string& path) {
  if constexpr (std::is_same_v<S, T>) {
    constexpr std::size_t kStrip = 1 << 24;  // values per read, so progress can show
    for (std::size_t done = 0; done < count; done += kStrip) {
      read_exact(f, dst + done, std::min(kStrip, count - done) * sizeof(T), path);
      progress::update("reading", (done + std::min(kStrip, count - done)) * sizeof(T) / 1e6, count * sizeof(T) / 1e6,
                       "MB");
    }
  } else {
    constexpr std::size_t kChunk = 1 << 16;
    std::vector<S> chunk(std::min(count, kChunk));
    for (std::size_t done = 0; done < count;) {
      std::size_t now = std::min(kChunk, count - done);
      read_exact(f, chunk.data(), now * sizeof(S), path);
      for (std::size_t i = 0; i < now; ++i) dst[done + i] = static_cast<T>(chunk[i]);
      done += now;
      progress::update("reading", done * sizeof(S) / 1e6, count * sizeof(S) / 1e6, "MB");
    }
  }
}

// Reads count 16-bit values (float16 or bfloat16, little-endian) from f into dst, converting
// each exactly (io/element.hpp) in chunks, so the 16-bit data is never held whole beside dst.
template <class T>
void read_16bit(std::FILE* f, T* dst, std::size_t count, Element element, const std::string& path) {
  constexpr std::size_t kChunk = 1 << 16;
  std::vector<std::uint16_t> chunk(std::min(count, kChunk));
  for (std::size_t done = 0; done < count;) {
    const std::size_t now = std::min(kChunk, count - done);
    read_exact(f, chunk.data(), now * sizeof(std::uint16_t), path);
    for (std::size_t i = 0; i < now; ++i) dst[done + i] = static_cast<T>(bits16_to_float(chunk[i], element));
    done += now;
    progress::update("reading", done * 2 / 1e6, count * 2 / 1e6, "MB");
  }
}

// ---------------------------------------------------------------- .bin
// Moves to byte `offset` (64-bit) of f.
void seek_to(std::FILE* f, std::uint64_t offset, const std::string& path) {
  if (fseeko(f, static_cast<off_t>(offset), SEEK_SET) != 0)
    throw InputError(strprintf("'%s': cannot seek to byte %llu: %s", path.c_str(),
                               static_cast<unsigned long long>(offset), std::strerror(errno)));
}

template <class T>
Dataset<T> load_bin(const std::string& path, const LoadOptions& options) {
  const std::uint64_t size = file_size(path);
  if (size == 0) throw InputError(strprintf("'%s': empty file", path.c_str()));
  if (size < 8)
    throw InputError(strprintf("'%s': %llu bytes is too short for the .bin header (int32 N, int32 d)",
                               path.c_str(), static_cast<unsigned long long>(size)));
  File file(path);
  std::int32_t header[2];
  read_exact(file.f, header, sizeof header, path);
  check_shape(header[0], header[1], sizeof(float), "'" + path + "' header");
  const std::uint64_t n = static_cast<std::uint64_t>(header[0]), d = static_cast<std::uint64_t>(header[1]);
  const std::uint64_t expect = 8 + n * d * sizeof(float);
  if (size < expect)
    throw InputError(strprintf("'%s': truncated: header says %llu x %llu float32 (%llu bytes) but the file has %llu",
                               path.c_str(), static_cast<unsigned long long>(n), static_cast<unsigned long long>(d),
                               static_cast<unsigned long long>(expect), static_cast<unsigned long long>(size)));
  if (size > expect)
    throw InputError(strprintf("'%s': %llu bytes after the %llu x %llu float32 its header declares (not a classic .bin?)",
                               path.c_str(), static_cast<unsigned long long>(size - expect),
                               static_cast<unsigned long long>(n), static_cast<unsigned long long>(d)));
  const RowSplit part = split_rows(n, options.rank, options.ranks);
  if (options.split) *options.split = part;
  Dataset<T> data(part.count, d, path);
  data.element = element_name(Element::float32);
  seek_to(file.f, 8 + part.first * d * sizeof(float), path);
  read_values<float>(file.f, data.values.data(), part.count * d, path);
  return data;
}

// ---------------------------------------------------------------- .npy
// The header is a Python dict literal of exactly three keys, e.g.
//   {'descr': '<f8', 'fortran_order': False, 'shape': (1000, 16), }
// parsed here as Python would (a repeated key: the last one wins, as numpy reads it).
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
};

class NpyHeaderParser {
 public:
  NpyHeaderParser(const std::string& text, const std::string& path) : t_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen[3] = {false, false, false};
    expect('{');
    while (skip(), peek() != '}') {
      const std::string key = string_literal();
      skip();
      expect(':');
      skip();
      if (key == "descr") {
        h.descr = string_literal();
        seen[0] = true;
      } else if (key == "fortran_order") {
        if (word("True")) h.fortran_order = true;
        else if (word("False")) h.fortran_order = false;
        else fail("'fortran_order' must be True or False");
        seen[1] = true;
      } else if (key == "shape") {
        h.shape = tuple();
        seen[2] = true;
      } else {
        fail("unexpected key '" + printable(key) + "' (an .npy header has descr, fortran_order and shape)");
      }
      skip();
      if (peek() == ',') ++i_;
      else if (peek() != '}') fail("expected ',' or '}'");
    }
    ++i_;
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\0')) ++i_;
    if (i_ != t_.size()) fail("text after the header dict");
    if (!seen[0] || !seen[1] || !seen[2])
      fail(std::string("no '") + (!seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape") + "'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(strprintf("'%s': malformed .npy header: %s", path_.c_str(), what.c_str()));
  }
  char peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  void skip() {
    while (peek() == ' ') ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool word(const char* w) {
    const std::size_t len = std::strlen(w);
    if (t_.compare(i_, len, w) != 0) return false;
    i_ += len;
    return true;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const std::size_t end = t_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string v = t_.substr(i_ + 1, end - i_ - 1);
    if (v.find('\\') != std::string::npos) fail("escapes in a string");
    i_ = end + 1;
    return v;
  }
  std::vector<std::uint64_t> tuple() {
    std::vector<std::uint64_t> dims;
    expect('(');
    while (skip(), peek() != ')') {
      const std::size_t start = i_;
      std::uint64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (UINT64_MAX - 9) / 10) fail("a dimension of 'shape' is too large");
        v = v * 10 + static_cast<std::uint64_t>(peek() - '0');
        ++i_;
      }
      if (i_ == start) fail("'shape' must be a tuple of non-negative integers");
      dims.push_back(v);
      skip();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in 'shape'");
    }
    ++i_;
    return dims;
  }

  const std::string& t_;
  const std::string& path_;
  std::size_t i_ = 0;
};

// An .npy file's header, read and parsed; `data_offset` is where the values start.
struct NpyFile {
  NpyHeader header;
  std::uint64_t data_offset = 0;
};

NpyFile read_npy_header(std::FILE* f, std::uint64_t size, const std::string& path) {
  if (size == 0) throw InputError(strprintf("'%s': empty file", path.c_str()));
  unsigned char pre[10];
  if (size < sizeof pre || std::fread(pre, 1, sizeof pre, f) != sizeof pre || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    throw InputError(strprintf("'%s': not a NumPy .npy file (bad magic)", path.c_str()));
  std::uint64_t header_len, prefix;
  if (pre[6] == 1) {
    header_len = pre[8] | (pre[9] << 8);
    prefix = 10;
  } else if (pre[6] == 2 || pre[6] == 3) {
    unsigned char more[2];
    read_exact(f, more, 2, path);
    header_len = pre[8] | (pre[9] << 8) | (std::uint64_t(more[0]) << 16) | (std::uint64_t(more[1]) << 24);
    prefix = 12;
  } else {
    throw InputError(strprintf("'%s': unsupported .npy version %d", path.c_str(), pre[6]));
  }
  if (prefix + header_len > size) throw InputError(strprintf("'%s': truncated .npy header", path.c_str()));
  std::string text(header_len, '\0');
  read_exact(f, text.data(), header_len, path);
  return {NpyHeaderParser(text, path).parse(), prefix + header_len};
}

// The element type an .npy descr names. NumPy writes '<f2' for float16. It has no bfloat16:
// ml_dtypes' bfloat16 is an extension type of kind 'V' (void), which np.save writes as '<V2',
// and an array np.load read back from such a file (a plain two-byte void) saves as '|V2'; both,
// and the name 'bfloat16' that hand-written headers use, are read as bfloat16.
Element npy_element(const std::string& descr, const std::string& path) {
  if (descr == "bfloat16") return Element::bfloat16;
  if (descr.size() >= 2 && (descr[1] == 'O' || descr[1] == 'U' || descr[1] == 'S'))
    throw InputError(strprintf("'%s': dtype '%s' holds Python objects or text, not numbers; save a float array "
                               "(x.astype('float32'))",
                               path.c_str(), printable(descr).c_str()));
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
    throw InputError(strprintf("'%s': dtype '%s' is not little-endian float16, bfloat16, float32 or float64 (save "
                               "it little-endian: x.astype(x.dtype.newbyteorder('<')))",
                               path.c_str(), printable(descr).c_str()));
  const char kind = descr[1];
  const std::string width = descr.substr(2);
  if (kind == 'i' || kind == 'u' || kind == 'b')
    throw InputError(strprintf("'%s': integer dtype '%s' is refused; convert it with .astype(np.float64) first",
                               path.c_str(), descr.c_str()));
  if (kind == 'f' && width == "2") return Element::float16;
  if (kind == 'f' && width == "4") return Element::float32;
  if (kind == 'f' && width == "8") return Element::float64;
  if (kind == 'V' && width == "2") return Element::bfloat16;
  throw InputError(strprintf("'%s': dtype '%s' is not float16, bfloat16, float32 or float64", path.c_str(),
                             printable(descr).c_str()));
}

// "3 x 50 x 4": an array's shape as its header declares it.
std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i)
    out += strprintf("%s%llu", i ? " x " : "", static_cast<unsigned long long>(shape[i]));
  return out;
}

template <class T>
Dataset<T> load_npy(const std::string& path, const LoadOptions& options) {
  const std::uint64_t size = file_size(path);
  File file(path);
  const NpyFile npy = read_npy_header(file.f, size, path);
  const NpyHeader& h = npy.header;
  if (h.fortran_order)
    throw InputError(strprintf("'%s': Fortran-order array; save it with np.ascontiguousarray first", path.c_str()));
  const Element element = npy_element(h.descr, path);
  std::vector<std::uint64_t> shape = h.shape;
  if (shape.size() == 1 && options.column) shape = {shape[0], 1};  // one value per object
  if (shape.size() == 3 && options.batch) {  // B problems of N objects: B * N rows
    if (options.ranks > 1)
      throw InputError(strprintf("'%s': a batch of problems (a 3-D array) runs in one process, not under mpirun",
                                 path.c_str()));
    if (shape[0] == 0) throw InputError(strprintf("'%s': the batch holds no problems (shape[0] = 0)", path.c_str()));
    if (shape[1] == 0 || shape[2] == 0)
      throw InputError(strprintf("'%s': a batch of shape %s: each problem needs objects and coordinates",
                                 path.c_str(), shape_text(h.shape).c_str()));
    if (shape[1] != 0 && shape[0] > static_cast<std::uint64_t>(INT64_MAX) / shape[1])
      throw InputError(strprintf("'%s': a batch of %llu x %llu objects is too large", path.c_str(),
                                 static_cast<unsigned long long>(shape[0]), static_cast<unsigned long long>(shape[1])));
    *options.batch = shape[0];
    shape = {shape[0] * shape[1], shape[2]};
  } else if (options.batch) {
    *options.batch = 0;
  }
  if (shape.size() != 2)
    throw InputError(strprintf("'%s': array has %zu dimensions; a 2-D (objects, coords) array is needed%s",
                               path.c_str(), shape.size(),
                               shape.size() == 3 ? " (a 3-D batch of problems is read as --input only)"
                               : options.batch   ? ", or a 3-D (problems, objects, coords) batch"
                                                 : ""));
  if (shape[0] > static_cast<std::uint64_t>(INT64_MAX) || shape[1] > static_cast<std::uint64_t>(INT64_MAX))
    throw InputError(strprintf("'%s': shape %llu x %llu is too large", path.c_str(),
                               static_cast<unsigned long long>(shape[0]), static_cast<unsigned long long>(shape[1])));
  const std::vector<long long> dims = {static_cast<long long>(shape[0]), static_cast<long long>(shape[1])};
  const std::size_t elem = element == Element::float64 ? 8 : element == Element::float32 ? 4 : 2;
  check_shape(dims[0], dims[1], std::max(elem, sizeof(T)), "'" + path + "'");
  const std::uint64_t n = dims[0], d = dims[1];
  const std::uint64_t expect = npy.data_offset + n * d * elem;
  if (size < expect)
    throw InputError(strprintf("'%s': truncated: shape %s of %s needs %llu bytes, the file has %llu", path.c_str(),
                               shape_text(h.shape).c_str(), element_name(element),
                               static_cast<unsigned long long>(expect), static_cast<unsigned long long>(size)));
  const RowSplit part = split_rows(n, options.rank, options.ranks);
  if (options.split) *options.split = part;
  Dataset<T> data(part.count, d, path);
  data.element = element_name(element);
  seek_to(file.f, npy.data_offset + part.first * d * elem, path);
  if (elem == 4)
    read_values<float>(file.f, data.values.data(), part.count * d, path);
  else if (elem == 8)
    read_values<double>(file.f, data.values.data(), part.count * d, path);
  else
    read_16bit(file.f, data.values.data(), part.count * d, element, path);
  return data;
}

// ---------------------------------------------------------------- .csv / .txt
// Two streaming passes: the first finds the shape (and the header / id column), the
// second parses straight into the exactly-sized buffer.
struct TextShape {
  std::size_t rows = 0, cols = 0;  // data rows, data columns
  bool header = false;             // csv: first non-empty line is a header
  bool id_column = false;          // txt: first token is an object id
  // Where every kRowsPerPart-th data row starts, so the parse pass can run in parallel.
  struct Part {
    std::uint64_t offset;  // byte offset of the row's line
    std::size_t line;      // lines before it (its line number - 1)
    std::size_t row;       // its data row
  };
  std::vector<Part> parts;
};
constexpr std::size_t kRowsPerPart = 1 << 15;

void mark_part(TextShape& s, const LineReader& reader) {
  if (s.rows % kRowsPerPart == 0) s.parts.push_back({reader.line_offset(), reader.line_number() - 1, s.rows});
}

TextShape scan_csv(const std::string& path) {
  LineReader reader(path, "scanning");
  TextShape s;
  std::string_view line;
  std::vector<std::string_view> cells;
  bool first = true;
  std::size_t first_line = 0;
  while (reader.next(line)) {
    if (trim(line).empty()) continue;
    if (first) {
      split(line, ',', cells);
      first = false;
      first_line = reader.line_number();
      s.cols = cells.size();
      std::size_t numeric = 0;
      for (auto c : cells) {
        double v;
        numeric += parse_number(c, v) ? 1 : 0;
      }
      if (numeric == 0) {
        s.header = true;
        continue;
      }
    } else if (const std::size_t count = static_cast<std::size_t>(std::count(line.begin(), line.end(), ',')) + 1;
               count != s.cols) {  // counting separators is enough here: the parse pass reads every cell
      throw InputError(strprintf("'%s' line %zu: ragged rows: %zu cells where line %zu has %zu", path.c_str(),
                                 reader.line_number(), count, first_line, s.cols));
    }
    mark_part(s, reader);
    ++s.rows;
  }
  if (s.rows == 0)
    throw InputError(strprintf("'%s': empty file: no data rows", path.c_str()));
  return s;
}

TextShape scan_txt(const std::string& path, std::optional<std::size_t> coords) {
  LineReader reader(path, "scanning");
  TextShape s;
  std::string_view line;
  std::vector<std::string_view> tokens;
  bool ids_sequential = true;
  long long expect_id = 0;
  std::size_t first_line = 0;
  while (reader.next(line)) {
    split(line, 0, tokens);
    if (tokens.empty()) continue;
    if (s.rows == 0) {
      s.cols = tokens.size();
      first_line = reader.line_number();
    } else if (tokens.size() != s.cols) {
      throw InputError(strprintf("'%s' line %zu: ragged rows: %zu values where line %zu has %zu", path.c_str(),
                                 reader.line_number(), tokens.size(), first_line, s.cols));
    }
    if (ids_sequential) {
      if (!is_integer_token(tokens[0])) {
        ids_sequential = false;
      } else {
        long long id = std::atoll(std::string(tokens[0]).c_str());
        if (s.rows == 0 && (id == 0 || id == 1))
          expect_id = id;
        if (id != expect_id) ids_sequential = false;
        ++expect_id;
      }
    }
    mark_part(s, reader);
    ++s.rows;
  }
  if (s.rows == 0) throw InputError(strprintf("'%s': empty file: no data rows", path.c_str()));
  // The leading id is recognised by --coords (d+1 tokens) or, without it, by a first
  // column of consecutive integers starting at 0 or 1 (the classic format's numbering).
  if (coords) {
    if (s.cols == *coords + 1) {
      s.id_column = true;
    } else if (s.cols != *coords) {
      throw InputError(strprintf("--coords=%zu but '%s' has %zu values per line", *coords, path.c_str(), s.cols));
    }
  } else {
    s.id_column = ids_sequential && s.cols >= 2;
  }
  if (s.id_column) --s.cols;
  return s;
}

// Parses data rows [part.row, row_end) into data, reading from the part's byte offset.
template <class T>
void parse_rows(const std::string& path, bool csv, const TextShape& s, const TextShape::Part& part,
                std::size_t row_end, Dataset<T>& data) {
  LineReader reader(path, part.offset, part.line);
  std::string_view line;
  std::vector<std::string_view> cells;
  const std::size_t skip = s.id_column ? 1 : 0;
  std::size_t row = part.row;
  while (row < row_end && reader.next(line)) {
    if (csv) {
      if (trim(line).empty()) continue;
      split(line, ',', cells);
    } else {
      split(line, 0, cells);
      if (cells.empty()) continue;
    }
    if (cells.size() != s.cols + skip)  // the file changed under us
      throw InputError(strprintf("'%s' line %zu: ragged rows", path.c_str(), reader.line_number()));
    if (skip && !is_integer_token(cells[0]))
      throw InputError(strprintf("'%s' line %zu: '%s' is not an integer object id", path.c_str(),
                                 reader.line_number(), printable(cells[0]).c_str()));
    T* out = data.row(row);
    for (std::size_t j = 0; j < s.cols; ++j) {
      std::string_view cell = cells[j + skip];
      if (!parse_number(cell, out[j]))
        throw InputError(strprintf("'%s' line %zu, column %zu: '%s' is not a number", path.c_str(),
                                   reader.line_number(), j + skip + 1, printable(cell).c_str()));
      if (!std::isfinite(out[j]))
        throw InputError(strprintf("'%s' line %zu, column %zu: value '%s' is NaN/Inf or out of range%s",
                                   path.c_str(), reader.line_number(), j + skip + 1, printable(cell).c_str(),
                                   sizeof(T) == 4 ? " for float (try --precision=double)" : ""));
    }
    ++row;
  }
  if (row != row_end) throw InputError(strprintf("'%s': file changed while reading", path.c_str()));
}

// Two streaming passes: the scan finds the shape and where each part of kRowsPerPart rows
// starts; the parse reads the parts in parallel (each thread its own file position) straight
// into the exactly-sized buffer. The first error by row order is the one reported.
template <class T>
Dataset<T> load_text(const std::string& path, bool csv, const std::optional<std::size_t>& coords) {
  TextShape s = csv ? scan_csv(path) : scan_txt(path, coords);
  check_shape(static_cast<std::int64_t>(s.rows), static_cast<std::int64_t>(s.cols), sizeof(T), "'" + path + "'");
  Dataset<T> data(s.rows, s.cols, path);
  data.element = element_name(Element::text);
  const std::size_t parts = s.parts.size();
  std::vector<std::exception_ptr> errors(parts);
  std::atomic<std::size_t> done{0};
#pragma omp parallel for schedule(dynamic, 1)
  for (std::size_t p = 0; p < parts; ++p) {
    try {
      parse_rows(path, csv, s, s.parts[p], p + 1 < parts ? s.parts[p + 1].row : s.rows, data);
    } catch (...) {
      errors[p] = std::current_exception();
    }
    const std::size_t finished = ++done;
    if (omp_get_thread_num() == 0)  // progress lines come from one thread
      progress::update("reading", static_cast<double>(finished), static_cast<double>(parts), "parts");
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  progress::update("reading", static_cast<double>(parts), static_cast<double>(parts), "parts");
  return data;
}

}  // namespace

void require_regular_readable(const std::string& path) {
  if (path.empty()) throw InputError("the input path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)  // ENOENT, ELOOP (a symbolic link loop), EACCES, ...
    throw InputError(strprintf("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw InputError(strprintf("cannot open '%s': it is a directory", path.c_str()));
  // A FIFO would block the two-pass readers forever, a device such as /dev/zero never ends.
  if (!S_ISREG(st.st_mode))
    throw InputError(strprintf("cannot read '%s': not a regular file (%s)", path.c_str(),
                               S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                                                          : "a socket"));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw InputError(strprintf("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
  std::fclose(f);
}

Format format_from_path(const std::string& path) {
  const std::string ext = lower_extension(path);
  if (ext == ".h5" || ext == ".hdf5") return Format::hdf5;
  if (ext == ".csv") return Format::csv;
  if (ext == ".npy") return Format::npy;
  if (ext == ".bin") return Format::bin;
  if (ext == ".txt") return Format::txt;
  throw InputError(strprintf("'%s': unknown extension '%s' (expected .h5, .hdf5, .csv, .npy, .bin or .txt)",
                             path.c_str(), ext.c_str()));
}

Element input_element(const std::string& path, const std::string& dataset) {
  const Format format = format_from_path(path);
  require_regular_readable(path);
  switch (format) {
    case Format::hdf5: return hdf5_element(path, dataset);
    case Format::csv:
    case Format::txt: return Element::text;
    case Format::bin: return Element::float32;
    case Format::npy: break;
  }
  File file(path);
  return npy_element(read_npy_header(file.f, file_size(path), path).header.descr, path);
}

template <class T>
Dataset<T> load(const std::string& path, const LoadOptions& given) {
  RowSplit split;
  LoadOptions options = given;
  if (!options.split) options.split = &split;
  const Format format = format_from_path(path);
  require_regular_readable(path);

  Dataset<T> data;
  struct EndStage {
    ~EndStage() { progress::end_stage(); }
  } end_stage;
  switch (format) {
    case Format::hdf5:
      data = load_hdf5<T>(path, options.dataset, options.rank, options.ranks, options.split, options.batch);
      break;
    case Format::csv: data = load_text<T>(path, true, options.coords); break;
    case Format::txt: data = load_text<T>(path, false, options.coords); break;
    case Format::npy: data = load_npy<T>(path, options); break;
    case Format::bin: data = load_bin<T>(path, options); break;
  }
  if (format == Format::csv || format == Format::txt) {  // parsed whole: keep this rank's rows
    const RowSplit part = split_rows(data.n, options.rank, options.ranks);
    if (options.split) *options.split = part;
    if (part.count != data.n) {
      Dataset<T> mine(part.count, data.d, data.source);
      mine.element = data.element;
      std::copy_n(data.row(part.first), part.count * data.d, mine.values.data());
      data = std::move(mine);
    }
  } else {
    const std::size_t problems = options.batch ? *options.batch : 0;  // (a batch: its problems named)
    check_finite(data, "'" + path + "'", options.split->first, problems > 1 ? data.n / problems : 0);
  }
  if (options.coords && *options.coords != data.d)
    throw InputError(strprintf("--coords=%zu but '%s' has %zu coordinates per object", *options.coords,
                               path.c_str(), data.d));
  return data;
}

template Dataset<float> load(const std::string&, const LoadOptions&);
template Dataset<double> load(const std::string&, const LoadOptions&);

}  // namespace km
