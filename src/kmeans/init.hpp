// Initial centroids, shared by every implementation.
//   first     the first K objects (the lab's rule)
//   random    K distinct objects drawn with the seed
//   kmeans++  greedy k-means++ (as scikit-learn: 2 + ln K candidates per step, the one that
//             lowers the potential most wins), seeded; on the CPU, or on the GPU for the GPU
//             implementations, with the same result
// All three are reproducible for a seed, whatever the thread count: sums are taken over
// fixed chunks and combined in chunk order.
#pragma once

#include <memory>
#include <vector>

#include "dist/team.hpp"
#include "io/dataset.hpp"
#include "kmeans/params.hpp"

namespace km {

// on_gpu: k-means++ evaluates its distances on the GPU (the same centres, bit for bit).
template <class T>
std::vector<T> initial_centroids(const Dataset<T>& data, const Params& params, bool on_gpu = false);
// The same centres when the rows are spread over a team (this rank holds `split`'s rows in
// `local`): called by every rank, each gets the single process's result.
template <class T>
std::vector<T> initial_centroids(const Dataset<T>& local, const RowSplit& split, Team& team, const Params& params,
                                 bool on_gpu = false);

// The data-sized steps of greedy k-means++, on the CPU or the GPU; the driver (sampling,
// choice) is shared, so both give the same centres. All sums are over fixed chunks of
// kSumChunk objects, each chunk in object order (cpu_steps.hpp: chunked_sum), and distances
// are summed over the coordinates in order in double, without fused multiply-adds.
class PlusPlusSteps {
 public:
  virtual ~PlusPlusSteps() = default;
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
std::size_t walk_chunk(const double* closest, std::size_t n, std::size_t chunk, double r);

// The GPU's steps (src/kmeans/gpu/kmeanspp.cu): the data on the device for the duration.
template <class T>
std::unique_ptr<PlusPlusSteps> gpu_plusplus_steps(const Dataset<T>& data, std::size_t max_trials);

}  // namespace km
