// A batch's loops together (kmeans/batch.hpp: iterate_together): each iteration of every problem
// still running is one CUDA graph, captured from the engines' own launches (queue_iteration) on
// their own streams, so that the problems' kernels run side by side and the host waits once an
// iteration for the whole batch, not once a problem. The graph is captured again when a problem
// stops or its engine asks for another iteration (Engine::requeue).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "cuda/check.hpp"
#include "cuda/memory.hpp"
#include "kmeans/batch.hpp"
#include "kmeans/driver.hpp"

namespace km::gpu {

namespace {

struct GraphDeleter {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
struct ExecDeleter {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
using Graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, ExecDeleter>;

// One iteration of the running problems: from `origin`, each engine's stream forks, queues its
// iteration and joins back.
template <class T>
GraphExec capture(const std::vector<Engine<T>*>& engines, const std::vector<char>& running, cudaStream_t origin,
                  const cuda::Event& fork, const std::vector<std::unique_ptr<cuda::Event>>& joins) {
  CUDA_CHECK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
  std::size_t forked = 0;  // engines [0, forked) joined the capture (skipping those not running)
  try {
    CUDA_CHECK(cudaEventRecord(fork.get(), origin));
    for (std::size_t b = 0; b < engines.size(); ++b, forked = b) {
      if (!running[b]) continue;
      const auto s = static_cast<cudaStream_t>(engines[b]->graph_stream());
      CUDA_CHECK(cudaStreamWaitEvent(s, fork.get(), 0));
      forked = b + 1;
      engines[b]->queue_iteration();
      CUDA_CHECK(cudaEventRecord(joins[b]->get(), s));
      CUDA_CHECK(cudaStreamWaitEvent(origin, joins[b]->get(), 0));
    }
  } catch (...) {
    // Every stream that forked joins back (errors ignored), so that the capture ends and takes
    // them out of capture mode; the runtime's last error is cleared for later calls.
    for (std::size_t b = 0; b < forked; ++b)
      if (running[b]) {
        const auto s = static_cast<cudaStream_t>(engines[b]->graph_stream());
        cudaEventRecord(joins[b]->get(), s);
        cudaStreamWaitEvent(origin, joins[b]->get(), 0);
      }
    cudaGraph_t abandoned = nullptr;
    cudaStreamEndCapture(origin, &abandoned);
    if (abandoned) cudaGraphDestroy(abandoned);
    cudaGetLastError();
    throw;
  }
  cudaGraph_t raw = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(origin, &raw));
  const Graph graph(raw);
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
  return GraphExec(exec);
}

}  // namespace

template <class T>
std::vector<double> iterate_together(const std::vector<Engine<T>*>& engines, const std::vector<std::size_t>& n,
                                     const std::vector<Params>& params, std::vector<Result<T>>& results,
                                     const BatchObserver& observer) {
  const std::size_t batch = engines.size();
  for (Engine<T>* e : engines)
    if (!e->graph_stream()) throw DeviceError("internal: a batch's engine cannot queue its iteration");
  std::vector<char> running(batch);
  for (std::size_t b = 0; b < batch; ++b) running[b] = params[b].loops > 0;
  const cuda::Stream origin;
  const cuda::Event fork;
  std::vector<std::unique_ptr<cuda::Event>> joins;
  for (std::size_t b = 0; b < batch; ++b) joins.push_back(std::make_unique<cuda::Event>());
  std::vector<double> seconds;
  GraphExec exec;
  for (int it = 1; std::find(running.begin(), running.end(), 1) != running.end(); ++it) {
    Stopwatch iteration;
    if (!exec) exec = capture(engines, running, origin.get(), fork, joins);
    CUDA_CHECK(cudaGraphLaunch(exec.get(), origin.get()));
    CUDA_CHECK(cudaStreamSynchronize(origin.get()));
    const double wall = iteration.seconds();
    seconds.push_back(wall);
    std::size_t preferred = 0, still = 0;
    for (std::size_t b = 0; b < batch; ++b) {
      if (!running[b]) continue;
      IterationStats stats;
      engines[b]->collect_iteration(stats);
      stats.total = wall;  // the batch's iteration: the problems' kernels ran side by side
      Result<T>& r = results[b];
      r.per_iteration.push_back(stats);
      r.iterations = it;
      r.seconds.loop += wall;
      if (observer) observer(b, it, stats);
      const bool stop = should_stop(stats, n[b], params[b]);
      if (stop) r.converged = true;
      if (stop || it >= params[b].loops) {
        running[b] = 0;
        exec.reset();  // captured again without it
        continue;
      }
      ++still;
      const Requeue want = engines[b]->requeue();
      if (want == Requeue::required) exec.reset();
      preferred += want == Requeue::preferred;
    }
    // A faster iteration for some problems (fused's movers' scheme) is taken once a quarter of
    // those still running ask for it: a capture of the whole batch costs about as much as one
    // iteration of it. Labels, centroids, change counts, shifts, iterations and the final
    // inertia are the same bits either way (exact sums); an iteration's inertia (the movers'
    // is algebraic, within 1e-11) and `summed` follow the sequence that ran.
    if (4 * preferred >= std::max<std::size_t>(still, 1) && preferred > 0) exec.reset();
  }
  return seconds;
}

template std::vector<double> iterate_together(const std::vector<Engine<float>*>&, const std::vector<std::size_t>&,
                                              const std::vector<Params>&, std::vector<Result<float>>&,
                                              const BatchObserver&);
template std::vector<double> iterate_together(const std::vector<Engine<double>*>&, const std::vector<std::size_t>&,
                                              const std::vector<Params>&, std::vector<Result<double>>&,
                                              const BatchObserver&);

}  // namespace km::gpu
