// Batches: B independent problems of the same n and d, each fitted as run() fits it alone, bit
// for bit (docs/architecture.md: "Batches").
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "io/dataset.hpp"
#include "kmeans/engine.hpp"
#include "kmeans/implementation.hpp"
#include "kmeans/params.hpp"

namespace km {

// Called after every iteration (1-based) of problem b.
using BatchObserver = std::function<void(std::size_t problem, int iteration, const IterationStats& stats)>;

template <class T>
struct BatchResult {
  std::vector<Result<T>> problems;
  // The whole batch's iterations, wall seconds: each iteration's graph (together), or the sum of
  // the problems' own i-th iterations (one after another).
  std::vector<double> iteration_seconds;
  // Whether every iteration of the batch ran as one launch of a CUDA graph (fused on one GPU),
  // else the problems were fitted one after another.
  bool together = false;
};

// The host memory a batch of `batch` problems of n x d values of elem bytes (K clusters, up to
// `loops` iterations each) holds beside its data: each problem's parameters, result (centroids,
// labels, every iteration's stats) and report. Counted before anything is made (run_batch, the
// C++ library), so that a batch of many small problems ends in one line, not an OOM kill.
double batch_host_bytes(std::size_t batch, std::size_t n, std::size_t d, int k, int loops, std::size_t elem);

// data: the B problems' rows one after another (data.n = batch x n); params[b]: problem b's
// (the same but for given initial centroids). fused on one GPU, one initialisation each, runs the
// problems' iterations together: one engine a problem on its tensor path (which gives the same
// bits as any other path), each iteration of the batch one CUDA graph. Anything else, or a batch
// whose engines do not all fit in device memory at once, runs one fit after another. An error in
// problem b is thrown as "problem b: ..." with its type.
template <class T>
BatchResult<T> run_batch(const Implementation& impl, const Dataset<T>& data, std::size_t batch,
                         const std::vector<Params>& params, const BatchObserver& observer = {});

namespace gpu {
// The loops of a batch whose engines are set up (driver.hpp: start_fit) and all have a
// graph_stream(): problem b until its stop rule or params[b].loops, each iteration of the
// problems still running one CUDA graph. Fills each result's per_iteration, iterations,
// converged and seconds.loop; returns each graph's wall seconds (gpu/batch_graph.cu).
template <class T>
std::vector<double> iterate_together(const std::vector<Engine<T>*>& engines, const std::vector<std::size_t>& n,
                                     const std::vector<Params>& params, std::vector<Result<T>>& results,
                                     const BatchObserver& observer);
}  // namespace gpu

}  // namespace km
