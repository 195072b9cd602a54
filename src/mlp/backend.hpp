// Where a training step runs: the buffers and operations the MLP needs, on the host (CPU
// GEMM kernels, OpenMP loops) or on the device (GPU GEMM kernels, CUDA elementwise kernels;
// weights and activations stay there, only batches go in and metrics come out). Every
// product goes through the GEMM registry's kernel; each backend times its operations by
// phase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gemm/gemm.hpp"
#include "gemm/gpu_gemm.hpp"

namespace km::mlp {

// Seconds by phase since the last take().
struct PhaseTimes {
  double h2d = 0;          // the batch in (a host gather for CPU kernels)
  double nn = 0, tn = 0, nt = 0;  // the products by op
  double elementwise = 0;  // bias, ReLU, softmax and loss, bias gradients, SGD updates
  double d2h = 0;          // metrics out
};

struct Metrics {
  double loss_sum = 0;        // summed cross-entropy of the rows seen
  std::int64_t correct = 0;   // rows whose arg-max was the label
};

template <class T>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string device() const = 0;

  // Zero-filled buffers that live as long as the backend.
  virtual T* alloc(std::size_t count) = 0;
  virtual std::int32_t* alloc_labels(std::size_t count) = 0;
  // Untimed copies (initial weights in, weights out for tests).
  virtual void put(T* dst, const T* host, std::size_t count) = 0;
  virtual void get(T* host, const T* src, std::size_t count) = 0;

  // Rows `rows[0..count)` of the host set (x: n × d, y: n) into the batch buffers (timed h2d).
  virtual void load_batch(const T* x, const std::int32_t* y, std::size_t d, const std::int32_t* rows, int count,
                          T* bx, std::int32_t* by) = 0;
  // One product through the kernel (timed by op).
  virtual void gemm(const gemm::GemmArgs<T>& g) = 0;
  // z (rows × cols) += bias per column, then ReLU in place when relu.
  virtual void bias_act(T* z, const T* bias, int rows, int cols, bool relu) = 0;
  // Softmax cross-entropy of logits (rows × cols) against labels: adds the rows' loss and
  // correct count to the metrics; with grad, writes (softmax − one-hot) / rows.
  virtual void softmax_xent(const T* logits, const std::int32_t* labels, int rows, int cols, T* grad) = 0;
  // grad *= (act > 0), elementwise.
  virtual void relu_backward(T* grad, const T* act, std::size_t count) = 0;
  // out[j] = sum over rows of g[i][j], in row order.
  virtual void colsum(const T* g, int rows, int cols, T* out) = 0;
  // v = momentum·v + g;  w −= lr·v  (PyTorch's SGD with momentum).
  virtual void sgd(T* w, T* v, const T* g, std::size_t count, T lr, T momentum) = 0;

  // The metrics since the last call (timed d2h), then zeroes them.
  virtual Metrics take_metrics() = 0;
  // Waits for the work so far; the phase times since the last call.
  virtual PhaseTimes take_times() = 0;
};

struct BackendOptions {
  std::string kernel;   // a GEMM registry name (not hybrid)
  int threads = 0;      // CPU threads (0: all)
  gemm::GpuOptions gpu; // tile, TF32, mma shape
  bool phases = true;   // GPU: time each operation (events between them); off: only the totals
};

// UsageError unless o.kernel can run here (a hybrid kernel never; a GPU kernel only with a usable
// GPU): make_backend's own refusals, which the command line makes before it reads the data.
void require_runnable(const BackendOptions& o);

// Throws UsageError for hybrid, an unknown kernel or options the kernel refuses here.
template <class T>
std::unique_ptr<Backend<T>> make_backend(const BackendOptions& o);
template <class T>
std::unique_ptr<Backend<T>> make_cpu_backend(const BackendOptions& o);
template <class T>
std::unique_ptr<Backend<T>> make_gpu_backend(const BackendOptions& o);

}  // namespace km::mlp
