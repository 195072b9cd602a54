// A batch of problems on the command line: a 3-D --input (B, N, d) is B problems of N objects,
// each fitted exactly as a 2-D input of its rows alone would be (the same parameters, seed
// included), with fused on one GPU their iterations together (kmeans/batch.hpp); the JSON report
// holds the batch's time per iteration and every problem's report, --output (.npy) the centroids
// as (B, K, d) and the labels as (B, N).
#pragma once

#include <cstddef>

#include "cli/kmeans_options.hpp"
#include "io/dataset.hpp"
#include "kmeans/registry.hpp"

namespace km::cli {

// data: the B * N rows; batch: B. Returns the exit status (0).
template <class T>
int run_batch(const KmeansOptions& o, const Implementation& impl, const Params& params, const Dataset<T>& data,
              std::size_t batch, double load_seconds);

}  // namespace km::cli
