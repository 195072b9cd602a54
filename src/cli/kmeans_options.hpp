// The kmeans command line: its options, and every check that needs no data (so a bad
// option fails before a large file is read). Apart from main, the option-parser fuzz target
// (tests/fuzz) drives these.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "kmeans/params.hpp"

namespace km::cli {

struct KmeansOptions {
  std::string impl;
  std::optional<double> size_mb;
  std::optional<long long> objects;
  std::string input, dataset, generator = "uniform";
  std::string weights;  // --weights=PATH: one sample weight per object
  long long coords = 16;
  bool coords_given = false;
  long long clusters = 16;
  unsigned long long seed = 0;
  long long loops = 10;
  double threshold = 0;
  std::optional<double> tol;
  std::string init = "first", metric = "euclidean", precision = "double", output, report = "table";
  std::string predict;  // --predict=PATH: label the data with these centroids, no iterations
  long long n_init = 1;
  double oversampling = 0.5;  // k-means||: about oversampling * K objects drawn a round
  long long init_rounds = 5;
  long long block = 128, threads = 0, gpus = 1;
  bool init_timings = false; // --init-timings: k-means|| prints its phases' times (diagnostics)
  std::string fused_config;   // --fused-config=name=value,... (measurement tools: kmeans/tuning.hpp)
  std::string device_memory;  // --device-memory: bytes, or with a K, M, G or T suffix (powers of 1024)
  bool quiet = false;
  bool on_device = false;  // --on-device: the data put on the GPU first, the fit reading it there
  bool list = false;
};

// Declares every option on app, bound to o, with the registry in the help's footer.
void add_kmeans_options(CLI::App& app, KmeansOptions& o);

// After app.parse: checks the options together and returns the algorithm's parameters.
// Throws UsageError (or InputError for an unusable output path) naming the option.
Params check_kmeans_options(const CLI::App& app, KmeansOptions& o);

}  // namespace km::cli
