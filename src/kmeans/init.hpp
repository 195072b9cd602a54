// Initial centroids, shared by every implementation.
//   first     the first K objects (the lab's rule)
//   random    K distinct objects drawn with the seed
//   kmeans++  greedy k-means++ (as scikit-learn: 2 + ln K candidates per step, the one that
//             lowers the potential most wins), seeded
// All three are reproducible for a seed, whatever the thread count: sums are taken over
// fixed chunks and combined in chunk order.
#pragma once

#include <vector>

#include "io/dataset.hpp"
#include "kmeans/params.hpp"

namespace km {

template <class T>
std::vector<T> initial_centroids(const Dataset<T>& data, const Params& params);

}  // namespace km
