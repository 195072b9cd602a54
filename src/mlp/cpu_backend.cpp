// The MLP on the host: products through a CPU kernel of the GEMM registry, the rest as
// OpenMP loops; each operation timed with a wall clock.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <vector>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "gemm/registry.hpp"
#include "kernels/mlp/softmax_row.hpp"
#include "mlp/backend.hpp"
#include "timing/timer.hpp"

namespace km::mlp {

namespace {

template <class T>
class CpuBackend final : public Backend<T> {
 public:
  CpuBackend(const gemm::KernelInfo& k, int threads) : run_(k.cpu<T>()), threads_(threads) {}

  std::string device() const override { return "cpu"; }

  T* alloc(std::size_t count) override { return buffers_.emplace_back(count, T(0)).data(); }
  std::int32_t* alloc_labels(std::size_t count) override { return labels_.emplace_back(count, 0).data(); }
  void put(T* dst, const T* host, std::size_t count) override { std::memcpy(dst, host, count * sizeof(T)); }
  void get(T* host, const T* src, std::size_t count) override { std::memcpy(host, src, count * sizeof(T)); }

  void load_batch(const T* x, const std::int32_t* y, std::size_t d, const std::int32_t* rows, int count, T* bx,
                  std::int32_t* by) override {
    Stopwatch w;
    for (int i = 0; i < count; ++i) {
      std::memcpy(bx + std::size_t(i) * d, x + std::size_t(rows[i]) * d, d * sizeof(T));
      by[i] = y[rows[i]];
    }
    t_.h2d += w.seconds();
  }

  void gemm(const gemm::GemmArgs<T>& g) override {
    Stopwatch w;
    run_(g, threads_);
    (g.op == gemm::Op::nn ? t_.nn : g.op == gemm::Op::tn ? t_.tn : t_.nt) += w.seconds();
  }

  void bias_act(T* z, const T* bias, int rows, int cols, bool relu) override {
    Stopwatch w;
#pragma omp parallel for num_threads(team(std::size_t(rows) * cols)) schedule(static)
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        T v = z[std::size_t(i) * cols + j] + bias[j];
        z[std::size_t(i) * cols + j] = relu && !(v > T(0)) ? T(0) : v;
      }
    t_.elementwise += w.seconds();
  }

  void softmax_xent(const T* logits, const std::int32_t* labels, int rows, int cols, T* grad) override {
    Stopwatch w;
    // Row by row in order, so the loss sums the same way on every run.
    for (int i = 0; i < rows; ++i) {
      const auto r = kernels::mlp::softmax_row(logits + std::size_t(i) * cols, labels[i], cols,
                                               grad ? grad + std::size_t(i) * cols : nullptr, rows);
      m_.loss_sum += r.loss;
      m_.correct += r.correct;
    }
    t_.elementwise += w.seconds();
  }

  void relu_backward(T* grad, const T* act, std::size_t count) override {
    Stopwatch w;
#pragma omp parallel for num_threads(team(count)) schedule(static)
    for (std::size_t i = 0; i < count; ++i)
      if (!(act[i] > T(0))) grad[i] = T(0);
    t_.elementwise += w.seconds();
  }

  void colsum(const T* g, int rows, int cols, T* out) override {
    Stopwatch w;
#pragma omp parallel for num_threads(team(std::size_t(rows) * cols)) schedule(static)
    for (int j = 0; j < cols; ++j) {
      T s = 0;
      for (int i = 0; i < rows; ++i) s += g[std::size_t(i) * cols + j];
      out[j] = s;
    }
    t_.elementwise += w.seconds();
  }

  void sgd(T* wgt, T* v, const T* g, std::size_t count, T lr, T momentum) override {
    Stopwatch w;
#pragma omp parallel for num_threads(team(count)) schedule(static)
    for (std::size_t i = 0; i < count; ++i) {
      v[i] = momentum * v[i] + g[i];
      wgt[i] -= lr * v[i];
    }
    t_.elementwise += w.seconds();
  }

  Metrics take_metrics() override {
    Metrics m = m_;
    m_ = {};
    return m;
  }
  PhaseTimes take_times() override {
    PhaseTimes t = t_;
    t_ = {};
    return t;
  }

 private:
  // The elementwise loops are small (a batch × a layer): a team only for large ones, so
  // the OpenMP threads do not wake and spin beside OpenBLAS's own (cpu-blas on 16 cores spent
  // 35 s an epoch in these loops with a team for each; measured on the H200 box).
  int team(std::size_t count) const {
    if (count < (std::size_t(1) << 20)) return 1;
    return threads_ > 0 ? threads_ : omp_get_max_threads();
  }

  gemm::CpuRun<T> run_;
  int threads_;
  std::deque<std::vector<T>> buffers_;
  std::deque<std::vector<std::int32_t>> labels_;
  PhaseTimes t_;
  Metrics m_;
};

}  // namespace

template <class T>
std::unique_ptr<Backend<T>> make_cpu_backend(const BackendOptions& o) {
  const gemm::KernelInfo& k = gemm::find_kernel(o.kernel);
  if (k.where != gemm::Where::cpu) throw UsageError("--kernel=" + o.kernel + " is not a CPU kernel");
  return std::make_unique<CpuBackend<T>>(k, o.threads);
}

void require_runnable(const BackendOptions& o) {
  const gemm::KernelInfo& k = gemm::find_kernel(o.kernel);
  if (k.where == gemm::Where::hybrid)
    throw UsageError("--kernel=" + o.kernel +
                     " splits each product between the GPU and the CPU with its own transfers; the MLP takes a GPU "
                     "kernel (weights stay on the device) or a CPU kernel");
  if (k.where == gemm::Where::gpu && !gpu_info().present)
    throw UsageError("--kernel=" + o.kernel + " needs a CUDA GPU, but none is usable (" + gpu_info().why_absent +
                     "); use --kernel=cpu-blas, cpu-blocked or cpu-omp");
}

template <class T>
std::unique_ptr<Backend<T>> make_backend(const BackendOptions& o) {
  require_runnable(o);
  return gemm::find_kernel(o.kernel).where == gemm::Where::cpu ? make_cpu_backend<T>(o) : make_gpu_backend<T>(o);
}

template std::unique_ptr<Backend<float>> make_backend(const BackendOptions&);
template std::unique_ptr<Backend<double>> make_backend(const BackendOptions&);
template std::unique_ptr<Backend<float>> make_cpu_backend(const BackendOptions&);
template std::unique_ptr<Backend<double>> make_cpu_backend(const BackendOptions&);

}  // namespace km::mlp
