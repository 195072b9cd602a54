#include "common/errors.hpp"

#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <vector>

namespace km {

std::string strprintf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int len = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out;
  if (len > 0) {
    out.resize(static_cast<std::size_t>(len) + 1);
    std::vsnprintf(out.data(), out.size(), fmt, args);
    out.resize(static_cast<std::size_t>(len));
  }
  va_end(args);
  return out;
}

std::string shortest(double v) {
  char text[64];
  const auto r = std::to_chars(text, text + sizeof text, v);
  return std::string(text, r.ptr);
}

}  // namespace km
