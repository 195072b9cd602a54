#include "kmeans/batch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "cuda/check.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/gpu/unit_rows.hpp"
#include "kmeans/metric.hpp"
#include "kmeans/registry.hpp"

namespace km {

namespace {

// Problem b's rows of the batch, in place.
template <class T>
Dataset<T> problem_view(const Dataset<T>& data, std::size_t b, std::size_t n) {
  Dataset<T> one;
  one.n = n;
  one.d = data.d;
  if (data.on_device())
    one.device_values = data.device_values + b * n * data.d;
  else
    one.values = HostBuffer<T>::borrow(data.row(b * n), n * data.d);
  if (data.weighted()) one.weights = HostBuffer<T>::borrow(data.weights.data() + b * n, n);
  one.source = data.source + "[" + std::to_string(b) + "]";
  one.element = data.element;
  return one;
}

// fn(), with problem b named in the errors the caller can act on.
template <class F>
auto for_problem(std::size_t b, F&& fn) {
  try {
    return fn();
  } catch (const UsageError& e) {
    throw UsageError("problem " + std::to_string(b) + ": " + e.what());
  } catch (const InputError& e) {
    throw InputError("problem " + std::to_string(b) + ": " + e.what());
  } catch (const DeviceError& e) {
    throw DeviceError("problem " + std::to_string(b) + ": " + e.what());
  }
}

// Whether the batch's iterations may run together: fused on one GPU, one initialisation a
// problem, the device memory not capped, and launches not synchronised one by one (the
// graph's capture forbids it). Data on the device may: each engine reads its problem's rows in place
// (or copies them, where they are not aligned as cudaMalloc's).
template <class T>
bool may_run_together(const Implementation& impl, const Dataset<T>& data, std::size_t batch,
                      const std::vector<Params>& params) {
  if (std::string(impl.name) != "fused" || batch < 2 || data.weighted() || sync_after_launches() ||
      !gpu_info().present)
    return false;
  for (const Params& p : params)
    if (p.n_init != 1 || p.gpus > 1 || p.device_memory != 0 || p.stream_rows != 0) return false;
  return true;
}

// The batch's iterations together (gpu/batch_graph.cu); false, having freed what it made, where
// some problem's engine cannot queue its iteration (its data streamed: the batch does not fit) or
// its set-up ran out of device memory beside the others' (each problem then fits alone).
template <class T>
bool fit_together(const Implementation& impl, const Dataset<T>& data, std::size_t batch, std::size_t n,
                  const std::vector<Params>& given, const BatchObserver& observer, BatchResult<T>& out) {
  std::vector<Params> params = given;
  for (Params& p : params) {  // the tensor path: no step on the host within an iteration
    p.fused.path = FusedConfig::Path::tensor;
    p.fused.share = static_cast<int>(batch);
  }
  std::vector<Dataset<T>> views;
  views.reserve(batch);  // (the engines keep pointers to them)
  std::vector<cuda::DeviceBuffer<T>> unit_held(batch);  // cosine, data on the device: the unit rows
  std::vector<std::unique_ptr<Engine<T>>> engines;
  std::vector<Engine<T>*> running;
  std::vector<Result<T>> results(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    bool short_of_memory = false;
    for_problem(b, [&] {
      try {
        Dataset<T> view = problem_view(data, b, n);
        if (params[b].metric == Metric::cosine)
          view = view.on_device() ? gpu::unit_rows_on_device(view, unit_held[b]) : unit_rows(view);
        views.push_back(std::move(view));
        engines.push_back(checked_engine(impl, views[b], params[b]));
        start_fit(*engines[b], views[b], params[b], results[b]);
      } catch (const DeviceError&) {
        if (b == 0) throw;  // not for the others' memory: its own error
        short_of_memory = true;
      }
      return 0;
    });
    if (short_of_memory || !engines[b]->graph_stream()) return false;
    running.push_back(engines[b].get());
  }
  const std::vector<std::size_t> rows(batch, n);
  out.iteration_seconds = gpu::iterate_together(running, rows, params, results, observer);
  for (std::size_t b = 0; b < batch; ++b) {
    for_problem(b, [&] {
      end_fit(*engines[b], views[b], params[b], results[b]);
      if (!std::isfinite(results[b].inertia))
        throw InputError("the inertia is not finite: the arithmetic overflowed; rescale the data");
      return 0;
    });
    engines[b].reset();
  }
  out.problems = std::move(results);
  out.together = true;
  return true;
}

}  // namespace

double batch_host_bytes(std::size_t batch, std::size_t n, std::size_t d, int k, int loops, std::size_t elem) {
  // (a report: measured at about 1.2 KiB a problem for the command line's JSON and 8 KiB for the
  // Python module's dictionaries, which are counted)
  constexpr double kReport = 8192;
  const double kd = static_cast<double>(std::max(k, 1)) * static_cast<double>(d);
  // (each iteration's stats are kept as they run: counted for up to 1,000, not max_iter's worst case)
  const double iterations = std::min(std::max(loops, 1), 1000);
  const double one = sizeof(Params) + sizeof(Result<double>) + kReport + 3 * kd * static_cast<double>(elem) +
                     2.0 * static_cast<double>(n) * sizeof(std::int32_t) + iterations * sizeof(IterationStats);
  return static_cast<double>(batch) * one;
}

template <class T>
BatchResult<T> run_batch(const Implementation& impl, const Dataset<T>& data, std::size_t batch,
                         const std::vector<Params>& params, const BatchObserver& observer) {
  if (batch == 0) throw UsageError("a batch needs at least one problem");
  if (data.n % batch != 0) throw UsageError("internal: a batch's rows are not whole problems");
  if (params.size() != batch) throw UsageError("internal: a batch needs one Params a problem");
  const std::size_t n = data.n / batch;
  check_host_memory(batch_host_bytes(batch, n, data.d, params[0].k, params[0].loops, sizeof(T)),
                    strprintf("a batch of %zu problems (each one's parameters, result and report)", batch));
  BatchResult<T> out;
  if (may_run_together(impl, data, batch, params) && fit_together(impl, data, batch, n, params, observer, out))
    return out;
  out = BatchResult<T>{};
  for (std::size_t b = 0; b < batch; ++b) {
    const Dataset<T> view = problem_view(data, b, n);
    Result<T> r = for_problem(b, [&] {
      return run(impl, view, params[b], [&](int it, const IterationStats& s) {
        if (observer) observer(b, it, s);
      });
    });
    if (out.iteration_seconds.size() < r.per_iteration.size()) out.iteration_seconds.resize(r.per_iteration.size());
    for (std::size_t i = 0; i < r.per_iteration.size(); ++i) out.iteration_seconds[i] += r.per_iteration[i].total;
    out.problems.push_back(std::move(r));
  }
  return out;
}

template BatchResult<float> run_batch(const Implementation&, const Dataset<float>&, std::size_t,
                                      const std::vector<Params>&, const BatchObserver&);
template BatchResult<double> run_batch(const Implementation&, const Dataset<double>&, std::size_t,
                                       const std::vector<Params>&, const BatchObserver&);

}  // namespace km
