// Streaming helpers for the text formats: a chunked line reader (the file is never held
// whole in memory) and strict number parsing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace km {

class LineReader {
 public:
  // `stage` names the pass in progress lines ("scanning", "reading"). Throws InputError
  // when it cannot open the file.
  explicit LineReader(const std::string& path, const char* stage = "reading");
  // Starts at byte `offset` (a line start), numbering lines from first_line; no progress lines.
  LineReader(const std::string& path, std::uint64_t offset, std::size_t first_line);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Next line without its "\n" or "\r\n" (and, on the first line, without a UTF-8 byte
  // order mark); false at end of file. The view lives until the next call. A line longer
  // than kMaxLine is an InputError (not a text file: /dev/zero, a binary behind a .csv name).
  static constexpr std::size_t kMaxLine = 64u << 20;
  bool next(std::string_view& line);
  std::size_t line_number() const { return line_no_; }
  // The byte offset in the file of the line next() returned last.
  std::uint64_t line_offset() const { return line_offset_; }

 private:
  bool refill();
  std::FILE* file_ = nullptr;
  std::string path_;
  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::size_t line_no_ = 0;
  const char* stage_;
  double size_mb_ = 0, read_mb_ = 0;
  std::uint64_t buffer_offset_ = 0;  // file offset of buf_[0]
  std::uint64_t line_offset_ = 0;
};

// Parses the whole token as a decimal number (one optional sign); false if anything is
// left over or it is not a number. Overflow parses as +-Inf so callers report it with the
// NaN/Inf rule; underflow parses as 0.
template <class T>
bool parse_number(std::string_view token, T& out);

// True when the token is an optionally signed decimal integer.
bool is_integer_token(std::string_view token);

std::string_view trim(std::string_view s);

// The text with control characters and non-ASCII bytes escaped (\r, \x00, ...) and cut
// to `max` characters, for error messages: a NUL or a CR in a cell stays visible.
std::string printable(std::string_view s, std::size_t max = 40);

// Splits on a single-character separator (CSV) or on runs of blanks (sep == 0).
void split(std::string_view line, char sep, std::vector<std::string_view>& cells);

}  // namespace km
