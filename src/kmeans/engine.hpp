// What an implementation provides: how it assigns and updates. Everything else (init,
// stop rules, final labels' inertia, timing of the loop) is the shared driver's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "kmeans/params.hpp"
#include "timing/timer.hpp"

namespace km {

template <class T>
class Engine {
 public:
  virtual ~Engine() = default;

  // One-time work before the loop (allocation, upload, layout change): timed as setup.
  // `data` outlives the engine.
  virtual void setup(const Dataset<T>& data, const std::vector<T>& initial_centroids) = 0;

  // One Lloyd iteration: assign every object to its nearest centroid (lowest index wins
  // ties), count the objects whose cluster changed (all of them on the first iteration),
  // and move each centroid to the mean of its objects; an empty cluster keeps its
  // centroid. Fills stats' phases, changed and shift; the driver measures stats.total.
  virtual void iterate(IterationStats& stats) = 0;

  // The current centroids, k*d row-major.
  virtual void read_centroids(std::vector<T>& out) = 0;

  // The nearest current centroid of every object (the final E-step).
  virtual void final_labels(std::vector<std::int32_t>& out) = 0;

  virtual std::string device() const { return "cpu"; }
  // Whether it runs on the GPU (then k-means++ runs there too).
  virtual bool on_gpu() const { return false; }
  // Which of its paths the implementation took for this problem ("" when it has one).
  virtual std::string path() const { return ""; }
  virtual int threads() const { return 1; }
};

}  // namespace km
