// kmeans_gpu: exact k-means on the CPU and the GPU, as a C++ library.
//
//   #include <kmeans_gpu/kmeans.hpp>
//   kmeans_gpu::Params p;
//   p.n_clusters = 16;
//   const auto r = kmeans_gpu::fit(x, n, d, p);   // x: n x d floats or doubles, row-major
//   // r.centroids (n_clusters x d), r.labels (n), r.inertia, r.n_iter
//
// The labels are those of the sequential reference (`seq`) whatever implementation runs, and a
// fit gives the same bits on every run. CMake: find_package(kmeans_gpu) and
// target_link_libraries(app PRIVATE kmeans_gpu::kmeans_gpu). No CUDA type appears here; a program
// using it needs no CUDA headers, and runs (on the CPU) on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#define KMEANS_GPU_API __attribute__((visibility("default")))

namespace kmeans_gpu {

// Bad data or parameters: one line naming the problem (the command line's words).
class KMEANS_GPU_API InvalidInput : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A failure of the device or the system (a CUDA error, memory that could not be had).
class KMEANS_GPU_API Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where x points. host: the process's memory. device: the current CUDA device's memory (cudaMalloc'd,
// a CuPy array's or a PyTorch CUDA tensor's data pointer), read there without a copy to the host,
// by a GPU implementation (fused unless another is named); the results come back to the host as
// they do for host data, and are the same bits. Before reading it the fit waits for the whole
// device's pending work (whatever stream wrote x). x must stay unchanged until the call returns.
enum class Memory { host, device };

struct Params {
  int n_clusters = 8;
  int max_iter = 300;           // at most this many Lloyd iterations
  // Stop once the summed squared shift of the centroids in an iteration is at most tol (the
  // command line's --tol; scikit-learn multiplies its tol by the data's mean column variance
  // first). Negative: run max_iter iterations.
  double tol = 1e-4;
  std::string init = "kmeans++";       // first, random, kmeans++ or kmeans||
  std::vector<double> init_centroids;  // n_clusters x d, row-major: taken instead of `init` when given
  std::uint64_t seed = 0;              // for random, kmeans++ and kmeans||
  int n_init = 1;                      // initialisations; the lowest final inertia is kept
  std::string implementation;          // empty: fused with a GPU, omp without; or a name of implementations()
  int threads = 0;                     // CPU threads (0: all)
  // euclidean; cosine (spherical k-means: objects and centroids of length 1, inertia the sum of
  // 1 - cos); dot (the largest inner product with centroids of length 1, inertia -sum x.c).
  std::string metric = "euclidean";
  Memory memory = Memory::host;  // where fit's and batch_fit's x points (no sample_weight with device)
};

template <class T>
struct Result {
  std::vector<T> centroids;           // n_clusters x d, row-major
  std::vector<std::int32_t> labels;   // n: each object's nearest final centroid (lowest index on ties)
  double inertia = 0;                 // the sum of squared distances to those centroids (metric: its objective)
  int n_iter = 0;
  bool converged = false;             // tol stopped it (not max_iter)
  std::string implementation;         // the one that ran
};

// A fit of the n x d objects at x (row-major; T float or double, the precision of the arithmetic;
// in params.memory).
// sample_weight: n weights (finite, >= 0, not all 0), scikit-learn's: weighted means and inertia;
// nullptr: every object weighs 1.
template <class T>
KMEANS_GPU_API Result<T> fit(const T* x, std::size_t n, std::size_t d, const Params& params = {},
                             const T* sample_weight = nullptr);

// `batch` independent problems of n x d objects each, problem after problem at x (batch * n * d
// values), each fitted as fit() fits it: result b equals fit(x + b * n * d, n, d, p_b) bit for
// bit, where p_b is `params` with, when params.init_centroids is given, its b-th block of
// n_clusters * d values (it then holds batch * n_clusters * d). Each result has its own n_iter
// and converged. With implementation "fused" on one GPU the problems' iterations run together
// (one CUDA graph an iteration of the batch); otherwise one problem after another.
template <class T>
KMEANS_GPU_API std::vector<Result<T>> batch_fit(const T* x, std::size_t batch, std::size_t n, std::size_t d,
                                                const Params& params = {});

// Each object's nearest of the k centroids (k x d, row-major), as fit's labels are found, by
// `metric` (cosine and dot: the centroids taken at length 1, as fit's are).
// x in `memory` (centroids on the host).
template <class T>
KMEANS_GPU_API std::vector<std::int32_t> predict(const T* x, std::size_t n, std::size_t d, const T* centroids,
                                                 std::size_t k, const std::string& implementation = {},
                                                 const std::string& metric = "euclidean",
                                                 Memory memory = Memory::host);

// The implementations' names (seq, omp, naive, ..., fused), fastest last.
KMEANS_GPU_API std::vector<std::string> implementations();
// Whether a usable CUDA GPU is present (else fit runs omp unless told otherwise).
KMEANS_GPU_API bool gpu_available();
// "0.1".
KMEANS_GPU_API const char* version();

extern template KMEANS_GPU_API Result<float> fit<float>(const float*, std::size_t, std::size_t, const Params&,
                                                        const float*);
extern template KMEANS_GPU_API Result<double> fit<double>(const double*, std::size_t, std::size_t, const Params&,
                                                          const double*);
extern template KMEANS_GPU_API std::vector<Result<float>> batch_fit<float>(const float*, std::size_t, std::size_t,
                                                                           std::size_t, const Params&);
extern template KMEANS_GPU_API std::vector<Result<double>> batch_fit<double>(const double*, std::size_t, std::size_t,
                                                                             std::size_t, const Params&);
extern template KMEANS_GPU_API std::vector<std::int32_t> predict<float>(const float*, std::size_t, std::size_t,
                                                                        const float*, std::size_t, const std::string&,
                                                                        const std::string&, Memory);
extern template KMEANS_GPU_API std::vector<std::int32_t> predict<double>(const double*, std::size_t, std::size_t,
                                                                         const double*, std::size_t,
                                                                         const std::string&, const std::string&,
                                                                         Memory);

}  // namespace kmeans_gpu
