// omp: the fast CPU implementation.
//  - static schedule: each thread owns one contiguous range of objects;
//  - per-thread partial sums and counts in the thread's own page-aligned buffers (no
//    atomics, no false sharing), merged once per iteration. The sums are 64-bit fixed point
//    (fixed_point.hpp), so the result is the same bits on any thread count, on any number
//    of MPI ranks, and equals the GPU rungs' device update;
//  - distances vectorised across centroids: the centroids are kept coordinate-major
//    ([d][K], K padded), so for one object the loop over centroids is unit-stride and
//    each distance is still summed over coordinates in seq's order. That keeps every
//    distance bit-identical to seq's (no reassociation), hence the same labels;
//  - centroids processed in chunks that stay in L1 while a block of objects streams by;
//  - the assignment kernel is compiled for AVX-512, AVX2 and baseline x86-64 and picked
//    at run time, so the default build stays portable.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/progress.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/fixed_point.hpp"
#include "kmeans/implementation.hpp"

namespace km {

namespace {

constexpr std::size_t kLane = 16;         // K is padded to a multiple of this
constexpr std::size_t kBlock = 64;        // objects per block
constexpr std::size_t kChunkBytes = 32768;  // target size of one centroid chunk
constexpr std::size_t kInterruptChunk = 1024;  // objects between checks for an interruption (a multiple of kBlock)

std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

// Distances from kGroup objects (rows of x, stride d) to the VB/sizeof(T) consecutive
// centroids of ct ([d][kp], already offset to the first of them) that fill one vector
// register of VB bytes, into out[r * out_stride + lane]. Element-wise vector arithmetic
// rounds exactly like the scalar code, so every distance keeps seq's order of operations.
// Four independent sums hide the add latency and share each centroid load; they are
// named variables, not an array, so that they stay in registers.
template <class T, int VB>
[[gnu::always_inline]] inline void vector_distances4(const T* __restrict x, std::size_t d, const T* __restrict ct,
                                                     std::size_t kp, T* __restrict out, std::size_t out_stride) {
  typedef T V __attribute__((vector_size(VB)));
  V a0{}, a1{}, a2{}, a3{};
  const T *x0 = x, *x1 = x + d, *x2 = x + 2 * d, *x3 = x + 3 * d;
  for (std::size_t j = 0; j < d; ++j) {
    V row;
    std::memcpy(&row, ct + j * kp, sizeof row);
    const V e0 = x0[j] - row, e1 = x1[j] - row, e2 = x2[j] - row, e3 = x3[j] - row;
    a0 += e0 * e0;
    a1 += e1 * e1;
    a2 += e2 * e2;
    a3 += e3 * e3;
  }
  std::memcpy(out, &a0, sizeof(V));
  std::memcpy(out + out_stride, &a1, sizeof(V));
  std::memcpy(out + 2 * out_stride, &a2, sizeof(V));
  std::memcpy(out + 3 * out_stride, &a3, sizeof(V));
}

template <class T, int VB>
[[gnu::always_inline]] inline void vector_distances1(const T* __restrict x, std::size_t d, const T* __restrict ct,
                                                     std::size_t kp, T* __restrict out) {
  typedef T V __attribute__((vector_size(VB)));
  V a{};
  for (std::size_t j = 0; j < d; ++j) {
    V row;
    std::memcpy(&row, ct + j * kp, sizeof row);
    const V e = x[j] - row;
    a += e * e;
  }
  std::memcpy(out, &a, sizeof(V));
}

// Continues the running minimum over one chunk of centroids. Equivalent to scanning in
// centroid order with strict '<' (the lowest index wins ties): the chunk's minimum
// replaces the best only if strictly smaller, and then its first occurrence is taken.
// Padding lanes hold +Inf (their centroids' coordinates are +Inf), so the minimum runs
// over whole kLane groups: a vector minimum, a tree within the group, then a bit mask of
// the lanes equal to it.
template <class T>
[[gnu::always_inline]] inline void chunk_argmin(const T* __restrict dist, std::size_t c0, std::size_t cnp,
                                                std::int32_t& label, T& best) {
  T m[kLane];
  for (std::size_t l = 0; l < kLane; ++l) m[l] = dist[l];
  for (std::size_t c = kLane; c < cnp; c += kLane)
    for (std::size_t l = 0; l < kLane; ++l) m[l] = dist[c + l] < m[l] ? dist[c + l] : m[l];
  for (std::size_t w = kLane / 2; w >= 1; w /= 2)
    for (std::size_t l = 0; l < w; ++l) m[l] = m[l + w] < m[l] ? m[l + w] : m[l];
  const T low = m[0];
  if (c0 == 0) {  // seq's start: centroid 0, so a label is set even if no lane equals low (NaN)
    label = 0;
    best = dist[0];
  } else if (!(low < best)) {
    return;
  }
  for (std::size_t c = 0; c < cnp; c += kLane) {
    unsigned mask = 0;
    for (std::size_t l = 0; l < kLane; ++l) mask |= static_cast<unsigned>(dist[c + l] == low) << l;
    if (mask) {
      label = static_cast<std::int32_t>(c0 + c + static_cast<std::size_t>(__builtin_ctz(mask)));
      best = low;
      return;
    }
  }
}

constexpr int kGroup = 4;  // objects per register group

// Labels of `count` objects starting at x (row-major), against centroids ct ([d][kp]),
// with VB-byte vectors. dist: kGroup * kc scratch values; best: count scratch values.
template <class T, int VB>
[[gnu::always_inline]] inline void assign_block_impl(const T* __restrict x, std::size_t count, std::size_t d,
                                                     const T* __restrict ct, std::size_t k, std::size_t kp,
                                                     std::size_t kc, std::int32_t* __restrict labels,
                                                     T* __restrict best, T* __restrict dist) {
  constexpr std::size_t width = VB / sizeof(T);
  static_assert(kLane % width == 0, "the padding must hold whole vectors");
  for (std::size_t c0 = 0; c0 < k; c0 += kc) {
    const std::size_t cn = std::min(kc, k - c0);
    const std::size_t cnp = round_up(cn, kLane);
    std::size_t i = 0;
    for (; i + kGroup <= count; i += kGroup) {
      for (std::size_t s0 = 0; s0 < cnp; s0 += width)
        vector_distances4<T, VB>(x + i * d, d, ct + c0 + s0, kp, dist + s0, kc);
      for (int r = 0; r < kGroup; ++r) chunk_argmin(dist + r * kc, c0, cnp, labels[i + r], best[i + r]);
    }
    for (; i < count; ++i) {
      for (std::size_t s0 = 0; s0 < cnp; s0 += width)
        vector_distances1<T, VB>(x + i * d, d, ct + c0 + s0, kp, dist + s0);
      chunk_argmin(dist, c0, cnp, labels[i], best[i]);
    }
  }
}

// One build per instruction set, chosen once at run time, so the default build stays
// portable while a modern CPU gets its full vector width.
template <class T>
using AssignFn = void (*)(const T*, std::size_t, std::size_t, const T*, std::size_t, std::size_t, std::size_t,
                          std::int32_t*, T*, T*);

#define KM_ASSIGN_VARIANT(NAME, ATTR, VB)                                                                     \
  template <class T>                                                                                         \
  ATTR void NAME(const T* x, std::size_t count, std::size_t d, const T* ct, std::size_t k, std::size_t kp,   \
                 std::size_t kc, std::int32_t* labels, T* best, T* dist) {                                   \
    assign_block_impl<T, VB>(x, count, d, ct, k, kp, kc, labels, best, dist);                               \
  }
KM_ASSIGN_VARIANT(assign_block_baseline, , 16)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
KM_ASSIGN_VARIANT(assign_block_avx2, __attribute__((target("avx2"))), 32)
KM_ASSIGN_VARIANT(assign_block_avx512, __attribute__((target("avx512f"))), 64)
#else
KM_ASSIGN_VARIANT(assign_block_avx2, , 16)
KM_ASSIGN_VARIANT(assign_block_avx512, , 16)
#endif
#undef KM_ASSIGN_VARIANT

template <class T>
AssignFn<T> pick_assign_block() {
  return pick_by_isa<AssignFn<T>>(assign_block_avx512<T>, assign_block_avx2<T>, assign_block_baseline<T>);
}

template <class T>
class OmpEngine final : public Engine<T> {
 public:
  explicit OmpEngine(const Params& params)
      : threads_(params.threads > 0 ? params.threads : omp_get_max_threads()),
        unit_(params.metric != Metric::euclidean) {}

  bool partable() const override { return true; }
  void set_whole(const Whole& whole) override { whole_ = whole; }

  void setup(const Dataset<T>& data, const std::vector<T>& initial) override {
    data_ = &data;
    d_ = data.d;
    k_ = initial.size() / d_;
    kp_ = round_up(k_, kLane);
    kc_ = std::clamp(kChunkBytes / (d_ * sizeof(T)) / kLane * kLane, kLane, kp_);
    if (whole_.n == 0) {
      const WeightRange w = check_weights(data);
      whole_ = {data.n, max_abs_value(data), w.max, w.min};
    }
    const double reach = centroid_reach(initial.data(), initial.size() / d_, d_, unit_);
    scales_ = fixed_scales(whole_.max_abs, whole_.n, d_, reach, whole_.max_weight, whole_.min_weight);
    // below 2^51 after rounding: to_fixed_small (weighted: the addends are w x)
    small_addends_ = whole_.max_abs * std::fmax(whole_.max_weight, 1.0) * scales_.sum < 0x1p50;
    centroids_ = initial;
    ct_ = HostBuffer<T>(d_ * kp_);
    // Padding centroids sit at +Inf: their distances are +Inf and never win.
    std::fill_n(ct_.data(), d_ * kp_, std::numeric_limits<T>::infinity());
    transpose_centroids();
    labels_.assign(data.n, -1);
    totals_.assign(k_ * d_ + k_ + 2, 0);
    partial_sums_.resize(threads_);
    partial_counts_.resize(threads_);
#pragma omp parallel num_threads(threads_)
    {  // each thread allocates (and so first-touches) its own partials
      const int t = omp_get_thread_num();
      partial_sums_[t] = HostBuffer<std::int64_t>(k_ * d_);
      partial_counts_[t] = HostBuffer<std::int64_t>(k_);
    }
  }

  void iterate(IterationStats& stats) override {
    accumulate();
    this->apply(stats);
  }

  void accumulate() override {
    Stopwatch watch;
    const std::size_t n = data_->n, d = d_, k = k_;
    const double scale = scales_.sum, inertia_scale = scales_.inertia, weight_scale = scales_.weight;
    const bool weighted = data_->weighted();
    std::int64_t changed = 0, inertia = 0;
    int used = 1;
#pragma omp parallel num_threads(threads_) reduction(+ : changed, inertia)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#pragma omp single
      used = nt;
      std::int64_t* sums = partial_sums_[t].data();
      std::int64_t* counts = partial_counts_[t].data();
      std::fill_n(sums, k * d, 0);
      std::fill_n(counts, k, 0);
      std::vector<T> dist(kGroup * kc_), best(kBlock);
      std::int32_t block_labels[kBlock];
      const std::size_t begin = n * t / nt, end = n * (t + 1) / nt;  // static schedule
      for (std::size_t i0 = begin; i0 < end; i0 += kBlock) {
        // An interruption (progress.hpp): this thread stops; check_interrupt() below throws.
        if ((i0 - begin) % kInterruptChunk == 0 && progress::interrupt_requested()) break;
        const std::size_t count = std::min(kBlock, end - i0);
        assign_(data_->row(i0), count, d, ct_.data(), k, kp_, kc_, block_labels, best.data(), dist.data());
        for (std::size_t b = 0; b < count; ++b) {
          const std::int32_t label = block_labels[b];
          if (label != labels_[i0 + b]) ++changed;
          labels_[i0 + b] = label;
          const T* x = data_->row(i0 + b);
          std::int64_t* s = sums + static_cast<std::size_t>(label) * d;
          if (weighted) {  // w x, rounded once (exact for float data), as the GPU's weighted_fixed
            const double w = static_cast<double>(data_->weights[i0 + b]);
            inertia += to_fixed(w * static_cast<double>(best[b]), inertia_scale);
            for (std::size_t j = 0; j < d; ++j) s[j] += to_fixed(w * static_cast<double>(x[j]), scale);
            counts[label] += to_fixed(w, weight_scale);
            continue;
          }
          inertia += to_fixed(static_cast<double>(best[b]), inertia_scale);
          if (small_addends_)
            for (std::size_t j = 0; j < d; ++j) s[j] += to_fixed_small(static_cast<double>(x[j]), scale);
          else
            for (std::size_t j = 0; j < d; ++j) s[j] += to_fixed(static_cast<double>(x[j]), scale);
          ++counts[label];
        }
      }
    }
    progress::check_interrupt();
    merge_partials(used);
    totals_[k * d + k] = changed;
    totals_[k * d + k + 1] = inertia;
    cpu_seconds_ = watch.seconds();
  }

  Partials partials() override {
    const std::size_t kd = k_ * d_;
    return {{{totals_.data(), kd}, {totals_.data() + kd, k_}, {totals_.data() + kd + k_, 1},
             {totals_.data() + kd + k_ + 1, 1}}};
  }

  void finish_update(IterationStats& stats) override {
    HostPhase phase(stats.cpu);
    stats.cpu += cpu_seconds_;
    const std::size_t kd = k_ * d_;
    stats.changed = totals_[kd + k_];
    stats.inertia = static_cast<double>(totals_[kd + k_ + 1]) * scales_.inv_inertia;
    stats.shift = finalize_fixed(totals_.data(), totals_.data() + kd, k_, d_, scales_.inv_sum, centroids_.data(),
                                 unit_, scales_.inv_weight);
    transpose_centroids();
  }

  void read_centroids(std::vector<T>& out) override { out = centroids_; }

  void final_labels(std::vector<std::int32_t>& out) override {
    const std::size_t n = data_->n;
    out.resize(n);
#pragma omp parallel num_threads(threads_)
    {
      std::vector<T> dist(kGroup * kc_), best(kBlock);
      bool stop = false;  // an interruption: this thread skips the rest
#pragma omp for schedule(static)
      for (std::size_t i0 = 0; i0 < n; i0 += kBlock) {
        if (i0 % kInterruptChunk == 0 && progress::interrupt_requested()) stop = true;
        if (!stop)
          assign_(data_->row(i0), std::min(kBlock, n - i0), d_, ct_.data(), k_, kp_, kc_, out.data() + i0,
                  best.data(), dist.data());
      }
    }
    progress::check_interrupt();
  }

  int threads() const override { return threads_; }

 private:
  void transpose_centroids() { to_coord_major(centroids_.data(), k_, d_, ct_.data(), kp_); }

  void merge_partials(int used) {  // integers: any grouping gives the same totals
    const std::size_t kd = k_ * d_;
    std::int64_t* sums = totals_.data();
    std::int64_t* counts = sums + kd;
#pragma omp parallel for num_threads(threads_) schedule(static) if (kd > 4096)
    for (std::size_t i = 0; i < kd; ++i) {
      std::int64_t s = 0;
      for (int t = 0; t < used; ++t) s += partial_sums_[t][i];
      sums[i] = s;
    }
    for (std::size_t c = 0; c < k_; ++c) {
      std::int64_t s = 0;
      for (int t = 0; t < used; ++t) s += partial_counts_[t][c];
      counts[c] = s;
    }
  }

  int threads_;
  bool unit_;  // the centroids are re-normalised (cosine, dot)
  AssignFn<T> assign_ = pick_assign_block<T>();
  const Dataset<T>* data_ = nullptr;
  Whole whole_;
  FixedScales scales_;
  bool small_addends_ = false;  // every x * 2^E below 2^50 (N above ~2^11): the vectorised rounding
  std::size_t d_ = 0, k_ = 0, kp_ = 0, kc_ = 0;
  std::vector<T> centroids_;
  HostBuffer<T> ct_;
  std::vector<std::int32_t> labels_;
  std::vector<std::int64_t> totals_;  // [k*d sums | k counts | changed | inertia], fixed point
  double cpu_seconds_ = 0;            // accumulate()'s time, reported by apply()
  std::vector<HostBuffer<std::int64_t>> partial_sums_;
  std::vector<HostBuffer<std::int64_t>> partial_counts_;
};

// OmpEngine's buffers (setup and accumulate): the centroids, their [d][K] copy with K padded to
// kLane (at K = 2, 8 times the centroids), the labels, the fixed-point totals, and per thread
// its partial sums and counts (page-aligned) and its distance and best scratch.
double omp_host_bytes(std::size_t n, std::size_t k, std::size_t d, std::size_t elem, int threads) {
  const double page = 4096, kd = static_cast<double>(k) * static_cast<double>(d), e = static_cast<double>(elem);
  const std::size_t kp = round_up(k, kLane);
  const std::size_t kc = std::clamp(kChunkBytes / (d * elem) / kLane * kLane, kLane, kp);
  const double shared = kd * e + static_cast<double>(d) * static_cast<double>(kp) * e + page +
                        4.0 * static_cast<double>(n) + 8.0 * (kd + static_cast<double>(k) + 2);
  const double per_thread = 8.0 * (kd + static_cast<double>(k)) + 2 * page +
                            e * static_cast<double>(kGroup * kc + kBlock);
  return shared + static_cast<double>(threads) * per_thread;
}

}  // namespace

extern const Implementation omp_implementation = with_host_bytes(
    describe<OmpEngine>("omp", "OpenMP CPU: static schedule, per-thread partial sums, vectorised distances",
                        Where::cpu),
    omp_host_bytes);

}  // namespace km
