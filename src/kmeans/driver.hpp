// The shared Lloyd driver: init, the loop with its stop rules and timing, the final
// E-step and inertia. Implementations only supply an Engine.
#pragma once

#include <functional>
#include <memory>

#include "dist/team.hpp"
#include "io/dataset.hpp"
#include "kmeans/engine.hpp"
#include "kmeans/params.hpp"

namespace km {

// Called after every iteration (1-based), e.g. to print progress.
using IterationObserver = std::function<void(int iteration, const IterationStats& stats)>;

// The loop itself. Callers check the problem first (registry.hpp's run() does).
template <class T>
Result<T> fit(Engine<T>& engine, const Dataset<T>& data, const Params& params,
              const IterationObserver& observer = {});

// fit()'s stages around its loop: the initialisation and setup (seconds.init, .setup), and the
// final E-step, inertia and the engine's facts (seconds.finish). run_batch runs the loops of a
// batch's problems together between them.
template <class T>
void start_fit(Engine<T>& engine, const Dataset<T>& data, const Params& params, Result<T>& result);
template <class T>
void end_fit(Engine<T>& engine, const Dataset<T>& data, const Params& params, Result<T>& result);

// Sums an engine's integer partials over a team, in place, every rank at once; returns the
// seconds it took (the allreduce phase). On the host: MPI_Allreduce (Team::sum); on the device:
// NCCL, its communicator set up through the team (kmeans/gpu/multi_gpu.cu).
class PartialsSum {
 public:
  virtual ~PartialsSum() = default;
  virtual double sum(const Partials& partials) = 0;
};
std::unique_ptr<PartialsSum> host_partials_sum(Team& team);
// This rank's GPU is the current device; every rank calls it (ncclCommInitRank).
std::unique_ptr<PartialsSum> nccl_partials_sum(Team& team);

// Where a parted fit leaves the labels: every object's on rank 0 (the CLI writes them there), or
// each rank its own rows' (the Python module: fit(X_local, comm=...)).
enum class PartLabels { root, own };

// The loop of one rank of a team (registry.hpp: run_parted): the same steps, with the
// engine's integer partials summed over the team each iteration (the allreduce phase).
template <class T>
Result<T> fit_parted(Engine<T>& engine, const Dataset<T>& local, const RowSplit& split, Team& team, const Whole& whole,
                     const Params& params, PartialsSum& reduce, const IterationObserver& observer = {},
                     PartLabels labels_on = PartLabels::root);

// True when a stop rule fires after an iteration with these stats.
bool should_stop(const IterationStats& stats, std::size_t n, const Params& params);
// The stop rules' limits for n objects (kernels/kmeans/stop_rule.hpp: meets_stop_rule): changed
// <= threshold n; shift <= tol, negative where there is no tol.
struct StopLimits {
  double changed, shift;
};
StopLimits stop_limits(std::size_t n, const Params& params);

}  // namespace km
