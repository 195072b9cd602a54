#include "cuda/timer.hpp"

namespace km::cuda {

void PhaseTimer::begin(Phase p, cudaStream_t s) {
  if (used_ >= kSlots) throw DeviceError("PhaseTimer: too many phases in one iteration");
  phases_[used_] = p;
  pairs_[used_].start(s);
}

void PhaseTimer::end(cudaStream_t s) { pairs_[used_++].stop(s); }

void PhaseTimer::collect(IterationStats& stats) {
  for (int i = 0; i < used_; ++i) {
    const double s = pairs_[i].seconds();
    (phases_[i] == Phase::h2d ? stats.h2d : phases_[i] == Phase::kernel ? stats.kernel : stats.d2h) += s;
  }
  used_ = 0;
}

}  // namespace km::cuda
