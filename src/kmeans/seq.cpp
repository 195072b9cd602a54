// seq: the trusted reference. Plain, obviously correct, one thread.
#include <algorithm>

#include "common/progress.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/implementation.hpp"

namespace km {

namespace {

// Objects between two checks for an interruption (Ctrl-C in the Python module): one relaxed
// load per chunk; a chunk of K = 2,000 x d = 64 takes about 0.1 s here.
constexpr std::size_t kInterruptChunk = 1024;

template <class T>
class SeqEngine final : public Engine<T> {
 public:
  explicit SeqEngine(const Params& params) : unit_(params.metric != Metric::euclidean) {}
  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    data_ = &data;
    k_ = initial.size() / data.d;
    centroids_ = initial;
    labels_.assign(data.n, -1);  // so the first iteration counts every object as changed
    sums_.assign(k_ * data.d, 0.0);
    carries_.assign(k_ * data.d, 0.0);
    counts_.assign(k_, 0);
  }

  void iterate(IterationStats& stats) override {
    HostPhase phase(stats.cpu);
    const std::size_t n = data_->n, d = data_->d;
    std::fill(sums_.begin(), sums_.end(), 0.0);
    std::fill(carries_.begin(), carries_.end(), 0.0);
    std::fill(counts_.begin(), counts_.end(), 0);
    std::int64_t changed = 0;
    double inertia = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (i % kInterruptChunk == 0) progress::check_interrupt();
      const T* x = data_->row(i);
      T distance = 0;
      const std::int32_t label = nearest_centroid(x, centroids_.data(), k_, d, &distance);
      const double w = static_cast<double>(data_->weight(i));
      inertia += w * static_cast<double>(distance);
      if (label != labels_[i]) ++changed;
      labels_[i] = label;
      add_to_cluster(x, w, d, &sums_[label * d], &carries_[label * d], counts_[label]);
    }
    stats.changed = changed;
    stats.inertia = inertia;
    stats.shift = finalize_centroids(sums_.data(), carries_.data(), counts_.data(), k_, d, centroids_.data(), unit_);
  }

  void read_centroids(std::vector<T>& out) override { out = centroids_; }

  void final_labels(std::vector<std::int32_t>& out) override {
    out.resize(data_->n);
    for (std::size_t i = 0; i < data_->n; ++i) {
      if (i % kInterruptChunk == 0) progress::check_interrupt();
      out[i] = nearest_centroid(data_->row(i), centroids_.data(), k_, data_->d);
    }
  }

 private:
  const bool unit_;  // the centroids are re-normalised (cosine, dot)
  const Dataset<T>* data_ = nullptr;
  std::size_t k_ = 0;
  std::vector<T> centroids_;
  std::vector<std::int32_t> labels_;
  std::vector<double> sums_;
  std::vector<double> carries_;  // the sums' rounding errors (add_to_cluster)
  std::vector<double> counts_;  // weight totals (object counts unweighted)
};

// SeqEngine's buffers: centroids, labels, double sums, their carries and the counts.
double seq_host_bytes(std::size_t n, std::size_t k, std::size_t d, std::size_t elem, int) {
  const double kd = static_cast<double>(k) * static_cast<double>(d);
  return kd * static_cast<double>(elem + 2 * sizeof(double)) + 4.0 * static_cast<double>(n) + 8.0 * static_cast<double>(k);
}

}  // namespace

extern const Implementation seq_implementation = with_host_bytes(
    describe<SeqEngine>("seq", "sequential CPU reference: plain loops, one thread", Where::cpu), seq_host_bytes);

}  // namespace km
