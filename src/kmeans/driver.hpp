// The shared Lloyd driver: init, the loop with its stop rules and timing, the final
// E-step and inertia. Implementations only supply an Engine.
#pragma once

#include <functional>

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

// True when a stop rule fires after an iteration with these stats.
bool should_stop(const IterationStats& stats, std::size_t n, const Params& params);

}  // namespace km
