// The Python module's messages: the core's errors name the command line's options
// (`--clusters=8: ...`); the module shows them under the names its callers wrote
// (`n_clusters=8: ...`). Header-only, so that the CPU tests check it without Python.
#pragma once

#include <cctype>
#include <cstring>
#include <string>

namespace kmpy {

// Each `--option` token of message that is one of KMeans's parameters, renamed; other tokens
// (--input, --fused-config, --init-rounds, ...) and everything else as they were.
inline std::string python_names(const std::string& message) {
  static constexpr const char* kNames[][2] = {
      {"clusters", "n_clusters"},     {"loops", "max_iter"},   {"n-init", "n_init"},
      {"impl", "impl"},               {"init", "init"},        {"seed", "random_state"},
      {"threads", "n_threads"},       {"gpus", "n_gpus"},      {"device-memory", "device_memory"},
      {"block", "block"},             {"tol", "tol"},          {"threshold", "threshold"},
      {"metric", "metric"},           {"precision", "precision"}, {"weights", "sample_weight"},
      {"objects", "n_samples"},       {"coords", "n_features"}};
  const auto word = [](char c) { return std::islower(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  std::string out;
  out.reserve(message.size());
  for (std::size_t i = 0; i < message.size();) {
    const bool starts = message.compare(i, 2, "--") == 0 && (i == 0 || !(word(message[i - 1]) ||
                                                                        std::isdigit(static_cast<unsigned char>(message[i - 1]))));
    if (starts) {
      std::size_t end = i + 2;
      while (end < message.size() && (word(message[end]) || std::isdigit(static_cast<unsigned char>(message[end])))) ++end;
      const std::string token = message.substr(i + 2, end - i - 2);
      const char* renamed = nullptr;
      for (const auto& n : kNames)
        if (token == n[0]) renamed = n[1];
      if (renamed) {
        out += renamed;
        i = end;
        continue;
      }
    }
    out += message[i++];
  }
  return out;
}

}  // namespace kmpy
