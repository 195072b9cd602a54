#include "kmeans/driver.hpp"

#include "common/errors.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/init.hpp"

namespace km {

bool should_stop(const IterationStats& stats, std::size_t n, const Params& params) {
  // The lab rule: the fraction of objects that changed cluster is at most the threshold
  // (with threshold 0: nothing changed, so the centroids can no longer move).
  if (static_cast<double>(stats.changed) <= params.threshold * static_cast<double>(n)) return true;
  // The scikit-learn rule, on the raw (unscaled) summed squared centroid shift.
  return params.tol && stats.shift <= *params.tol;
}

template <class T>
Result<T> fit(Engine<T>& engine, const Dataset<T>& data, const Params& params, const IterationObserver& observer) {
  Result<T> result;
  Stopwatch watch;
  const std::vector<T> initial = initial_centroids(data, params, engine.on_gpu());
  result.seconds.init = watch.seconds();

  watch.restart();
  engine.setup(data, initial);
  result.seconds.setup = watch.seconds();

  watch.restart();
  for (int it = 1; it <= params.loops; ++it) {
    IterationStats stats;
    Stopwatch iteration;
    engine.iterate(stats);
    stats.total = iteration.seconds();
    result.per_iteration.push_back(stats);
    result.iterations = it;
    if (observer) observer(it, stats);
    if (should_stop(stats, data.n, params)) {
      result.converged = true;
      break;
    }
  }
  result.seconds.loop = watch.seconds();

  // As scikit-learn: the labels returned are the nearest *final* centroids (one more
  // E-step), and the inertia is measured against them.
  watch.restart();
  engine.read_centroids(result.centroids);
  engine.final_labels(result.labels);
  result.inertia = inertia(data, result.centroids.data(), result.labels.data());
  result.seconds.finish = watch.seconds();
  result.device = engine.device();
  result.path = engine.path();
  result.threads = engine.threads();
  result.gpus = engine.gpus();
  return result;
}

template Result<float> fit(Engine<float>&, const Dataset<float>&, const Params&, const IterationObserver&);
template Result<double> fit(Engine<double>&, const Dataset<double>&, const Params&, const IterationObserver&);

}  // namespace km
