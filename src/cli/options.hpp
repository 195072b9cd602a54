// What the command lines (kmeans, gemm, mlp) share: strict number options, the thread cap and
// the check that the report reached standard output.
#pragma once

#include <omp.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "kmeans/params.hpp"

namespace km::cli {

// The most CPU threads either program starts (kmeans/params.hpp).
constexpr int kMaxThreads = km::kMaxThreads;

// A decimal integer, whole: an optional sign (a '-' only when `negative`), digits, nothing
// else. Leading zeros are decimal ("010" is ten, not octal eight, as CLI11 would read it).
inline CLI::Validator decimal_integer(bool negative = true) {
  return CLI::Validator(
      [negative](std::string& s) -> std::string {
        std::size_t i = (!s.empty() && (s[0] == '+' || (negative && s[0] == '-'))) ? 1 : 0;
        if (i == s.size()) return "'" + s + "' is not a whole decimal number";
        for (std::size_t j = i; j < s.size(); ++j)
          if (s[j] < '0' || s[j] > '9')
            return "'" + s + "' is not a whole decimal number" + (negative ? "" : " of zero or more");
        // The digits must fit an unsigned 64-bit value (CLI11 then checks the option's own range).
        unsigned long long value = 0;
        if (std::from_chars(s.data() + i, s.data() + s.size(), value).ec != std::errc())
          return "'" + s + "' is out of range";
        s = (s[0] == '-' ? "-" : "") + std::to_string(value);  // decimal, without leading zeros
        return {};
      },
      "INTEGER");
}

// --version: "PROGRAM (kmeans-gpu VERSION)" on stdout, exit 0.
inline void add_version_flag(CLI::App& app, const char* program) {
  app.set_version_flag("--version", std::string(program) + " (kmeans-gpu " KMEANS_GPU_VERSION ")",
                       "print the version and exit");
}

// A write past the file-size limit (ulimit -f) would kill the program by SIGXFSZ, leaving its
// temporary files; ignored, the write fails with EFBIG and ends as one error line that removes
// them, like a full disk. Called first in every main.
inline void ignore_file_size_signal() { std::signal(SIGXFSZ, SIG_IGN); }

// main's status, once standard output has taken everything written to it; else (a full disk,
// /dev/full, a closed descriptor) one line on stderr and 1: a report that was lost must not
// pass for one that was written. Every main returns through it.
inline int stdout_status(const char* program, int status) {
  errno = 0;
  std::cout.flush();
  const bool lost = std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.fail();
  if (!lost) return status;
  std::fprintf(stderr, "%s: error: the report could not be written to standard output%s%s%s\n", program,
               errno ? " (" : "", errno ? std::strerror(errno) : "", errno ? ")" : "");
  return status ? status : 1;
}

// OMP_NUM_THREADS above the cap would crash libgomp at the first parallel region: clamp it
// (and say so) before any parallel work.
inline void clamp_openmp_threads(const char* program) {
  if (omp_get_max_threads() > kMaxThreads) {
    std::fprintf(stderr, "%s: note: OMP_NUM_THREADS=%d is above the limit of %d threads; using %d\n", program,
                 omp_get_max_threads(), kMaxThreads, kMaxThreads);
    omp_set_num_threads(kMaxThreads);
  }
}

// "--name=" with nothing after '=' is an error naming the option; CLI11 would take the next
// argument as its value ("--input= --clusters=1" reading "--clusters=1" as the path). Call
// before app.parse; throws CLI::ValidationError ("--input: empty value").
inline void reject_empty_values(const CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 3 && arg.compare(0, 2, "--") == 0 && arg.find('=') == arg.size() - 1) {
      const std::string name = arg.substr(0, arg.size() - 1);
      if (app.get_option_no_throw(name)) throw CLI::ValidationError(name, "empty value");
    }
  }
}

// The text the user gave for a parsed option (its last occurrence), for messages that quote
// the value as given rather than as a double prints it ("1000001", not "1e+06").
inline std::string given_value(const CLI::App& app, const char* option) {
  const CLI::Option* opt = app.get_option_no_throw(option);
  if (!opt || opt->results().empty()) return "";
  return opt->results().back();
}

// A path option given as "" is an error, not "no option".
inline void require_nonempty(const CLI::App& app, const char* option, const std::string& value) {
  if (app.count(option) && value.empty()) throw CLI::ValidationError(option, "empty path");
}

}  // namespace km::cli
