// Several GPUs in one process. Each GPU holds a contiguous share of the rows and a full engine
// of the chosen rung (fused, offload, offload-block: those whose iteration splits into
// accumulate / partials / apply). An iteration: every GPU assigns its rows and forms its
// integer partials (asynchronously, all GPUs at once); one NCCL group all-reduces them in
// place (sums, counts, change count, inertia: 64-bit integers, so the totals are the same
// bits as one GPU's); every GPU applies the same update to the same totals, so the centroids
// stay identical everywhere without a broadcast. The fixed-point scales come from the whole
// data (Whole), the initial centroids from the driver as for one GPU: the run is bit-identical
// to the one-GPU run.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/nccl.hpp"
#include "cuda/timer.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/multi_gpu.hpp"

namespace km {

namespace {

// Makes `device` current for a scope, then restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    CUDA_CHECK(cudaGetDevice(&previous_));
    CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

template <class T>
class MultiGpuEngine final : public Engine<T> {
 public:
  MultiGpuEngine(const Implementation& impl, const Params& params) : impl_(impl) {
    const int available = device_count();
    if (params.gpus > available)
      throw UsageError(strprintf("--gpus=%d: this machine has %d usable GPU%s", params.gpus, available,
                                 available == 1 ? "" : "s"));
    parts_.resize(static_cast<std::size_t>(params.gpus));
    for (int g = 0; g < params.gpus; ++g) {
      Part& part = parts_[static_cast<std::size_t>(g)];
      part.device = g;
      DeviceScope on(g);
      part.engine = impl.make<T>(params);
      if (!part.engine->partable())
        throw UsageError(strprintf("--impl=%s runs on one GPU; --gpus=%d needs fused, offload or offload-block",
                                   impl.name, params.gpus));
    }
    cuda::nccl();  // fails here, with its reason, if NCCL cannot be loaded
  }

  ~MultiGpuEngine() override {
    comms_.reset();
    for (Part& part : parts_) {  // each engine's buffers and stream, freed on its own device
      if (!part.engine) continue;
      cudaSetDevice(part.device);
      part.engine.reset();
      part.timer.reset();
    }
    cudaSetDevice(0);
  }

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    const std::size_t gpus = parts_.size();
    if (data.n < gpus)
      throw UsageError(strprintf("--gpus=%zu: more GPUs than objects (%zu)", gpus, data.n));
    const WeightRange w = whole_.n ? WeightRange{} : check_weights(data);
    const Whole whole = whole_.n ? whole_ : Whole{data.n, max_abs_value(data), w.max, w.min};
    for (std::size_t g = 0; g < gpus; ++g) {
      Part& part = parts_[g];
      const std::size_t begin = data.n * g / gpus, end = data.n * (g + 1) / gpus;
      part.rows.n = end - begin;
      part.rows.d = data.d;
      part.rows.values = HostBuffer<T>::borrow(data.row(begin), part.rows.n * data.d);
      if (data.weighted()) part.rows.weights = HostBuffer<T>::borrow(data.weights.data() + begin, part.rows.n);
      part.rows.source = data.source;
      DeviceScope on(part.device);
      part.engine->set_whole(whole);
      part.engine->setup(part.rows, initial);
      part.timer = std::make_unique<cuda::EventPair>();
    }
    std::vector<int> devices;
    for (const Part& part : parts_) devices.push_back(part.device);
    comms_ = std::make_unique<cuda::NcclComms>(devices);
    // NCCL sets up its channels on the first collective (~60 ms on 4 H200s): do it here, in
    // the setup, not in the first iteration.
    const cuda::NcclApi& api = cuda::nccl();
    NCCL_CHECK(api.group_start());
    for (std::size_t g = 0; g < gpus; ++g) {
      const Partials p = parts_[g].engine->partials();
      const Partials::Buffer& count = p.buffers[2];  // the change count: cleared before each iteration
      NCCL_CHECK(api.all_reduce(count.data, count.data, 1, ncclUint64, ncclSum, (*comms_)[g],
                                static_cast<cudaStream_t>(p.stream)));
    }
    NCCL_CHECK(api.group_end());
    for (Part& part : parts_) {
      DeviceScope on(part.device);
      CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(part.engine->partials().stream)));
    }
  }

  void iterate(IterationStats& stats) override {
    for (Part& part : parts_) {  // asynchronous: every GPU assigns its rows at once
      DeviceScope on(part.device);
      part.engine->accumulate();
    }
    const cuda::NcclApi& api = cuda::nccl();
    for (Part& part : parts_) {
      DeviceScope on(part.device);
      part.timer->start(static_cast<cudaStream_t>(part.engine->partials().stream));
    }
    NCCL_CHECK(api.group_start());
    for (std::size_t g = 0; g < parts_.size(); ++g) {
      const Partials p = parts_[g].engine->partials();
      for (const Partials::Buffer& b : p.buffers)
        NCCL_CHECK(api.all_reduce(b.data, b.data, b.count, ncclUint64, ncclSum, (*comms_)[g],
                                  static_cast<cudaStream_t>(p.stream)));
    }
    NCCL_CHECK(api.group_end());
    for (Part& part : parts_) {
      DeviceScope on(part.device);
      part.timer->stop(static_cast<cudaStream_t>(part.engine->partials().stream));
    }
    // The update, on every GPU at once: all queued before the first wait.
    for (Part& part : parts_) {
      DeviceScope on(part.device);
      part.engine->start_update();
    }
    std::vector<IterationStats> each(parts_.size());
    for (std::size_t g = 0; g < parts_.size(); ++g) {
      DeviceScope on(parts_[g].device);
      parts_[g].engine->finish_update(each[g]);
    }
    // The totals are the same on every GPU; the phases are the slowest GPU's.
    stats.changed = each[0].changed;
    stats.shift = each[0].shift;
    stats.inertia = each[0].inertia;
    stats.rechecked = stats.rechecked_all = 0;
    for (std::size_t g = 0; g < parts_.size(); ++g) {
      DeviceScope on(parts_[g].device);
      const IterationStats& s = each[g];
      stats.h2d = std::max(stats.h2d, s.h2d);
      stats.kernel = std::max(stats.kernel, s.kernel);
      stats.d2h = std::max(stats.d2h, s.d2h);
      stats.cpu = std::max(stats.cpu, s.cpu);
      stats.allreduce = std::max(stats.allreduce, parts_[g].timer->seconds());
      if (s.rechecked >= 0) stats.rechecked += s.rechecked;
      if (s.rechecked_all >= 0) stats.rechecked_all += s.rechecked_all;
    }
    if (each[0].rechecked < 0) stats.rechecked = stats.rechecked_all = -1;
  }

  void read_centroids(std::vector<T>& out) override {
    DeviceScope on(parts_[0].device);
    parts_[0].engine->read_centroids(out);
  }

  void final_labels(std::vector<std::int32_t>& out) override {
    out.clear();
    std::vector<std::int32_t> part_labels;
    for (Part& part : parts_) {
      DeviceScope on(part.device);
      part.engine->final_labels(part_labels);
      out.insert(out.end(), part_labels.begin(), part_labels.end());
    }
  }

  std::string device() const override {
    DeviceScope on(parts_[0].device);
    return strprintf("%zu x %s", parts_.size(), parts_[0].engine->device().c_str());
  }
  // The whole problem's largest |x|, when the caller has it (registry: the range check).
  void set_whole(const Whole& whole) override { whole_ = whole; }
  bool on_gpu() const override { return true; }
  std::string path() const override { return parts_[0].engine->path(); }
  std::vector<std::pair<std::string, std::string>> plan() const override { return parts_[0].engine->plan(); }
  int block() const override { return parts_[0].engine->block(); }
  int gpus() const override { return static_cast<int>(parts_.size()); }

 private:
  struct Part {
    int device = 0;
    Dataset<T> rows;  // a view of the caller's rows
    std::unique_ptr<Engine<T>> engine;
    std::unique_ptr<cuda::EventPair> timer;  // around the all-reduce on this GPU's stream
  };
  const Implementation& impl_;
  std::vector<Part> parts_;
  std::unique_ptr<cuda::NcclComms> comms_;
  Whole whole_;
};

}  // namespace

namespace {

// The partials of one rank's GPU, all-reduced with the other ranks' by NCCL on the engine's
// stream; the communicator's id goes from rank 0 to the others through MPI.
class NcclPartialsSum final : public PartialsSum {
 public:
  explicit NcclPartialsSum(Team& team) {
    const cuda::NcclApi& api = cuda::nccl();
    ncclUniqueId id{};
    if (team.rank() == 0) NCCL_CHECK(api.get_unique_id(&id));
    std::vector<unsigned char> all;
    std::vector<std::size_t> counts;
    team.all_gather(&id, team.rank() == 0 ? sizeof id : 0, all, counts);
    if (all.size() != sizeof id) throw DeviceError("internal: the NCCL id did not arrive from rank 0");
    std::memcpy(&id, all.data(), sizeof id);
    comms_ = std::make_unique<cuda::NcclComms>(id, team.rank(), team.size());
  }
  double sum(const Partials& p) override {
    if (p.device < 0) throw DeviceError("internal: host partials reached the NCCL sum");
    const auto stream = static_cast<cudaStream_t>(p.stream);
    const cuda::NcclApi& api = cuda::nccl();
    timer_.start(stream);
    NCCL_CHECK(api.group_start());
    for (const Partials::Buffer& b : p.buffers)
      NCCL_CHECK(api.all_reduce(b.data, b.data, b.count, ncclUint64, ncclSum, (*comms_)[0], stream));
    NCCL_CHECK(api.group_end());
    timer_.stop(stream);
    return timer_.seconds();
  }

 private:
  std::unique_ptr<cuda::NcclComms> comms_;
  cuda::EventPair timer_;
};

}  // namespace

std::unique_ptr<PartialsSum> nccl_partials_sum(Team& team) { return std::make_unique<NcclPartialsSum>(team); }

void select_rank_device(Team& team) {
  int local = team.rank();
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* s = std::getenv(v)) {
      local = std::atoi(s);
      break;
    }
  const int count = device_count();
  if (count == 0) throw DeviceError("under mpirun a GPU implementation needs a GPU on every rank's node");
  CUDA_CHECK(cudaSetDevice(local % count));
}

template <class T>
std::unique_ptr<Engine<T>> make_multi_gpu(const Implementation& impl, const Params& params) {
  return std::make_unique<MultiGpuEngine<T>>(impl, params);
}

template std::unique_ptr<Engine<float>> make_multi_gpu(const Implementation&, const Params&);
template std::unique_ptr<Engine<double>> make_multi_gpu(const Implementation&, const Params&);

}  // namespace km
