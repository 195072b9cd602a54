#include "kmeans/registry.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "io/generate.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/init.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/gpu/unit_rows.hpp"
#include "kmeans/metric.hpp"
#include "kmeans/multi_gpu.hpp"
#include <nlohmann/json.hpp>

// The ladder, in order. Each X(name) is the entry `name_implementation` defined beside its
// engine: src/kmeans/<name>.cpp for the CPU, src/kmeans/gpu/<name>.cu for the GPU.
// Adding a variant: its kernel file, its engine file, and its name on this list.
#define KM_LADDER(X) X(seq) X(omp) X(naive) X(transpose) X(shared) X(offload) X(offload_block) X(fused)

namespace km {

#define KM_DECLARE(name) extern const Implementation name##_implementation;
KM_LADDER(KM_DECLARE)
#undef KM_DECLARE

const std::vector<const Implementation*>& implementations() {
#define KM_ENTRY(name) &name##_implementation,
  static const std::vector<const Implementation*> registry = {KM_LADDER(KM_ENTRY)};
#undef KM_ENTRY
  return registry;
}

const Implementation& find_implementation(const std::string& name) {
  std::string names;
  for (const Implementation* impl : implementations()) {
    if (impl->name == name) return *impl;
    names += (names.empty() ? "" : ", ") + std::string(impl->name);
  }
  throw UsageError("--impl=" + name + ": unknown implementation (available: " + names + ")");
}

std::string default_implementation(bool gpu_present) { return gpu_present ? "fused" : "omp"; }

void require_runnable(const Implementation& impl, const GpuInfo& gpu) {
  if (impl.needs_gpu() && !gpu.present)
    throw UsageError(std::string("--impl=") + impl.name + " needs a CUDA GPU, but none is usable (" +
                     gpu.why_absent + "); use --impl=omp or --impl=seq");
}

Support supports(const Implementation& impl, std::size_t k, std::size_t d, std::size_t elem) {
  const GpuInfo& gpu = gpu_info();
  if (impl.needs_gpu() && !gpu.present)
    return {false, std::string("--impl=") + impl.name + " needs a CUDA GPU, but none is usable (" + gpu.why_absent +
                       "); use --impl=omp or --impl=seq"};
  return impl.supports ? impl.supports(k, d, elem, gpu) : Support{};
}

std::string registry_json(std::size_t k, std::size_t d, std::size_t elem, const FusedConfig& config) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  int order = 0;
  for (const Implementation* impl : implementations()) {
    nlohmann::ordered_json e = {{"name", impl->name},
                                {"description", impl->description},
                                {"where", impl->needs_gpu() ? "gpu" : "cpu"},
                                {"order", order++}};
    if (k > 0 && d > 0) {
      const Support s = supports(*impl, k, d, elem);
      e["runs"] = s.ok;
      if (!s.ok) e["reason"] = s.reason;
      if (impl->path) e["path"] = impl->path(k, d, elem, config);
      if (impl->plan) {
        nlohmann::ordered_json plan = nlohmann::ordered_json::object();
        for (const auto& [name, value] : impl->plan(k, d, elem, config)) plan[name] = value;
        e["plan"] = std::move(plan);
      }
    }
    list.push_back(std::move(e));
  }
  return list.dump();
}

namespace {

// Loaders check finiteness with the file's name; data handed over in memory (the Python
// module's arrays) is checked here, in the same pass, named by its source.
template <class T>
double largest_finite(const Dataset<T>& data) {
  const double largest = max_abs_value(data);
  if (std::isnan(largest)) check_finite(data, data.source.empty() ? std::string("the data") : data.source);
  return largest;
}

// The largest |x| (the engines' fixed-point scales need it: passed on, so the data is read
// once).
template <class T>
double check_data_range(const Dataset<T>& data, double max_weight = 0) {
  if (data.on_device()) {  // on the device, where the data are; a NaN is not named by object there
    const double largest = device_largest_of(data.device_values, data.n * data.d);
    if (std::isnan(largest))
      throw InputError(strprintf("%s: a value is NaN or infinite (NaN/Inf are not allowed)",
                                 data.source.empty() ? "the data" : data.source.c_str()));
    km::check_arithmetic_range<T>(largest, data.n, data.d, max_weight);
    return largest;
  }
  const double largest = largest_finite(data);
  km::check_arithmetic_range<T>(largest, data.n, data.d, max_weight);
  return largest;
}

// The sample weights checked (Dataset: check_weights) and their largest (0 unweighted), once
// the whole team's largest is known: all of them 0 leaves no mean to take, and a largest below
// 2^-64 no fixed-point scale (only the weights' ratios move the centroids).
double weights_with_mass(double largest_weight, bool weighted) {
  if (weighted && !(largest_weight > 0))
    throw InputError("the sample weights are all 0: at least one object must weigh more than 0");
  if (weighted && largest_weight < 0x1p-64)
    throw InputError(strprintf("the largest sample weight is %g: at least 2^-64 is needed; multiply the weights by "
                               "a power of 2 (only their ratios move the centroids)",
                               largest_weight));
  return largest_weight;
}

}  // namespace

template <class T>
void check_arithmetic_range(double largest, std::size_t n, std::size_t d, double max_weight, const char* what) {
  if (largest == 0) return;
  // Bounds in log2, so that the check itself cannot overflow: a squared distance is at most
  // d * (2 max|x|)^2 (in T), a centroid sum n * max|x| and the inertia n * d * (2 max|x|)^2
  // (both in double).
  // (Sample weights scale the sums and the inertia by at most their largest.)
  const double lg = std::log2(largest) + 1,
               ln = std::log2(static_cast<double>(n)) + (max_weight > 1 ? std::log2(max_weight) : 0.0),
               ld = std::log2(static_cast<double>(d));
  const double t_max = std::log2(static_cast<double>(std::numeric_limits<T>::max()));
  const double d_max = std::log2(std::numeric_limits<double>::max());
  if (2 * lg + ld >= t_max) {
    if constexpr (sizeof(T) == 4)
      throw InputError(strprintf("%s (up to %.3g) are too large for float: squared distances over "
                                 "%zu coordinates would overflow; use --precision=double or rescale the data",
                                 what, largest, d));
    throw InputError(strprintf("%s (up to %.3g) are too large: squared distances over %zu "
                               "coordinates would overflow double; rescale the data",
                               what, largest, d));
  }
  if (lg + ln >= d_max || 2 * lg + ld + ln >= d_max)
    throw InputError(strprintf("%s (up to %.3g) are too large: the sums over %zu objects would "
                               "overflow double; rescale the data",
                               what, largest, n));
}
template void check_arithmetic_range<float>(double, std::size_t, std::size_t, double, const char*);
template void check_arithmetic_range<double>(double, std::size_t, std::size_t, double, const char*);

static int host_threads(const Params& params) { return params.threads > 0 ? params.threads : omp_get_max_threads(); }

double host_bytes(const Implementation& impl, std::size_t n, std::size_t d, std::size_t elem, const Params& params,
                  bool fitting) {
  const auto k = static_cast<std::size_t>(std::max(params.k, 1));
  const double kd = static_cast<double>(k) * static_cast<double>(d), e = static_cast<double>(elem),
               objects = static_cast<double>(n), labels = 4.0 * objects;
  // The driver's: the initial centroids (held to the end of a fit), the result's centroids and
  // labels, and with --n-init the best result so far beside them.
  // (cosine: the normalised copy of the data the fit runs on, kmeans/metric.hpp.)
  const double held = kd * e + (fitting && params.n_init > 1 ? kd * e + labels : 0.0) +
                      (params.metric == Metric::cosine ? objects * static_cast<double>(d) * e : 0.0);
  const double result = kd * e + labels;
  // The initialisation's scratch, freed before the engine's set-up: k-means++ keeps each
  // object's distance and its candidates' rows (in T and in double); k-means|| each object's
  // distance and nearest candidate, and the candidates' rows (about oversampling * K a round).
  const double trials = 2 + std::floor(std::log(static_cast<double>(k)));
  double init = 0;
  if (fitting && params.init == Init::kmeanspp) {
    init = 8 * objects + trials * static_cast<double>(d) * (e + 8);
  } else if (fitting && params.init == Init::kmeans_parallel) {
    const double rounds = std::max(params.init_rounds, 1);
    const double m = std::min(objects, std::ceil(params.oversampling * static_cast<double>(k) + 1) * rounds +
                                           static_cast<double>(k));
    init = 16 * objects + m * static_cast<double>(d) * e + (trials + 2) * m * 8 + trials * static_cast<double>(d) * 8;
  }
  // A GPU engine's host side: its labels read back, the centroids, their sums (with carries) and staging.
  const double engine = impl.host_bytes ? impl.host_bytes(n, k, d, elem, host_threads(params))
                                        : labels + kd * (2 * e + 16) + 8.0 * static_cast<double>(k);
  // The run's working memory beyond its buffers (the libraries' pages it touches, each
  // thread's stack and malloc arena): measured at 20 MiB beside a tiny run's on 1 to 4 threads.
  const double runtime = 32.0 * 1048576 + host_threads(params) * 262144.0;
  return held + std::max(init, engine + result) + runtime;
}

namespace {

// fitting: K must not exceed the objects (a fit needs K of them); predicting labels any
// number of objects, one included, with K given centroids.
// Returns the data's largest |x| (0 without `range`: the range check is then the engine's).
template <class T>
double check_problem(const Implementation& impl, const Dataset<T>& data, const Params& params, bool fitting,
                     bool range = true) {
  validate(params);
  if (fitting) check_clusters(params.k, data.n);
  else if (params.k < 1) check_clusters(params.k, data.n);
  const Support s = supports(impl, static_cast<std::size_t>(params.k), data.d, sizeof(T));
  if (!s.ok) throw UsageError(s.reason);
  if (params.gpus > 1 && !impl.needs_gpu())
    throw UsageError(strprintf("--gpus=%d: --impl=%s runs on the CPU", params.gpus, impl.name));
  // (predict, score: weights of 0 everywhere give an inertia of 0.)
  const double max_weight = weights_with_mass(check_weights(data).max, data.weighted() && fitting);
  const double largest = range ? check_data_range(data, max_weight) : 0.0;
  Params counted = params;
  if (data.on_device()) counted.metric = Metric::euclidean;  // (cosine: its normalised copy is on the device)
  check_host_memory(host_bytes(impl, data.n, data.d, sizeof(T), counted, fitting),
                    strprintf("K=%d x d=%zu with --impl=%s (centroids, sums, labels)", params.k, data.d, impl.name));
  return largest;
}

template <class T>
Result<T> finished(Result<T> result) {
  if (!std::isfinite(result.inertia))  // the range check makes this unreachable; never report it as a result
    throw InputError("the inertia is not finite: the arithmetic overflowed; rescale the data");
  return result;
}

}  // namespace

std::uint64_t init_seed(std::uint64_t seed, int r) {
  return r == 0 ? seed : hash64(seed, 0x6e5f696e6974ull /* "n_init" */, static_cast<std::uint64_t>(r));
}

namespace {

template <class T>
Result<T> run_on(const Implementation& impl, const Dataset<T>& data, const Params& params,
                 const IterationObserver& observer) {
  check_problem(impl, data, params, true, false);
  // GPU engines that check the range themselves (checks_range) do it on the device after their
  // upload, so the host reads the data once; k-means++ and k-means|| read the data before the
  // setup, and --gpus splits it, so those are checked here first.
  const bool engine_may_check = impl.needs_gpu() && params.gpus <= 1 && params.init != Init::kmeanspp &&
                                params.init != Init::kmeans_parallel && !data.weighted();
  const WeightRange weights = check_weights(data);  // (check_problem has refused bad ones)
  Whole whole;  // n = 0 until the host has checked the range
  Result<T> best;
  std::vector<double> inertias;
  RunSeconds spent;
  for (int r = 0; r < params.n_init; ++r) {
    Params p = params;
    p.seed = init_seed(params.seed, r);
    const auto engine = p.gpus > 1 ? make_multi_gpu<T>(impl, p) : impl.make<T>(p);
    if (whole.n == 0 && !(engine_may_check && engine->checks_range()))
      whole = {data.n, check_data_range(data, weights.max), weights.max, weights.min};
    if (whole.n) engine->set_whole(whole);
    Result<T> result = finished(fit(*engine, data, p, observer));
    inertias.push_back(result.inertia);
    spent.init += result.seconds.init;
    spent.setup += result.seconds.setup;
    spent.loop += result.seconds.loop;
    spent.finish += result.seconds.finish;
    if (r == 0 || result.inertia < best.inertia) best = std::move(result);  // the first on ties
  }
  if (params.n_init > 1) {
    best.n_init_inertia = std::move(inertias);
    best.seconds = spent;  // every initialisation's time, not only the kept one's
  }
  return best;
}

}  // namespace

template <class T>
void check_device_data(const Implementation& impl, const Dataset<T>& data, const Params& params) {
  if (!data.on_device()) return;
  const std::string what = "data on the GPU";
  // The rungs that keep the whole loop on the device (DeviceUpdateEngine, device_update.hpp):
  // named, because asking an engine (partable) would need a GPU to make it.
  const std::string name = impl.name;
  if (name != "fused" && name != "offload" && name != "offload-block")
    throw UsageError(strprintf("--impl=%s cannot read %s: use fused, offload or offload-block (or copy the data to "
                               "the host)",
                               impl.name, what.c_str()));
  if (data.weighted()) throw UsageError(what + ": sample weights need the data on the host");
  if (params.gpus > 1) throw UsageError(what + ": one GPU, the one that holds the data");
  if (params.init == Init::kmeans_parallel)
    throw UsageError(what + ": --init=kmeans|| needs the data on the host; use kmeans++, random, first or centroids");
}

template <class T>
std::unique_ptr<Engine<T>> checked_engine(const Implementation& impl, const Dataset<T>& data, const Params& params) {
  check_device_data(impl, data, params);
  check_problem(impl, data, params, true, false);
  const bool engine_may_check = impl.needs_gpu() && params.gpus <= 1 && params.init != Init::kmeanspp &&
                                params.init != Init::kmeans_parallel && !data.weighted();
  auto engine = params.gpus > 1 ? make_multi_gpu<T>(impl, params) : impl.make<T>(params);
  if (!(engine_may_check && engine->checks_range())) {
    const WeightRange weights = check_weights(data);
    engine->set_whole({data.n, check_data_range(data, weights.max), weights.max, weights.min});
  }
  return engine;
}

template <class T>
Result<T> run(const Implementation& impl, const Dataset<T>& data, const Params& params,
              const IterationObserver& observer) {
  check_device_data(impl, data, params);
  if (params.metric != Metric::cosine) return run_on(impl, data, params, observer);
  check_problem(impl, data, params, true, false);  // (its memory check counts the copy)
  if (!data.on_device()) return run_on(impl, unit_rows(data), params, observer);
  cuda::DeviceBuffer<T> held;
  return run_on(impl, gpu::unit_rows_on_device(data, held), params, observer);
}

template <class T>
Result<T> predict(const Implementation& impl, const Dataset<T>& given, const Params& params) {
  check_device_data(impl, given, params);
  const WeightRange weights = check_weights(given);
  const bool cosine = params.metric == Metric::cosine;
  // (cosine: the range checked is the normalised rows', as a fit's: run)
  double largest = check_problem(impl, given, params, false, !cosine);
  if (params.init != Init::given) throw UsageError("predict needs the centroids (--predict=PATH)");
  Dataset<T> unit;
  cuda::DeviceBuffer<T> held;  // (the unit rows of data on the device)
  if (cosine) unit = given.on_device() ? gpu::unit_rows_on_device(given, held) : unit_rows(given);
  const Dataset<T>& data = cosine ? unit : given;
  if (cosine) largest = check_data_range(data, weights.max);
  const Whole whole{given.n, largest, weights.max, weights.min};
  Result<T> result;
  Stopwatch watch;
  result.centroids = initial_centroids(data, params);
  if (params.metric != Metric::euclidean) unit_centroids(result.centroids, data.d);
  const auto engine = impl.make<T>(params);
  engine->set_whole(whole);
  engine->setup(data, result.centroids);
  result.seconds.setup = watch.seconds();
  watch.restart();
  engine->final_labels(result.labels);
  if (!engine->final_inertia(result.centroids, result.inertia))
    result.inertia = objective(data, result.centroids.data(), result.labels.data(), params.metric);
  result.seconds.finish = watch.seconds();
  result.device = engine->device();
  result.path = engine->path();
  result.plan = engine->plan();
  result.threads = engine->threads();
  return finished(std::move(result));
}

template <class T>
Result<T> run_parted(const Implementation& impl, const Dataset<T>& given, const RowSplit& split, Team& team,
                     const Params& params, const IterationObserver& observer, PartLabels labels_on) {
  if (team.size() == 1) return run(impl, given, params, observer);
  if (given.on_device()) throw UsageError("data on the GPU: one process, not a team of ranks");
  Dataset<T> unit;  // cosine: this rank's rows normalised (row by row: any split gives the same bits)
  if (params.metric == Metric::cosine) unit = unit_rows(given);
  const Dataset<T>& local = params.metric == Metric::cosine ? unit : given;
  validate(params);
  check_clusters(params.k, split.total);
  if (params.gpus > 1)
    throw UsageError(strprintf("--gpus=%d: under mpirun each rank runs one GPU; start one rank per GPU", params.gpus));
  const Support s = supports(impl, static_cast<std::size_t>(params.k), local.d, sizeof(T));
  if (!s.ok) throw UsageError(s.reason);
  check_host_memory(host_bytes(impl, local.n, local.d, sizeof(T), params),  // this rank's rows
                    strprintf("K=%d x d=%zu with --impl=%s (centroids, sums, labels)", params.k, local.d, impl.name));
  // (largest_finite and check_weights throw on this rank; the caller aborts the team.)
  const WeightRange mine = check_weights(local, split.first);
  // (the smallest positive weight as the largest of -w: 0 stays 0 for a rank without one)
  double largest[5] = {largest_finite(local), mine.max, local.weighted() ? 1.0 : 0.0, local.weighted() ? 0.0 : 1.0,
                       mine.min > 0 ? -mine.min : -kLargestWeight * 2};
  team.max(largest, 5);
  if (largest[2] > 0 && largest[3] > 0)
    throw UsageError("sample weights were given on some ranks but not on others: give every rank its rows' weights");
  double max_weight = 0;
  try {  // (from the reduced values: every rank alike)
    max_weight = weights_with_mass(largest[1], local.weighted());
    check_arithmetic_range<T>(largest[0], split.total, local.d, max_weight);
    // the weights' spread the fixed-point sums of every partable engine take (fixed_scales refuses
    // it in the engine's set-up otherwise, on every rank)
    if (max_weight > 0) fixed_scales(largest[0], split.total, local.d, 0, max_weight, -largest[4]);
  } catch (const InputError& e) {
    throw SharedInputError(e.what());
  }
  const Whole whole{split.total, largest[0], max_weight, max_weight > 0 ? -largest[4] : 0.0};
  // The GPU rungs: this rank's GPU (its rank on the node, modulo the node's GPUs), the partials
  // summed on the device with NCCL; omp: on the host with MPI.
  if (impl.needs_gpu()) select_rank_device(team);  // before any engine: it makes its stream there
  if (!partable(impl))
    throw UsageError(strprintf("--impl=%s runs as one process; under mpirun use omp, fused, offload or offload-block",
                               impl.name));
  if (impl.needs_gpu()) {
    for (int r = 0; r < team.size(); ++r)
      if (split_rows(split.total, r, team.size()).count == 0)
        throw UsageError(strprintf("--impl=%s under mpirun: %zu objects leave rank %d without rows (each rank "
                                   "takes whole chunks of %zu); use fewer ranks",
                                   impl.name, split.total, r, kRowGranule));
  }
  const auto reduce = impl.needs_gpu() ? nccl_partials_sum(team) : host_partials_sum(team);
  Result<T> best;
  std::vector<double> inertias;
  RunSeconds spent;
  for (int r = 0; r < params.n_init; ++r) {
    Params p = params;
    p.seed = init_seed(params.seed, r);
    const auto engine = impl.make<T>(p);
    Result<T> result = finished(fit_parted(*engine, local, split, team, whole, p, *reduce, observer, labels_on));
    inertias.push_back(result.inertia);
    spent.init += result.seconds.init;
    spent.setup += result.seconds.setup;
    spent.loop += result.seconds.loop;
    spent.finish += result.seconds.finish;
    if (r == 0 || result.inertia < best.inertia) best = std::move(result);
  }
  if (params.n_init > 1) {
    best.n_init_inertia = std::move(inertias);
    best.seconds = spent;
  }
  return best;
}

template Result<float> run_parted(const Implementation&, const Dataset<float>&, const RowSplit&, Team&, const Params&,
                                  const IterationObserver&, PartLabels);
template Result<double> run_parted(const Implementation&, const Dataset<double>&, const RowSplit&, Team&,
                                   const Params&, const IterationObserver&, PartLabels);

bool partable(const Implementation& impl) { return impl.make<float>(Params{})->partable(); }

template void check_device_data(const Implementation&, const Dataset<float>&, const Params&);
template void check_device_data(const Implementation&, const Dataset<double>&, const Params&);
template Result<float> predict(const Implementation&, const Dataset<float>&, const Params&);
template Result<double> predict(const Implementation&, const Dataset<double>&, const Params&);

template std::unique_ptr<Engine<float>> checked_engine(const Implementation&, const Dataset<float>&, const Params&);
template std::unique_ptr<Engine<double>> checked_engine(const Implementation&, const Dataset<double>&, const Params&);
template Result<float> run(const Implementation&, const Dataset<float>&, const Params&, const IterationObserver&);
template Result<double> run(const Implementation&, const Dataset<double>&, const Params&, const IterationObserver&);

}  // namespace km
