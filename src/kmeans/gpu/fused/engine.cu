// fused: the fastest rung (docs/fused.md). Its plan (fused_plan.cpp: plan_fused) picks one of two
// paths per shape, and FusedEngine forwards to it:
//   one pass  (small K*d; one_pass.hpp) the delta kernel: assignment in one read of the data,
//             only the objects that move accumulated, the update in the last block;
//   tensor    (any shape; tensor.cu) distances and arg-min on the tensor cores with a proven
//             margin and a re-check of the close calls, then the sums by sorted label.
// With sample weights, the tensor path at every shape: its sums by sorted label take the weights
// (the one pass's movers and algebraic inertia count objects).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device.hpp"
#include "kmeans/engine.hpp"
#include "kmeans/gpu/engine.hpp"
#include "kmeans/gpu/fused_plan.hpp"
#include "kmeans/implementation.hpp"

namespace km::gpu {

template <class T>
std::unique_ptr<Engine<T>> make_fused_one_pass(const Params& params);  // one_pass_iterate.cu
template <class T>
std::unique_ptr<Engine<T>> make_fused_tensor(const Params& params);  // tensor.cu

// This GPU's facts for the plan (without a GPU, an H100's).
DeviceFacts device_facts() {
  const GpuInfo& gpu = gpu_info();
  DeviceFacts f;
  if (gpu.present) {
    f.shared_optin = gpu.shared_optin;
    f.compute_capability = gpu.compute_capability;
  }
  return f;
}

// The plan for K clusters of d coordinates of `elem` bytes on this GPU (without one, an H100's),
// for any n and data within 2^48 (--list, make_path).
FusedPlan plan_for(std::size_t k, std::size_t d, std::size_t elem, const FusedConfig& config) {
  return plan_fused({0, d, k, elem, 0.0, Params{}.block, false, 0}, device_facts(), config);
}

// The path for --list, as the report words it ("staged" is taken where n % 4 == 0, "cells" once
// the data's range gives a grid).
std::string fused_path(std::size_t k, std::size_t d, std::size_t elem, const FusedConfig& config) {
  return plan_for(k, d, elem, config).describe();
}

// Every decision of the plan, for --list's "plan" object.
std::vector<std::pair<std::string, std::string>> fused_plan_fields(std::size_t k, std::size_t d, std::size_t elem,
                                                                   const FusedConfig& config) {
  return plan_for(k, d, elem, config).fields();
}

template <class T>
class FusedEngine final : public Engine<T> {
 public:
  explicit FusedEngine(const Params& p) : params_(p) {}

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    const std::size_t k = initial.size() / data.d;
    if (!staged_ || staged_k_ != k) make_path(k, data.d, data.weighted());  // else stage() made it
    staged_ = false;
    path_->setup(data, initial);
  }
  const T* stage(const Dataset<T>& data, std::size_t k) override {
    make_path(k, data.d, data.weighted());
    staged_ = true;
    staged_k_ = k;
    return path_->stage(data, k);
  }
  const CentredRows* centred_rows() const override { return path_ ? path_->centred_rows() : nullptr; }
  void iterate(IterationStats& stats) override { path_->iterate(stats); }
  bool partable() const override { return true; }
  void set_whole(const Whole& whole) override { whole_ = whole; }
  void accumulate() override { path_->accumulate(); }
  Partials partials() override { return path_->partials(); }
  void start_update() override { path_->start_update(); }
  void finish_update(IterationStats& stats) override { path_->finish_update(stats); }
  void* graph_stream() override { return path_ ? path_->graph_stream() : nullptr; }
  void queue_iteration() override { path_->queue_iteration(); }
  void collect_iteration(IterationStats& stats) override { path_->collect_iteration(stats); }
  Requeue requeue() const override { return path_ ? path_->requeue() : Requeue::none; }
  void read_centroids(std::vector<T>& out) override { path_->read_centroids(out); }
  void final_labels(std::vector<std::int32_t>& out) override { path_->final_labels(out); }
  bool final_inertia(const std::vector<T>& centroids, double& inertia) override {
    return path_->final_inertia(centroids, inertia);
  }
  bool checks_range() const override { return true; }  // both paths are DeviceUpdateEngines
  std::string device() const override { return device_name(); }
  bool on_gpu() const override { return true; }
  int block() const override { return path_ ? path_->block() : 0; }
  std::vector<std::pair<std::string, std::string>> plan() const override {
    return path_ ? path_->plan() : std::vector<std::pair<std::string, std::string>>{};
  }
  std::string path() const override {
    const std::string more = path_ ? path_->path() : "";
    return more.empty() ? path_name_ : std::string(path_name_) + ", " + more;
  }

 private:
  void make_path(std::size_t k, std::size_t d, bool weighted) {
    Params p = params_;
    if (weighted) p.fused.path = FusedConfig::Path::tensor;  // (its plan, and what --list would say, the tensor's)
    const bool one_pass = plan_for(k, d, sizeof(T), p.fused).path == FusedPlan::Path::one_pass;
    path_name_ = one_pass ? "one-pass" : weighted ? "tensor (sample weights)" : "tensor";
    if (one_pass)
      path_ = make_fused_one_pass<T>(p);
    else
      path_ = make_fused_tensor<T>(p);
    if (whole_.n) path_->set_whole(whole_);
  }

  Params params_;
  Whole whole_;
  const char* path_name_ = "";
  std::unique_ptr<Engine<T>> path_;
  bool staged_ = false;  // stage() made path_ for staged_k_ clusters
  std::size_t staged_k_ = 0;
};

}  // namespace km::gpu

namespace km {
extern const Implementation fused_implementation = describe<gpu::FusedEngine>(
    "fused", "fastest: one pass for small K*d (float scores with a proven margin, only the objects that move accumulated, the update in the last block); otherwise exact distances + arg-min fused on the tensor cores", Where::gpu,
    [](std::size_t k, std::size_t d, std::size_t, const GpuInfo&) { return gpu::fits_int_indexing(k, d); },
    gpu::fused_path, gpu::fused_plan_fields);
}  // namespace km
