// The timing layer. Timings are data: every iteration yields one IterationStats, and the
// reports (table, JSON, CSV) are views of a vector of them.
//   h2d     host -> device copies          (CUDA events, device implementations)
//   kernel  device compute                 (CUDA events)
//   cpu     host compute inside the loop   (steady clock)
//   d2h     device -> host copies          (CUDA events)
//   total   the whole iteration, host steady clock, measured by the shared driver
#pragma once

#include <chrono>
#include <cstdint>

namespace km {

struct IterationStats {
  double h2d = 0, kernel = 0, cpu = 0, d2h = 0;  // seconds
  double allreduce = 0;  // seconds summing the parts' partials across GPUs or processes (NCCL, MPI)
  double total = 0;                              // seconds, wall clock of the iteration
  std::int64_t changed = 0;                      // objects whose cluster changed
  double shift = 0;                              // summed squared centroid shift
  std::int64_t rechecked = -1;      // fused tensor path: objects whose label seq's formula re-decided (-1: n/a)
  std::int64_t rechecked_all = -1;  // ... of which against every centroid
  std::int64_t looked_up = -1;  // fused one-pass, d = 2: objects labelled from the cell table (-1: n/a)
  std::int64_t rescored = -1;  // fused one-pass, tensor-core scores: objects they could not call, scored again
                               // with FMAs (-1: n/a)
  std::int64_t skipped = -1;  // fused one-pass: objects a distance bound, or at d = 2 a cell whose label held, kept without reading them (-1: n/a)
  std::int64_t summed = -1;   // fused tensor path: objects added into the cluster sums (all, or the movers) (-1: n/a)
  double inertia = 0;  // sum of each object's squared distance to the centroid it was assigned to in
                       // this iteration (before the update), from the assignment pass itself (with
                       // fused's bounds and the tensor path's movers, from the clusters' sums)
};

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Adds the wall time of a scope to a phase: `{ HostPhase t(stats.cpu); ...work... }`.
class HostPhase {
 public:
  explicit HostPhase(double& sink) : sink_(sink) {}
  ~HostPhase() { sink_ += watch_.seconds(); }
  HostPhase(const HostPhase&) = delete;
  HostPhase& operator=(const HostPhase&) = delete;

 private:
  double& sink_;
  Stopwatch watch_;
};

}  // namespace km
