#include "io/text_reader.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <sys/stat.h>

#include "common/errors.hpp"
#include "common/progress.hpp"

namespace km {

namespace {
constexpr std::size_t kChunk = 1 << 16;  // the first read; the buffer doubles only for a longer line
}

LineReader::LineReader(const std::string& path, const char* stage) : path_(path), buf_(kChunk), stage_(stage) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw InputError(strprintf("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(::fileno(file_), &st) == 0) size_mb_ = static_cast<double>(st.st_size) / 1e6;
}

LineReader::LineReader(const std::string& path, std::uint64_t offset, std::size_t first_line)
    : path_(path), buf_(kChunk), line_no_(first_line), stage_(nullptr), buffer_offset_(offset) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw InputError(strprintf("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
  if (offset && ::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0)
    throw InputError(strprintf("cannot seek in '%s': %s", path.c_str(), std::strerror(errno)));
}

LineReader::~LineReader() {
  if (file_) std::fclose(file_);
}

bool LineReader::refill() {
  if (eof_) return false;
  // Keep the unfinished line at the front, grow only if one line exceeds the buffer.
  std::size_t keep = end_ - begin_;
  if (begin_ > 0 && keep > 0) std::memmove(buf_.data(), buf_.data() + begin_, keep);
  buffer_offset_ += begin_;
  begin_ = 0;
  end_ = keep;
  if (end_ == buf_.size()) {
    if (buf_.size() >= kMaxLine)
      throw InputError(strprintf("'%s' line %zu is longer than %zu MiB: not a text file?", path_.c_str(),
                                 line_no_ + 1, kMaxLine >> 20));
    buf_.resize(buf_.size() * 2);
  }
  std::size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, file_);
  if (got == 0) {
    if (std::ferror(file_)) throw InputError(strprintf("error reading '%s'", path_.c_str()));
    eof_ = true;
    return false;
  }
  end_ += got;
  read_mb_ += static_cast<double>(got) / 1e6;
  if (stage_) progress::update(stage_, read_mb_, size_mb_, "MB");
  return true;
}

bool LineReader::next(std::string_view& line) {
  for (;;) {
    line_offset_ = buffer_offset_ + begin_;
    const char* start = buf_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    if (nl) {
      std::size_t len = static_cast<const char*>(nl) - start;
      line = std::string_view(start, len);
      begin_ += len + 1;
      break;
    }
    if (!refill()) {
      if (begin_ == end_) return false;
      line = std::string_view(buf_.data() + begin_, end_ - begin_);  // last line, no newline
      begin_ = end_;
      break;
    }
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line_no_ == 0 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // UTF-8 BOM
  ++line_no_;
  return true;
}

template <class T>
bool parse_number(std::string_view token, T& out) {
  const bool plus = !token.empty() && token.front() == '+';
  if (plus) token.remove_prefix(1);
  if (token.empty() || token.front() == '+' || (plus && token.front() == '-')) return false;  // one sign at most
  const char* first = token.data();
  const char* last = first + token.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec == std::errc::result_out_of_range) {
    if (ptr != last) return false;  // "1e-400xyz": out of range and not a number
    // from_chars leaves out unchanged on overflow/underflow: decide which.
    double probe = std::strtod(std::string(token).c_str(), nullptr);
    out = std::abs(probe) >= 1 ? (probe > 0 ? std::numeric_limits<T>::infinity()
                                            : -std::numeric_limits<T>::infinity())
                               : T(0);
    return true;
  }
  return ec == std::errc() && ptr == last;
}

bool is_integer_token(std::string_view token) {
  if (!token.empty() && (token.front() == '+' || token.front() == '-')) token.remove_prefix(1);
  if (token.empty()) return false;
  for (char c : token)
    if (c < '0' || c > '9') return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c >= 0x7f) out += strprintf("\\x%02x", c);
    else out += static_cast<char>(c);
  }
  if (s.size() > max) out += "...";
  return out;
}

void split(std::string_view line, char sep, std::vector<std::string_view>& cells) {
  cells.clear();
  if (sep != 0) {
    std::size_t pos = 0;
    for (;;) {
      std::size_t at = line.find(sep, pos);
      cells.push_back(trim(line.substr(pos, at == std::string_view::npos ? at : at - pos)));
      if (at == std::string_view::npos) break;
      pos = at + 1;
    }
    return;
  }
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) cells.push_back(line.substr(i, j - i));
    i = j;
  }
}

template bool parse_number(std::string_view, float&);
template bool parse_number(std::string_view, double&);

}  // namespace km
