// The one registry: every implementation, in ladder order, with its factory, description
// and limits. The CLI (--help, --list), the tests and the benchmarks iterate it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kmeans/driver.hpp"
#include "kmeans/implementation.hpp"

namespace km {

// In ladder order (index = step): seq, omp, then the GPU ladder.
const std::vector<const Implementation*>& implementations();

// Throws UsageError listing the known names.
const Implementation& find_implementation(const std::string& name);

// "fused" when a GPU is present, else "omp".
std::string default_implementation(bool gpu_present);

// Throws UsageError when the implementation needs a GPU and none is usable.
void require_runnable(const Implementation& impl, const GpuInfo& gpu);

// Whether impl runs K clusters of d coordinates of `elem` bytes here (a GPU it needs
// included); the reason when it does not.
Support supports(const Implementation& impl, std::size_t k, std::size_t d, std::size_t elem);

// The registry as one JSON array: name, description, where it runs, ladder order; given a
// shape (k, d > 0), also whether each implementation runs it here ("runs", and "reason" when
// not) and the path it would take ("path", for those that have several).
std::string registry_json(std::size_t k = 0, std::size_t d = 0, std::size_t elem = 8, const FusedConfig& config = {});

// Checks the problem once (parameters, K against the data, the implementation's limits),
// then fits. Throws UsageError for anything the caller can change.
template <class T>
Result<T> run(const Implementation& impl, const Dataset<T>& data, const Params& params,
              const IterationObserver& observer = {});

// run()'s checks of one fit of data (n_init 1) and its engine, not yet set up, the range checked
// where the engine will not check it itself (run_batch: kmeans/batch.hpp).
template <class T>
std::unique_ptr<Engine<T>> checked_engine(const Implementation& impl, const Dataset<T>& data, const Params& params);

// Labels every object with its nearest given centroid (params.init == Init::given), without
// iterating: the result has the given centroids, the labels and the inertia, iterations 0.
template <class T>
Result<T> predict(const Implementation& impl, const Dataset<T>& data, const Params& params);

// The run under `mpirun -np R`: every rank calls it with its rows (`split` of the whole, in
// `local`) and gets the single process's result: the same centroids, inertia and iterations,
// bit for bit; the labels of every object on rank 0 only (the others' are empty), or with
// PartLabels::own each rank its own rows'. Runs the implementations that can hold one part of a
// problem (partable: omp, fused, offload, offload-block). A team of one is run().
template <class T>
Result<T> run_parted(const Implementation& impl, const Dataset<T>& local, const RowSplit& split, Team& team,
                     const Params& params, const IterationObserver& observer = {},
                     PartLabels labels_on = PartLabels::root);

// Whether impl can hold one part of a problem (run_parted runs it).
bool partable(const Implementation& impl);

// Throws InputError when values up to `largest` (finite) over n objects of d coordinates
// would overflow T's squared distances or the double sums (each addend scaled by at most
// max_weight, the largest sample weight). `what` names the values in the message. Given
// initial centroids pass it too, with the smallest of their largest |c_j| (centroid_reach):
// each object's distance to that centroid, at most d (max|x| + r)^2, then stays finite.
template <class T>
void check_arithmetic_range(double largest, std::size_t n, std::size_t d, double max_weight = 0,
                            const char* what = "the data's values");

// Data already on the device (Dataset::device_values): the fits that take it -- the rungs that
// keep the whole loop on the GPU (offload, offload-block, fused), one GPU, one process, the
// Euclidean metric, no sample weights, any initialisation but k-means|| -- else UsageError
// naming what to change. Nothing for host data.
template <class T>
void check_device_data(const Implementation& impl, const Dataset<T>& data, const Params& params);
// max |x| of `count` values in device memory, NaN when one is NaN or infinite (kmeans/gpu/engine.cu).
template <class T>
double device_largest_of(const T* x, std::size_t count);

// The host bytes a fit (or, `fitting` false, a predict) of n objects of d coordinates of `elem`
// bytes with impl and params allocates beside the data, at its peak: the driver's centroids and
// labels, the initialisation's scratch, and the engine's buffers (Implementation::host_bytes;
// params.threads = 0: every core's). run() and predict() refuse a problem whose figure exceeds
// the host memory available (common/host_memory.hpp).
double host_bytes(const Implementation& impl, std::size_t n, std::size_t d, std::size_t elem, const Params& params,
                  bool fitting = true);

// The seed of initialisation r of --n-init: the run's seed for r = 0, derived ones after.
std::uint64_t init_seed(std::uint64_t seed, int r);

}  // namespace km
