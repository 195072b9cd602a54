// The one algorithm contract shared by every implementation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kmeans/tuning.hpp"
#include "timing/timer.hpp"

namespace km {

enum class Init { first, random, kmeanspp, kmeans_parallel, given };  // given: Params::given_centroids
const char* to_string(Init init);
Init init_from_string(const std::string& name);  // throws UsageError

// What "nearest" means (kernels/kmeans/unit_norm.hpp): euclidean, the squared distance;
// cosine, the largest cosine similarity (spherical k-means: the objects normalised, each
// centroid re-normalised after its update, the objective sum(1 - cos)); dot, the largest
// inner product with unit-length centroids (the objective -sum(x.c)).
enum class Metric { euclidean, cosine, dot };
const char* to_string(Metric metric);
Metric metric_from_string(const std::string& name);  // throws UsageError

// k-means||'s rounds: at most this many (the K candidates it needs may take more than init_rounds).
constexpr int kMaxInitRounds = 64;
// The most CPU threads any surface starts (libgomp fails or crashes far above this).
constexpr int kMaxThreads = 1024;

struct Params {
  int k = 16;                  // clusters
  int loops = 10;              // at most this many Lloyd iterations
  double threshold = 0.0;      // stop when changed/N <= threshold (the lab rule)
  std::optional<double> tol;   // stop when summed squared centroid shift <= tol (scikit-learn rule)
  Init init = Init::first;
  Metric metric = Metric::euclidean;
  std::uint64_t seed = 0;      // for random, k-means++ and k-means|| init
  // k-means|| (init.hpp): each round draws about oversampling * K objects; at least init_rounds
  // rounds, more while fewer than K candidates were drawn.
  double oversampling = 0.5;
  int init_rounds = 5;
  int block = 128;             // GPU threads per block
  bool block_given = false;    // --block was given: fused's one-pass kernels take it; else their measured best
  int threads = 0;             // CPU threads; 0 = all
  int n_init = 1;              // initialisations (random, kmeans++, kmeans||); the lowest final inertia is kept
  int gpus = 1;                // GPUs of this process that share the rows (--gpus; NCCL beyond one)
  std::size_t device_memory = 0;  // bytes of device memory a GPU engine may use (0: what is free);
                                  // data beyond it is streamed from host memory (out of core)
  // Init::given: K x given_d centroids, row-major (read from a file: --init=PATH, --predict).
  std::vector<double> given_centroids;
  std::size_t given_d = 0;
  // Tuning (kmeans/tuning.hpp): the measured defaults; tests and measurement tools set them.
  FusedConfig fused;                // fused's choices (--fused-config=name=value,...)
  GpuInitConfig gpu_init;           // k-means|| on the GPU
  std::size_t stream_rows = 0;      // GPU engines: stream the data in chunks of this many rows
                                    // whatever the memory (0: only when it does not fit)
};

// Seconds outside the loop. load is filled by the caller that loads the data.
struct RunSeconds {
  double load = 0;    // reading or generating the data
  double init = 0;    // choosing the initial centroids
  double setup = 0;   // one-time allocation, upload and layout change
  double loop = 0;    // the Lloyd iterations
  double finish = 0;  // final labels, inertia and copies back
  double write = 0;   // writing the output file (set by the caller that writes it)
  double total() const { return load + init + setup + loop + finish + write; }
};

template <class T>
struct Result {
  std::vector<T> centroids;           // k*d row-major
  std::vector<std::int32_t> labels;   // n: nearest final centroid
  double inertia = 0;                 // sum of squared distances to the nearest final centroid
  int iterations = 0;
  bool converged = false;             // a stop rule fired (not just the loop limit)
  std::vector<IterationStats> per_iteration;
  RunSeconds seconds;
  std::string device = "cpu";
  std::string path;                   // the implementation's path, if it has several (fused)
  std::vector<std::pair<std::string, std::string>> plan;  // ... and its plan's decisions (fused)
  int threads = 1;                    // CPU threads the implementation used
  int block = 0;                      // GPU threads per block its main kernel ran with (0: Params::block)
  int gpus = 0;                       // GPUs that ran it (over all ranks)
  int ranks = 1;                      // processes (MPI ranks)
  std::size_t objects = 0;            // objects of the whole problem (all ranks'); 0: the data's
  std::vector<double> n_init_inertia; // n_init > 1: each initialisation's final inertia, in order
};

// Checks Params on its own (independent of data); throws UsageError.
void validate(const Params& params);

// Throws UsageError unless 1 <= k <= n (objects).
void check_clusters(int k, std::size_t n);

}  // namespace km
