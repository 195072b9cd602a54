// The one device timer: a pair of CUDA events around work on a stream. PhaseTimer keeps
// several pairs for the phases of one k-means iteration and adds them to IterationStats;
// time_median() times a body after a warm-up, the way the GEMM runs and the probe do.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <vector>

#include "common/stats.hpp"
#include "cuda/check.hpp"
#include "timing/timer.hpp"

namespace km::cuda {

class EventPair {
 public:
  EventPair() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventPair() {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void start(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(start_, s)); }
  void stop(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(stop_, s)); }
  // Waits for the stop event; seconds between the two.
  double seconds() {
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Runs `prepare` (untimed) and `body` once to warm up, then `reps` times with `body` timed
// by events on stream s; returns each repetition's seconds.
template <class Body, class Prepare>
std::vector<double> time_reps(cudaStream_t s, int reps, Body&& body, Prepare&& prepare) {
  EventPair ev;
  prepare();
  body();
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    prepare();
    ev.start(s);
    body();
    ev.stop(s);
    out.push_back(ev.seconds());
  }
  return out;
}

template <class Body>
double time_median(cudaStream_t s, int reps, Body&& body) {
  return median(time_reps(s, reps, body, [] {}));
}

enum class Phase { h2d, kernel, d2h };

// CUDA events around the device phases of one iteration; resolved after the stream syncs.
class PhaseTimer {
 public:
  void begin(Phase p, cudaStream_t s);
  void end(cudaStream_t s);
  // Adds each used phase's elapsed time to stats and forgets it. Call after a sync.
  void collect(IterationStats& stats);

 private:
  static constexpr int kSlots = 8;
  std::array<EventPair, kSlots> pairs_;
  std::array<Phase, kSlots> phases_{};
  int used_ = 0;
};

}  // namespace km::cuda
