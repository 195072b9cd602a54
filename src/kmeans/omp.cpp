// omp: the fast CPU implementation.
//  - static schedule: each thread owns one contiguous range of objects;
//  - per-thread partial sums and counts in the thread's own page-aligned buffers (no
//    atomics, no false sharing), merged once per iteration;
//  - distances vectorised across centroids: the centroids are kept coordinate-major
//    ([d][K], K padded), so for one object the loop over centroids is unit-stride and
//    each distance is still summed over coordinates in seq's order. That keeps every
//    distance bit-identical to seq's (no reassociation), hence the same labels;
//  - centroids processed in chunks that stay in L1 while a block of objects streams by;
//  - the assignment kernel is compiled for AVX-512, AVX2 and baseline x86-64 and picked
//    at run time (target_clones), so the default build stays portable.
#include <omp.h>

#include <algorithm>

#include "kmeans/cpu_steps.hpp"
#include "kmeans/registry.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KM_CLONES
#endif

namespace km {

namespace {

constexpr std::size_t kLane = 16;         // K is padded to a multiple of this
constexpr std::size_t kBlock = 64;        // objects per block
constexpr std::size_t kChunkBytes = 32768;  // target size of one centroid chunk

std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

// Labels of `count` objects starting at x (row-major), against centroids ct ([d][kp]).
// dist: kc scratch values; best: count scratch values.
template <class T>
[[gnu::always_inline]] inline void assign_block_impl(const T* __restrict x, std::size_t count, std::size_t d,
                                                     const T* __restrict ct, std::size_t k, std::size_t kp,
                                                     std::size_t kc, std::int32_t* __restrict labels,
                                                     T* __restrict best, T* __restrict dist) {
  for (std::size_t c0 = 0; c0 < k; c0 += kc) {
    const std::size_t cn = std::min(kc, k - c0);
    const std::size_t cnp = round_up(cn, kLane);
    for (std::size_t i = 0; i < count; ++i) {
      const T* xi = x + i * d;
      for (std::size_t c = 0; c < cnp; ++c) dist[c] = 0;
      for (std::size_t j = 0; j < d; ++j) {
        const T xj = xi[j];
        const T* __restrict row = ct + j * kp + c0;
        for (std::size_t c = 0; c < cnp; ++c) {
          const T diff = xj - row[c];
          dist[c] += diff * diff;
        }
      }
      // Continue the running minimum in centroid order, strict '<': lowest index wins.
      std::size_t c = 0;
      T bd;
      std::int32_t bl;
      if (c0 == 0) {
        bd = dist[0];
        bl = 0;
        c = 1;
      } else {
        bd = best[i];
        bl = labels[i];
      }
      for (; c < cn; ++c) {
        if (dist[c] < bd) {
          bd = dist[c];
          bl = static_cast<std::int32_t>(c0 + c);
        }
      }
      best[i] = bd;
      labels[i] = bl;
    }
  }
}

KM_CLONES void assign_block(const float* x, std::size_t count, std::size_t d, const float* ct, std::size_t k,
                            std::size_t kp, std::size_t kc, std::int32_t* labels, float* best, float* dist) {
  assign_block_impl(x, count, d, ct, k, kp, kc, labels, best, dist);
}
KM_CLONES void assign_block(const double* x, std::size_t count, std::size_t d, const double* ct, std::size_t k,
                            std::size_t kp, std::size_t kc, std::int32_t* labels, double* best, double* dist) {
  assign_block_impl(x, count, d, ct, k, kp, kc, labels, best, dist);
}

template <class T>
class OmpEngine final : public Engine<T> {
 public:
  explicit OmpEngine(const Params& params)
      : threads_(params.threads > 0 ? params.threads : omp_get_max_threads()) {}

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    data_ = &data;
    d_ = data.d;
    k_ = initial.size() / d_;
    kp_ = round_up(k_, kLane);
    kc_ = std::clamp(kChunkBytes / (d_ * sizeof(T)) / kLane * kLane, kLane, kp_);
    centroids_ = initial;
    ct_ = HostBuffer<T>(d_ * kp_);
    std::fill_n(ct_.data(), d_ * kp_, T(0));
    transpose_centroids();
    labels_.assign(data.n, -1);
    sums_.assign(k_ * d_, 0.0);
    counts_.assign(k_, 0);
    partial_sums_.resize(threads_);
    partial_counts_.resize(threads_);
#pragma omp parallel num_threads(threads_)
    {  // each thread allocates (and so first-touches) its own partials
      const int t = omp_get_thread_num();
      partial_sums_[t] = HostBuffer<double>(k_ * d_);
      partial_counts_[t] = HostBuffer<std::int64_t>(k_);
    }
  }

  void iterate(IterationStats& stats) override {
    HostPhase phase(stats.cpu);
    const std::size_t n = data_->n, d = d_, k = k_;
    std::int64_t changed = 0;
    int used = 1;
#pragma omp parallel num_threads(threads_) reduction(+ : changed)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#pragma omp single
      used = nt;
      double* sums = partial_sums_[t].data();
      std::int64_t* counts = partial_counts_[t].data();
      std::fill_n(sums, k * d, 0.0);
      std::fill_n(counts, k, 0);
      std::vector<T> dist(kc_), best(kBlock);
      std::int32_t block_labels[kBlock];
      const std::size_t begin = n * t / nt, end = n * (t + 1) / nt;  // static schedule
      for (std::size_t i0 = begin; i0 < end; i0 += kBlock) {
        const std::size_t count = std::min(kBlock, end - i0);
        assign_block(data_->row(i0), count, d, ct_.data(), k, kp_, kc_, block_labels, best.data(), dist.data());
        for (std::size_t b = 0; b < count; ++b) {
          const std::int32_t label = block_labels[b];
          if (label != labels_[i0 + b]) ++changed;
          labels_[i0 + b] = label;
          ++counts[label];
          const T* x = data_->row(i0 + b);
          double* s = sums + static_cast<std::size_t>(label) * d;
          for (std::size_t j = 0; j < d; ++j) s[j] += static_cast<double>(x[j]);
        }
      }
    }
    merge_partials(used);
    stats.changed = changed;
    stats.shift = finalize_centroids(sums_.data(), counts_.data(), k, d, centroids_.data());
    transpose_centroids();
  }

  void read_centroids(std::vector<T>& out) override { out = centroids_; }

  void final_labels(std::vector<std::int32_t>& out) override {
    const std::size_t n = data_->n;
    out.resize(n);
#pragma omp parallel num_threads(threads_)
    {
      std::vector<T> dist(kc_), best(kBlock);
#pragma omp for schedule(static)
      for (std::size_t i0 = 0; i0 < n; i0 += kBlock)
        assign_block(data_->row(i0), std::min(kBlock, n - i0), d_, ct_.data(), k_, kp_, kc_, out.data() + i0,
                     best.data(), dist.data());
    }
  }

  int threads() const override { return threads_; }

 private:
  void transpose_centroids() {
    for (std::size_t c = 0; c < k_; ++c)
      for (std::size_t j = 0; j < d_; ++j) ct_[j * kp_ + c] = centroids_[c * d_ + j];
  }

  void merge_partials(int used) {
    const std::size_t kd = k_ * d_;
#pragma omp parallel for num_threads(threads_) schedule(static) if (kd > 4096)
    for (std::size_t i = 0; i < kd; ++i) {
      double s = 0;
      for (int t = 0; t < used; ++t) s += partial_sums_[t][i];
      sums_[i] = s;
    }
    for (std::size_t c = 0; c < k_; ++c) {
      std::int64_t s = 0;
      for (int t = 0; t < used; ++t) s += partial_counts_[t][c];
      counts_[c] = s;
    }
  }

  int threads_;
  const Dataset<T>* data_ = nullptr;
  std::size_t d_ = 0, k_ = 0, kp_ = 0, kc_ = 0;
  std::vector<T> centroids_;
  HostBuffer<T> ct_;
  std::vector<std::int32_t> labels_;
  std::vector<double> sums_;
  std::vector<std::int64_t> counts_;
  std::vector<HostBuffer<double>> partial_sums_;
  std::vector<HostBuffer<std::int64_t>> partial_counts_;
};

}  // namespace

template <class T>
std::unique_ptr<Engine<T>> make_omp_engine(const Params& params) {
  return std::make_unique<OmpEngine<T>>(params);
}

template std::unique_ptr<Engine<float>> make_omp_engine(const Params&);
template std::unique_ptr<Engine<double>> make_omp_engine(const Params&);

}  // namespace km
