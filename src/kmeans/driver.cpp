#include "kmeans/driver.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/errors.hpp"
#include "kernels/kmeans/stop_rule.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/init.hpp"
#include "kmeans/metric.hpp"

namespace km {

bool should_stop(const IterationStats& stats, std::size_t n, const Params& params) {
  // The lab rule: the fraction of objects that changed cluster is at most the threshold
  // (with threshold 0: nothing changed, so the centroids can no longer move); the scikit-learn
  // rule, on the raw (unscaled) summed squared centroid shift. (fused's delta kernel asks the same
  // function with the same limits: stop_limits.)
  const StopLimits limits = stop_limits(n, params);
  return kernels::meets_stop_rule(static_cast<double>(stats.changed), stats.shift, limits.changed, limits.shift);
}

StopLimits stop_limits(std::size_t n, const Params& params) {
  return {params.threshold * static_cast<double>(n), params.tol ? *params.tol : -1.0};
}

namespace {

// What the report says of the engine that ran.
template <class T>
void engine_facts(const Engine<T>& engine, Result<T>& result) {
  result.device = engine.device();
  result.path = engine.path();
  result.plan = engine.plan();
  result.threads = engine.threads();
  result.block = engine.block();
  result.gpus = engine.gpus();
}

}  // namespace

template <class T>
void start_fit(Engine<T>& engine, const Dataset<T>& data, const Params& params, Result<T>& result) {
  Stopwatch watch;
  // A GPU initialisation reads the engine's device copy of the data when it has one (weighted
  // k-means++ runs on the host: init_plusplus.cpp).
  const bool gpu_init = engine.on_gpu() && !data.weighted() &&
                        (params.init == Init::kmeanspp || params.init == Init::kmeans_parallel);
  // k-means|| on the GPU: its kernels load while the data goes up (KernelPreload).
  KernelPreload preload;
  if (gpu_init && params.init == Init::kmeans_parallel && params.gpu_init.preload) preload.start_parallel<T>(data.d);
  const T* staged = gpu_init ? engine.stage(data, static_cast<std::size_t>(params.k)) : nullptr;
  preload.wait();
  const double staging = watch.seconds();

  watch.restart();
  std::vector<T> initial =
      initial_centroids(data, params, engine.on_gpu(), staged, staged ? engine.centred_rows() : nullptr);
  if (params.metric != Metric::euclidean) unit_centroids(initial, data.d, drawn_by(params));
  result.seconds.init = watch.seconds();
  if (params.init == Init::kmeans_parallel && parallel_verbose())
    std::fprintf(stderr, "k-means||: the init's call returned after %.4f s\n", result.seconds.init);

  watch.restart();
  engine.setup(data, initial);
  result.seconds.setup = staging + watch.seconds();
}

template <class T>
void end_fit(Engine<T>& engine, const Dataset<T>& data, const Params& params, Result<T>& result) {
  // As scikit-learn: the labels returned are the nearest *final* centroids (one more
  // E-step), and the inertia is measured against them.
  Stopwatch watch;
  engine.read_centroids(result.centroids);
  engine.final_labels(result.labels);
  if (!engine.final_inertia(result.centroids, result.inertia))
    result.inertia = objective(data, result.centroids.data(), result.labels.data(), params.metric);
  result.seconds.finish = watch.seconds();
  engine_facts(engine, result);
}

template <class T>
Result<T> fit(Engine<T>& engine, const Dataset<T>& data, const Params& params, const IterationObserver& observer) {
  Result<T> result;
  start_fit(engine, data, params, result);
  Stopwatch watch;
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
  end_fit(engine, data, params, result);
  return result;
}

namespace {

class HostPartialsSum final : public PartialsSum {
 public:
  explicit HostPartialsSum(Team& team) : team_(team) {}
  double sum(const Partials& partials) override {
    Stopwatch watch;
    if (partials.device >= 0) throw DeviceError("internal: a GPU engine's partials reached the MPI sum");
    for (const Partials::Buffer& b : partials.buffers) team_.sum(static_cast<std::int64_t*>(b.data), b.count);
    return watch.seconds();
  }

 private:
  Team& team_;
};

}  // namespace

std::unique_ptr<PartialsSum> host_partials_sum(Team& team) { return std::make_unique<HostPartialsSum>(team); }

template <class T>
Result<T> fit_parted(Engine<T>& engine, const Dataset<T>& local, const RowSplit& split, Team& team, const Whole& whole,
                     const Params& params, PartialsSum& reduce, const IterationObserver& observer,
                     PartLabels labels_on) {
  Result<T> result;
  Stopwatch watch;
  std::vector<T> initial = initial_centroids(local, split, team, params);
  if (params.metric != Metric::euclidean) unit_centroids(initial, local.d, drawn_by(params));
  result.seconds.init = watch.seconds();

  watch.restart();
  engine.set_whole(whole);
  engine.setup(local, initial);
  result.seconds.setup = watch.seconds();

  watch.restart();
  for (int it = 1; it <= params.loops; ++it) {
    IterationStats stats;
    Stopwatch iteration;
    engine.accumulate();
    stats.allreduce = reduce.sum(engine.partials());
    engine.apply(stats);
    stats.total = iteration.seconds();
    result.per_iteration.push_back(stats);
    result.iterations = it;
    if (observer) observer(it, stats);
    if (should_stop(stats, split.total, params)) {
      result.converged = true;
      break;
    }
  }
  result.seconds.loop = watch.seconds();

  // The final E-step on each rank; the inertia from the ranks' chunk sums in chunk order (the
  // single process's bits); every label on rank 0, or each rank's own.
  watch.restart();
  engine.read_centroids(result.centroids);
  std::vector<std::int32_t> labels;
  engine.final_labels(labels);
  std::vector<double> chunk_sums;
  objective_chunks(local, result.centroids.data(), labels.data(), params.metric, chunk_sums);
  result.inertia = 0;
  for (double s : gather_all(team, chunk_sums)) result.inertia += s;
  if (labels_on == PartLabels::own) {
    result.labels = std::move(labels);
  } else {
    std::vector<unsigned char> all;
    team.gather_to_root(labels.data(), labels.size() * sizeof(std::int32_t), all);
    result.labels.resize(all.size() / sizeof(std::int32_t));
    if (!all.empty()) std::memcpy(result.labels.data(), all.data(), all.size());
  }
  result.seconds.finish = watch.seconds();
  engine_facts(engine, result);
  result.gpus *= team.size();
  result.ranks = team.size();
  result.objects = split.total;
  return result;
}

template Result<float> fit_parted(Engine<float>&, const Dataset<float>&, const RowSplit&, Team&, const Whole&,
                                  const Params&, PartialsSum&, const IterationObserver&, PartLabels);
template Result<double> fit_parted(Engine<double>&, const Dataset<double>&, const RowSplit&, Team&, const Whole&,
                                   const Params&, PartialsSum&, const IterationObserver&, PartLabels);
template void start_fit(Engine<float>&, const Dataset<float>&, const Params&, Result<float>&);
template void start_fit(Engine<double>&, const Dataset<double>&, const Params&, Result<double>&);
template void end_fit(Engine<float>&, const Dataset<float>&, const Params&, Result<float>&);
template void end_fit(Engine<double>&, const Dataset<double>&, const Params&, Result<double>&);
template Result<float> fit(Engine<float>&, const Dataset<float>&, const Params&, const IterationObserver&);
template Result<double> fit(Engine<double>&, const Dataset<double>&, const Params&, const IterationObserver&);

}  // namespace km
