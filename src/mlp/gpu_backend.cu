// The MLP on the device: weights, activations and gradients stay in device memory; a batch
// goes in through a pinned staging buffer (two, so the host gathers the next batch while
// the previous copy is in flight) and the metrics come out once per epoch. Products go
// through a GPU kernel of the GEMM registry; the rest are kernels/mlp/elementwise.cuh.
//
// Timing: with phases on, an event is recorded after every operation; an operation's time
// runs from the previous event to its own (so a host-side gap counts in the operation after
// it). The events are read once per epoch, after the one synchronisation.
#include <cstring>
#include <deque>
#include <vector>

#include "common/errors.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "gemm/registry.hpp"
#include "kernels/mlp/elementwise.cuh"
#include "mlp/backend.hpp"

namespace km::mlp {

namespace {

namespace k = km::kernels::mlp;

enum class Phase { h2d, nn, tn, nt, elementwise, d2h };

unsigned blocks_for(std::size_t count, int threads) {
  const std::size_t b = (count + threads - 1) / threads;
  return static_cast<unsigned>(std::min<std::size_t>(std::max<std::size_t>(b, 1), 65536));
}

template <class T>
class GpuBackend final : public Backend<T> {
 public:
  GpuBackend(const gemm::KernelInfo& info, const BackendOptions& o)
      : launch_(info.gpu<T>()), adds_in_place_(std::string(info.name) == "cublas"), opts_(o.gpu), phases_(o.phases), handle_(stream_), metrics_(1) {
    CUDA_CHECK(cudaMemsetAsync(metrics_.get(), 0, sizeof(k::DeviceMetrics), stream_));
    start_epoch();
  }
  ~GpuBackend() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (cudaEvent_t e : staged_) cudaEventDestroy(e);
  }

  std::string device() const override { return gpu_info().name; }

  T* alloc(std::size_t count) override {
    T* p = buffers_.emplace_back(count).get();
    CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(T), stream_));
    return p;
  }
  std::int32_t* alloc_labels(std::size_t count) override {
    std::int32_t* p = labels_.emplace_back(count).get();
    CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(std::int32_t), stream_));
    return p;
  }
  void put(T* dst, const T* host, std::size_t count) override {
    CUDA_CHECK(cudaMemcpyAsync(dst, host, count * sizeof(T), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void get(T* host, const T* src, std::size_t count) override {
    CUDA_CHECK(cudaMemcpyAsync(host, src, count * sizeof(T), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void load_batch(const T* x, const std::int32_t* y, std::size_t d, const std::int32_t* rows, int count, T* bx,
                  std::int32_t* by) override {
    const std::size_t need = std::size_t(count) * d;
    if (stage_capacity_ < need || label_capacity_ < std::size_t(count)) grow_staging(need, count);
    const int s = next_stage_;
    next_stage_ ^= 1;
    CUDA_CHECK(cudaEventSynchronize(staged_[s]));  // the copy that last read this buffer is done
    T* sx = stage_x_[s].get();
    std::int32_t* sy = stage_y_[s].get();
    for (int i = 0; i < count; ++i) {
      std::memcpy(sx + std::size_t(i) * d, x + std::size_t(rows[i]) * d, d * sizeof(T));
      sy[i] = y[rows[i]];
    }
    CUDA_CHECK(cudaMemcpyAsync(bx, sx, need * sizeof(T), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(by, sy, count * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaEventRecord(staged_[s], stream_));
    mark(Phase::h2d);
  }

  void gemm(const gemm::GemmArgs<T>& g) override {
    // cuBLAS computes nt in place (D = A·Bᵀ + D, the registry's contract for it): D gets C
    // first, as the gemm runner does; the copy is part of nt's time.
    if (adds_in_place_ && g.op == gemm::Op::nt && g.c && g.c != g.d)
      CUDA_CHECK(cudaMemcpy2DAsync(g.d, g.ldc * sizeof(T), g.c, g.ldc * sizeof(T), std::size_t(g.n) * sizeof(T),
                                   std::size_t(g.m), cudaMemcpyDeviceToDevice, stream_));
    launch_(g, opts_, stream_, handle_);
    CUDA_CHECK_LAUNCH();
    mark(g.op == gemm::Op::nn ? Phase::nn : g.op == gemm::Op::tn ? Phase::tn : Phase::nt);
  }

  void bias_act(T* z, const T* bias, int rows, int cols, bool relu) override {
    k::bias_act<<<blocks_for(std::size_t(rows) * cols, 256), 256, 0, stream_>>>(z, bias, rows, cols, relu);
    CUDA_CHECK_LAUNCH();
    mark(Phase::elementwise);
  }
  void softmax_xent(const T* logits, const std::int32_t* labels, int rows, int cols, T* grad) override {
    k::softmax_xent<<<1, k::kSoftmaxThreads, 0, stream_>>>(logits, labels, rows, cols, grad, metrics_.get());
    CUDA_CHECK_LAUNCH();
    mark(Phase::elementwise);
  }
  void relu_backward(T* grad, const T* act, std::size_t count) override {
    k::relu_backward<<<blocks_for(count, 256), 256, 0, stream_>>>(grad, act, count);
    CUDA_CHECK_LAUNCH();
    mark(Phase::elementwise);
  }
  void colsum(const T* g, int rows, int cols, T* out) override {
    k::colsum<<<blocks_for(std::size_t(cols), 128), 128, 0, stream_>>>(g, rows, cols, out);
    CUDA_CHECK_LAUNCH();
    mark(Phase::elementwise);
  }
  void sgd(T* w, T* v, const T* g, std::size_t count, T lr, T momentum) override {
    k::sgd<<<blocks_for(count, 256), 256, 0, stream_>>>(w, v, g, count, lr, momentum);
    CUDA_CHECK_LAUNCH();
    mark(Phase::elementwise);
  }

  Metrics take_metrics() override {
    k::DeviceMetrics m{};
    CUDA_CHECK(cudaMemcpyAsync(&m, metrics_.get(), sizeof m, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaMemsetAsync(metrics_.get(), 0, sizeof m, stream_));
    mark(Phase::d2h);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return {m.loss_sum, m.correct};
  }

  PhaseTimes take_times() override {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    PhaseTimes t;
    for (std::size_t i = 1; i < used_; ++i) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
      const double s = ms * 1e-3;
      switch (phase_of_[i]) {
        case Phase::h2d: t.h2d += s; break;
        case Phase::nn: t.nn += s; break;
        case Phase::tn: t.tn += s; break;
        case Phase::nt: t.nt += s; break;
        case Phase::elementwise: t.elementwise += s; break;
        case Phase::d2h: t.d2h += s; break;
      }
    }
    start_epoch();
    return t;
  }

 private:
  void start_epoch() {
    used_ = 0;
    if (phases_) mark(Phase::h2d);  // the start marker (its phase is never counted)
  }
  void mark(Phase p) {
    if (!phases_) return;
    if (used_ == events_.size()) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
      phase_of_.push_back(p);
    }
    phase_of_[used_] = p;
    CUDA_CHECK(cudaEventRecord(events_[used_++], stream_));
  }
  void grow_staging(std::size_t values, int labels) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (int s = 0; s < 2; ++s) {
      stage_x_[s] = cuda::PinnedBuffer<T>(values);
      stage_y_[s] = cuda::PinnedBuffer<std::int32_t>(std::size_t(labels));
      if (!staged_[s]) {
        CUDA_CHECK(cudaEventCreateWithFlags(&staged_[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(staged_[s], stream_));
      }
    }
    stage_capacity_ = values;
    label_capacity_ = std::size_t(labels);
  }

  gemm::GpuLaunch<T> launch_;
  bool adds_in_place_;
  gemm::GpuOptions opts_;
  bool phases_;
  cuda::Stream stream_;
  cuda::CublasHandle handle_;
  cuda::DeviceBuffer<k::DeviceMetrics> metrics_;
  std::deque<cuda::DeviceBuffer<T>> buffers_;
  std::deque<cuda::DeviceBuffer<std::int32_t>> labels_;
  cuda::PinnedBuffer<T> stage_x_[2];
  cuda::PinnedBuffer<std::int32_t> stage_y_[2];
  cudaEvent_t staged_[2] = {nullptr, nullptr};
  std::size_t stage_capacity_ = 0, label_capacity_ = 0;
  int next_stage_ = 0;
  std::vector<cudaEvent_t> events_;
  std::vector<Phase> phase_of_;
  std::size_t used_ = 0;
};

}  // namespace

template <class T>
std::unique_ptr<Backend<T>> make_gpu_backend(const BackendOptions& o) {
  const gemm::KernelInfo& info = gemm::find_kernel(o.kernel);
  if (info.where != gemm::Where::gpu) throw UsageError("--kernel=" + o.kernel + " is not a GPU kernel");
  require_runnable(o);
  const GpuInfo& gpu = gpu_info();
  gemm::check_gpu_options(o.kernel, sizeof(T) == 8, o.gpu);
  if (info.supports) {
    const Support s = info.supports(sizeof(T) == 8, o.gpu, gpu);
    if (!s.ok) throw UsageError(s.reason);
  }
  return std::make_unique<GpuBackend<T>>(info, o);
}

template std::unique_ptr<Backend<float>> make_gpu_backend(const BackendOptions&);
template std::unique_ptr<Backend<double>> make_gpu_backend(const BackendOptions&);

}  // namespace km::mlp
