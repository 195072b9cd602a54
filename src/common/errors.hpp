// The one error path. Every failure the user can cause or meet becomes one of these
// typed exceptions; the CLI turns it into a single line on stderr and a non-zero exit.
#pragma once

#include <stdexcept>
#include <string>

namespace km {

// The input data is unusable: unreadable file, bad format, NaN, wrong shape...
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An InputError every rank of a team meets alike, from values the ranks share (a reduction's
// result): the ranks end together, without an abort, and rank 0 alone says it.
class SharedInputError : public InputError {
 public:
  using InputError::InputError;
};

// The options are inconsistent: --clusters larger than the data, --block out of range...
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A CUDA call failed, or the device cannot hold the problem.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Formats like printf into a std::string (GCC 12 has no <format>).
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// v as the shortest text that reads back as v ("1.0000001", not %g's "1"), for messages that
// quote a value the user gave.
std::string shortest(double v);

}  // namespace km
