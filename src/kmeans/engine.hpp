// What an implementation provides: how it assigns and updates. Everything else (init,
// stop rules, final labels' inertia, timing of the loop) is the shared driver's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/dataset.hpp"
#include "kmeans/centred_rows.hpp"
#include "kmeans/params.hpp"
#include "timing/timer.hpp"

namespace km {

// The whole problem, when an engine holds one part of it (one GPU's or one process's rows):
// the fixed-point scales (fixed_point.hpp) must be the same in every part, so they come from
// the whole data, not the part.
struct Whole {
  std::size_t n = 0;    // objects in all parts together
  double max_abs = 0;   // the largest |x| over all parts
  // The sample weights over all parts (Dataset::weights): the largest (0: unweighted) and the
  // smallest positive one.
  double max_weight = 0, min_weight = 0;
};

// What one part contributes to an iteration: buffers of 64-bit integers (two's complement,
// summed element-wise, wrapping), in this order: the k*d fixed-point centroid sums, the k
// counts, the change count, the fixed-point inertia. On the device when `device` >= 0 (then
// `stream` is the engine's cudaStream_t, on which they are ready), else in host memory.
struct Partials {
  struct Buffer {
    void* data;
    std::size_t count;
  };
  std::vector<Buffer> buffers;
  int device = -1;
  void* stream = nullptr;
};

// Engine::requeue: `required`, the queued iteration no longer fits the engine's state (the
// batch's graph is captured again before the next iteration); `preferred`, another would be
// faster (fused's movers' scheme switched on or off), taken when the graph is captured again.
enum class Requeue { none, preferred, required };

template <class T>
class Engine {
 public:
  virtual ~Engine() = default;

  // One-time work before the loop (allocation, upload, layout change): timed as setup.
  // `data` outlives the engine.
  virtual void setup(const Dataset<T>& data, const std::vector<T>& initial_centroids) = 0;

  // Before a GPU initialisation (k-means++, k-means||): puts the data on the device ahead of
  // setup when this engine will hold all of it there row-major for `k` clusters, and returns
  // that copy (n x d, row-major) for the initialisation to read, so the data goes up once;
  // otherwise nullptr (the initialisation uploads its own). Timed as setup.
  virtual const T* stage(const Dataset<T>& /*data*/, std::size_t /*k*/) { return nullptr; }
  // After stage, for --init=kmeans||: the centred TF32 copy of the staged rows this engine made
  // for its own loop (centred_rows.hpp), which the initialisation may read instead of making
  // one; valid until setup. nullptr where there is none.
  virtual const CentredRows* centred_rows() const { return nullptr; }

  // One Lloyd iteration: assign every object to its nearest centroid (lowest index wins
  // ties), count the objects whose cluster changed (all of them on the first iteration),
  // and move each centroid to the mean of its objects; an empty cluster keeps its
  // centroid. Fills stats' phases, changed and shift; the driver measures stats.total.
  virtual void iterate(IterationStats& stats) = 0;

  // The current centroids, k*d row-major.
  virtual void read_centroids(std::vector<T>& out) = 0;

  // The nearest current centroid of every object (the final E-step).
  virtual void final_labels(std::vector<std::int32_t>& out) = 0;

  // After final_labels(): the objective for `centroids` (read_centroids()) under the fit's
  // metric, equal bit for bit to objective() on the host (metric.hpp), where the engine can
  // compute it without the host reading the data again (the GPU rungs, data on the device);
  // false otherwise.
  virtual bool final_inertia(const std::vector<T>& /*centroids*/, double& /*inertia*/) { return false; }

  // Whether setup() makes the data's range check itself (registry.hpp: check_arithmetic_range,
  // NaN and infinity named by object) when no set_whole() gave the largest |x| -- on the
  // device after the upload, so the host reads the data once. The registry then skips its
  // own pass.
  virtual bool checks_range() const { return false; }

  virtual std::string device() const { return "cpu"; }
  // Whether it runs on the GPU (then k-means++ runs there too).
  virtual bool on_gpu() const { return false; }
  // Which of its paths the implementation took for this problem ("" when it has one).
  virtual std::string path() const { return ""; }
  // Every decision of the path's plan as (name, value) pairs (fused: fused_plan.hpp); none by default.
  virtual std::vector<std::pair<std::string, std::string>> plan() const { return {}; }
  virtual int threads() const { return 1; }
  // GPU threads per block of its main kernel where it chose them itself (0: Params::block).
  virtual int block() const { return 0; }
  // GPUs it runs on (0 on the CPU).
  virtual int gpus() const { return on_gpu() ? 1 : 0; }

  // ---- Parts: engines that can run one part of a problem spread over GPUs or processes.
  // Their iteration is accumulate() (assign this part's objects, form its integer partials),
  // then the caller sums every part's partials() in place (NCCL, MPI_Allreduce: integers,
  // so any order gives the same bits), then apply() (the update from the totals, the same
  // on every part). iterate() is accumulate() then apply() for a part of one. apply() is
  // start_update() (queued, asynchronous on a GPU) then finish_update() (waits, fills the
  // stats), so that several GPUs update at once.
  virtual bool partable() const { return false; }
  // Before setup(): the whole problem this engine holds a part of.
  virtual void set_whole(const Whole&) {}
  virtual void accumulate() {}
  virtual Partials partials() { return {}; }
  virtual void start_update() {}
  virtual void finish_update(IterationStats&) {}
  void apply(IterationStats& stats) {
    start_update();
    finish_update(stats);
  }

  // ---- Batches (registry.hpp: run_batch). An engine whose whole iteration can be queued on its
  // own stream, with no wait, no timer and no decision on the host, returns that stream (a
  // cudaStream_t) after setup; one CUDA graph then runs an iteration of every problem of a batch
  // at once (gpu/batch_graph.cu). nullptr where it cannot (the default).
  virtual void* graph_stream() { return nullptr; }
  // The iteration, queued on graph_stream() (captured into the graph).
  virtual void queue_iteration() {}
  // After the graph ran: the iteration's changed, shift, inertia and counts, as iterate() gives.
  virtual void collect_iteration(IterationStats&) {}
  // After collect_iteration: whether the next iteration should be queued afresh (Requeue).
  virtual Requeue requeue() const { return Requeue::none; }
};

}  // namespace km
