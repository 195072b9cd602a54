// Initial centroids, shared by every implementation.
//   first     the first K objects (the lab's rule)
//   random    K distinct objects drawn with the seed
//   kmeans++  greedy k-means++ (as scikit-learn: 2 + ln K candidates per step, the one that
//             lowers the potential most wins), seeded; on the CPU, or on the GPU for the GPU
//             implementations, with the same result
//   kmeans||  k-means|| (scalable k-means++, Bahmani et al. 2012): a few rounds each draw every
//             object independently with probability oversampling * K * closest / potential;
//             each candidate is weighed by the objects nearest it; greedy k-means++ on the
//             weighted candidates picks the K centres. A few passes over the data instead of
//             K - 1 dependent ones; on the CPU or the GPU, with the same result.
// All are reproducible for a seed, whatever the thread count: sums are taken over fixed
// chunks and combined in chunk order.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "dist/team.hpp"
#include "io/dataset.hpp"
#include "kmeans/centred_rows.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/params.hpp"
#include "kmeans/parallel_draw.hpp"

namespace km {

// on_gpu: k-means++ and k-means|| evaluate their distances on the GPU (the same centres, bit for
// bit), reading `device_rows` (the data, row-major, already on the device: Engine::stage) when
// given, else uploading their own copy; k-means||'s tensor-core rounds read `centred` (the
// engine's centred copy of those rows: Engine::centred_rows) when given, else make their own.
template <class T>
std::vector<T> initial_centroids(const Dataset<T>& data, const Params& params, bool on_gpu = false,
                                 const T* device_rows = nullptr, const CentredRows* centred = nullptr);
// The same centres when the rows are spread over a team (this rank holds `split`'s rows in
// `local`): called by every rank, each gets the single process's result.
template <class T>
std::vector<T> initial_centroids(const Dataset<T>& local, const RowSplit& split, Team& team, const Params& params,
                                 bool on_gpu = false, const T* device_rows = nullptr,
                                 const CentredRows* centred = nullptr);

// The data-sized steps of greedy k-means++, on the CPU or the GPU; the driver (sampling,
// choice) is shared, so both give the same centres. All sums are over fixed chunks of
// kSumChunk objects, each chunk in object order (cpu_steps.hpp: chunked_sum), and distances
// are summed over the coordinates in order in double, without fused multiply-adds.
class PlusPlusSteps {
 public:
  virtual ~PlusPlusSteps() = default;
  // With sample weights (scikit-learn's weighted k-means++): every "distance" below is the
  // object's weight times its squared distance, and the first centre is drawn with probability
  // proportional to the weight: weights() sets closest[i] = w_i and gives the chunks' sums, and
  // that draw walks them as any other. Only the CPU's steps take weights.
  virtual bool weighted() const { return false; }
  virtual void weights(std::vector<double>& /*chunk_sums*/) {}
  // closest[i] = the distance from object i to object `first`; the chunks' sums of closest.
  virtual void start(std::size_t first, std::vector<double>& chunk_sums) = 0;
  // One candidate's draw: the object of chunk `chunk` where the running remainder r, less
  // each object's closest in order, first falls below that object's closest (else the chunk's
  // last), then moved on (cyclically) past objects already at a centre.
  struct Draw {
    std::size_t chunk = 0;
    double r = 0;
    std::size_t cand = 0;  // out
  };
  virtual void walk(std::vector<Draw>& draws) = 0;
  // out[ch * trials + t] = the sum over chunk ch of min(closest[i], distance to object cands[t]).
  virtual void candidate_sums(const std::vector<std::size_t>& cands, std::vector<double>& out) = 0;
  // closest[i] = min(closest[i], distance to object `centre`); the chunks' sums of closest.
  virtual void choose(std::size_t centre, std::vector<double>& chunk_sums) = 0;
};

// One draw's walk on the host (the CPU's steps; the GPU's kernel does the same in the same order).
std::size_t walk_chunk(const double* closest, std::size_t n, std::size_t chunk, double r,
                       std::size_t chunk_size = kSumChunk);

// The GPU's steps (src/kmeans/gpu/kmeanspp.cu): the data on the device for the duration
// (device_rows, when given, else their own upload). skip_zero: rows of length 0 get no share of
// the potential (cosine and dot: init_detail.hpp, skips_zero_rows).
template <class T>
std::unique_ptr<PlusPlusSteps> gpu_plusplus_steps(const Dataset<T>& data, std::size_t max_trials,
                                                  const T* device_rows = nullptr, bool skip_zero = false);

// The data-sized steps of k-means||, on the CPU or the GPU; the driver (init_parallel.cpp) is shared.
// closest[i] is object i's distance (in double, as PlusPlusSteps) to its nearest candidate so
// far, and nearest[i] that candidate's position in the list (the first one on ties: a later
// candidate takes over only when strictly nearer). The GPU finds the nearest through a GEMM and
// re-checks every candidate within the GEMM's proven error of the best in this arithmetic, so
// both give the same closest and nearest, bit for bit.
class ParallelSteps {
 public:
  virtual ~ParallelSteps() = default;
  // closest[i] = the distance to object `first`, nearest[i] = 0; the chunks' sums of closest.
  // Where the steps skip rows of length 0 (cosine and dot), such a row has closest 0 and nearest
  // -1: never drawn, never nearer to a candidate (strictly less), weighing for none.
  virtual void start(std::size_t first, std::vector<double>& chunk_sums) = 0;
  // The objects that round `round` draws (parallel_drawn), in index order.
  virtual std::vector<std::size_t> draw(std::uint64_t seed, int round, double ell, double potential) = 0;
  // Candidates `cands` appended to the list at positions first, first + 1, ...: closest and
  // nearest take them in; the chunks' sums of closest.
  virtual void add(const std::vector<std::size_t>& cands, std::size_t first, std::vector<double>& chunk_sums) = 0;
  // counts[t] = the objects whose nearest is candidate t (of `candidates`).
  virtual std::vector<std::int64_t> weigh(std::size_t candidates) = 0;
  // The reduction, where these steps take it (the GPU's): the K picks of reduce_weighted's greedy
  // steps through the distance table (random stream `stream`), as positions in the candidate
  // list, bit for bit; `cands` are the candidates' objects (rows of the data these steps hold).
  // Empty: the host reduces.
  virtual std::vector<std::size_t> reduce(const std::vector<std::size_t>& /*cands*/,
                                          const std::vector<double>& /*weights*/, std::size_t /*k*/,
                                          std::uint64_t /*seed*/, std::uint64_t /*stream*/) {
    return {};
  }
};

// k-means||'s rounds sum closest over chunks of 1024 objects (each in object order, the chunks
// in order): on the GPU a chain of 1024 dependent adds a warp, where kSumChunk's 16,384 took
// 0.1 ms a round at 1M objects (the team's row split, in multiples of kSumChunk, keeps whole chunks).
constexpr std::size_t kParallelChunk = 1024;
static_assert(kSumChunk % kParallelChunk == 0, "a rank's rows are whole chunks");

// k-means||'s reduction: its sums' chunks of 64 candidates (the subtrees below).
constexpr std::size_t kReduceChunk = 64;

// k-means||'s reduction: greedy k-means++ (2 + ln K trials a step, the one that lowers the
// potential most, the first on ties; random stream kParallelReduce) over `pool`'s rows weighted
// by `weights`. Every sum over the m candidates is taken in one tree order: the pairwise sums of
// a perfect binary tree over them padded with zeros to max(4096, 2^ceil(log2 m)) leaves, and a
// draw descends that tree from its root (left while the remainder is below the left child's
// sum, else right less it; past the last candidate: the last; then on past candidates already
// at a centre). The GPU's kernel sums in log2 steps where a sequential order made chains of
// dependent adds. With `table`, every pairwise distance of the pool is computed once (pool.n^2
// doubles) and each step reads them; without, each step recomputes its candidates' distances.
// Both give the same centres and the same potentials, bit for bit (`potentials`, if given: after
// the first centre, then per step the best candidate's potential and the potential after the
// chosen centre, the same value: 2K - 1 values). k-means|| takes the table when it is at most 1 GiB.
template <class T>
std::vector<T> reduce_weighted(const Dataset<T>& pool, const std::vector<double>& weights, std::size_t k,
                               std::uint64_t seed, bool table, std::vector<double>* potentials = nullptr);

// k-means|| prints its phases' times and candidates on stderr (set_parallel_verbose).
bool parallel_verbose();
// k-means|| prints its phases' times on stderr (kmeans --init-timings; diagnostics only).
void set_parallel_verbose(bool on);

template <class T>
std::unique_ptr<ParallelSteps> gpu_parallel_steps(const Dataset<T>& data, const T* device_rows = nullptr,
                                                  const CentredRows* centred = nullptr,
                                                  const GpuInitConfig& config = {}, bool skip_zero = false);

// Loads the kernels of k-means|| on the GPU for d coordinates in T (kmeanspp.cu) on a thread of
// its own, on the calling thread's device: under CUDA's lazy loading each would otherwise load at
// its first launch, inside the init (H100, 1M x 128: 2-5 ms). The driver starts it before the
// data's upload, which it overlaps; wait() joins it and rethrows its error.
class KernelPreload {
 public:
  KernelPreload() = default;
  KernelPreload(const KernelPreload&) = delete;
  KernelPreload& operator=(const KernelPreload&) = delete;
  ~KernelPreload() {
    if (thread_.joinable()) thread_.join();
  }
  template <class T>
  void start_parallel(std::size_t d);
  void wait();

 private:
  std::thread thread_;
  std::exception_ptr error_;
};

}  // namespace km
