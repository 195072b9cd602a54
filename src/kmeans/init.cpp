#include "kmeans/init.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "io/generate.hpp"
#include "kmeans/cpu_steps.hpp"

namespace km {

namespace {

enum Stream : std::uint64_t { kRandomPick = 20, kPlusPlus = 21 };

// Seeded sequence of uniform doubles in [0, 1).
struct Uniform {
  std::uint64_t seed, stream, counter = 0;
  double operator()() { return unit_double(hash64(seed, stream, counter++)); }
  std::size_t below(std::size_t n) { return std::min(n - 1, static_cast<std::size_t>((*this)() * n)); }
};

template <class T>
void pick_random(const Dataset<T>& data, std::size_t k, std::uint64_t seed, std::vector<T>& out) {
  // Floyd's algorithm: k distinct indices without an N-sized array.
  Uniform u{seed, kRandomPick};
  std::unordered_set<std::size_t> chosen;
  std::vector<std::size_t> order;
  for (std::size_t j = data.n - k; j < data.n; ++j) {
    std::size_t t = u.below(j + 1);
    if (chosen.insert(t).second) {
      order.push_back(t);
    } else {
      chosen.insert(j);
      order.push_back(j);
    }
  }
  for (std::size_t c = 0; c < k; ++c) std::copy_n(data.row(order[c]), data.d, out.begin() + c * data.d);
}

constexpr std::size_t kLanes = 8, kMaxPadded = 64;  // 2 + ln K candidates: 12 at K = 65536
typedef double Lanes __attribute__((vector_size(kLanes * sizeof(double))));

// The candidates' chunk sums over objects [begin, end): s[t] += min(closest[i], distance from
// object i to candidate t), the distances (in double, summed over j in order) taken from cc
// ([d][padded]) as vector lanes. Built for AVX-512, AVX2 and baseline x86-64, chosen at run time.
template <class T>
[[gnu::always_inline]] inline void candidate_sums_impl(const Dataset<T>& data, std::size_t begin, std::size_t end,
                                                       const double* closest, const double* cc, std::size_t padded,
                                                       std::size_t trials, double* s) {
  const std::size_t d = data.d;
  for (std::size_t i = begin; i < end; ++i) {
    const T* x = data.row(i);
    for (std::size_t g = 0; g < padded; g += kLanes) {
      Lanes acc{};
      for (std::size_t j = 0; j < d; ++j) {
        Lanes c;
        std::memcpy(&c, cc + j * padded + g, sizeof c);
        const Lanes e = static_cast<double>(x[j]) - c;
        acc += e * e;
      }
      for (std::size_t l = 0; l < kLanes && g + l < trials; ++l) s[g + l] += std::min(closest[i], acc[l]);
    }
  }
}

template <class T>
using CandidateSums = void (*)(const Dataset<T>&, std::size_t, std::size_t, const double*, const double*, std::size_t,
                               std::size_t, double*);
#define KM_CANDIDATE_VARIANT(NAME, ATTR)                                                                             \
  template <class T>                                                                                                  \
  ATTR void NAME(const Dataset<T>& data, std::size_t begin, std::size_t end, const double* closest, const double* cc, \
                 std::size_t padded, std::size_t trials, double* s) {                                                 \
    candidate_sums_impl<T>(data, begin, end, closest, cc, padded, trials, s);                                         \
  }
KM_CANDIDATE_VARIANT(candidate_sums_baseline, )
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
KM_CANDIDATE_VARIANT(candidate_sums_avx2, __attribute__((target("avx2"))))
KM_CANDIDATE_VARIANT(candidate_sums_avx512, __attribute__((target("avx512f"))))
#else
KM_CANDIDATE_VARIANT(candidate_sums_avx2, )
KM_CANDIDATE_VARIANT(candidate_sums_avx512, )
#endif
#undef KM_CANDIDATE_VARIANT

// closest[i] = min(closest[i], distance from object i to centre) for i in [begin, end);
// returns their sum in object order. Four objects at a time keep four independent add chains
// in flight; each distance is still summed over j in order.
template <class T>
double update_closest(const Dataset<T>& data, std::size_t begin, std::size_t end, const double* centre,
                      double* closest) {
  const std::size_t d = data.d;
  double s = 0;
  std::size_t i = begin;
  for (; i + 4 <= end; i += 4) {
    const T *x0 = data.row(i), *x1 = x0 + d, *x2 = x1 + d, *x3 = x2 + d;
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (std::size_t j = 0; j < d; ++j) {
      const double c = centre[j];
      const double e0 = static_cast<double>(x0[j]) - c, e1 = static_cast<double>(x1[j]) - c;
      const double e2 = static_cast<double>(x2[j]) - c, e3 = static_cast<double>(x3[j]) - c;
      a0 += e0 * e0;
      a1 += e1 * e1;
      a2 += e2 * e2;
      a3 += e3 * e3;
    }
    s += closest[i] = std::min(closest[i], a0);
    s += closest[i + 1] = std::min(closest[i + 1], a1);
    s += closest[i + 2] = std::min(closest[i + 2], a2);
    s += closest[i + 3] = std::min(closest[i + 3], a3);
  }
  for (; i < end; ++i) {
    double a = 0;
    for (std::size_t j = 0; j < d; ++j) {
      const double e = static_cast<double>(data.row(i)[j]) - centre[j];
      a += e * e;
    }
    s += closest[i] = std::min(closest[i], a);
  }
  return s;
}

template <class T>
CandidateSums<T> pick_candidate_sums() {
  return pick_by_isa<CandidateSums<T>>(candidate_sums_avx512<T>, candidate_sums_avx2<T>, candidate_sums_baseline<T>);
}

}  // namespace

// The walk of one draw (init.hpp: PlusPlusSteps::Draw) over closest[n].
std::size_t walk_chunk(const double* closest, std::size_t n, std::size_t chunk, double r) {
  const std::size_t begin = chunk * kSumChunk, end = std::min(n, begin + kSumChunk);
  std::size_t cand = end - 1;
  for (std::size_t i = begin; i < end; ++i) {
    if (r < closest[i]) {
      cand = i;
      break;
    }
    r -= closest[i];
  }
  // Rounding must not land on an object that already is a centre: move to the next object
  // that is not (one exists, since the potential is positive).
  while (closest[cand] == 0) cand = (cand + 1) % n;
  return cand;
}

namespace {

// The CPU's steps: OpenMP over chunks, vector lanes for the candidates.
template <class T>
class CpuPlusPlus final : public PlusPlusSteps {
 public:
  explicit CpuPlusPlus(const Dataset<T>& data) : data_(data), closest_(data.n) {}

  void start(std::size_t first, std::vector<double>& chunk_sums) override {
    chunked_sum(data_.n, chunk_sums, [&](std::size_t i) {
      return closest_[i] = squared_distance_double(data_.row(i), data_.row(first), data_.d);
    });
  }
  void walk(std::vector<Draw>& draws) override {
    for (Draw& w : draws) w.cand = walk_chunk(closest_.data(), data_.n, w.chunk, w.r);
  }

  void candidate_sums(const std::vector<std::size_t>& cands, std::vector<double>& out) override {
    // The candidates' coordinates, in double, coordinate-major [d][padded]: one object's
    // distances to kLanes candidates run as the lanes of a vector, each still summed over the
    // coordinates in order (element-wise arithmetic rounds as the scalar code does).
    const std::size_t n = data_.n, d = data_.d, trials = cands.size();
    const std::size_t padded = (trials + kLanes - 1) / kLanes * kLanes;
    coords_.assign(d * padded, 0.0);
    for (std::size_t t = 0; t < trials; ++t)
      for (std::size_t j = 0; j < d; ++j) coords_[j * padded + t] = static_cast<double>(data_.row(cands[t])[j]);
    const std::size_t chunks = (n + kSumChunk - 1) / kSumChunk;
    out.assign(chunks * trials, 0.0);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t ch = 0; ch < chunks; ++ch)
      sums_(data_, ch * kSumChunk, std::min(n, (ch + 1) * kSumChunk), closest_.data(), coords_.data(), padded, trials,
            &out[ch * trials]);
  }

  void choose(std::size_t centre_index, std::vector<double>& chunk_sums) override {
    const std::size_t n = data_.n, d = data_.d;
    std::vector<double> centre(d);
    for (std::size_t j = 0; j < d; ++j) centre[j] = static_cast<double>(data_.row(centre_index)[j]);
    const std::size_t chunks = (n + kSumChunk - 1) / kSumChunk;
    chunk_sums.assign(chunks, 0.0);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t ch = 0; ch < chunks; ++ch)
      chunk_sums[ch] = update_closest(data_, ch * kSumChunk, std::min(n, (ch + 1) * kSumChunk), centre.data(),
                                      closest_.data());
  }

 private:
  const Dataset<T>& data_;
  std::vector<double> closest_, coords_;
  const CandidateSums<T> sums_ = pick_candidate_sums<T>();
};

template <class T>
void pick_kmeanspp(const Dataset<T>& data, std::size_t k, std::uint64_t seed, PlusPlusSteps& steps,
                   std::vector<T>& out) {
  const std::size_t n = data.n, d = data.d;
  Uniform u{seed, kPlusPlus};
  const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
  if (trials > kMaxPadded) throw UsageError(strprintf("--clusters=%zu: too many for k-means++ here", k));

  std::size_t first = u.below(n);
  std::copy_n(data.row(first), d, out.begin());
  std::vector<double> chunk_sums, candidate_sums;  // [chunk], [chunk][candidate]
  steps.start(first, chunk_sums);
  auto total = [](const std::vector<double>& sums) {  // in chunk order
    double p = 0;
    for (double s : sums) p += s;
    return p;
  };
  double potential = total(chunk_sums);

  std::vector<std::size_t> candidates(trials);
  std::vector<PlusPlusSteps::Draw> draws;
  for (std::size_t c = 1; c < k; ++c) {
    progress::update("k-means++", static_cast<double>(c), static_cast<double>(k), "centres");
    // Draw candidates with probability proportional to the squared distance: the chunk here,
    // the object within it by the steps' walk.
    if (potential <= 0) {  // every object sits on a chosen centre: duplicates are unavoidable
      for (auto& cand : candidates) cand = u.below(n);
    } else {
      draws.resize(trials);
      for (auto& w : draws) {
        w.r = u() * potential;
        w.chunk = 0;
        while (w.chunk + 1 < chunk_sums.size() && w.r >= chunk_sums[w.chunk]) w.r -= chunk_sums[w.chunk++];
      }
      steps.walk(draws);
      for (std::size_t t = 0; t < trials; ++t) candidates[t] = draws[t].cand;
    }
    // Keep the candidate that lowers the potential most (first one on ties). Every
    // candidate's potential comes from one pass over the data (each object read once for all
    // of them); each chunk's sums run in object order and the chunks add up in order, so the
    // potentials are the bits that one chunked_sum per candidate gives.
    steps.candidate_sums(candidates, candidate_sums);
    const std::size_t chunks = chunk_sums.size();
    std::size_t best = candidates[0];
    double best_potential = INFINITY;
    for (std::size_t t = 0; t < trials; ++t) {
      double p = 0;
      for (std::size_t ch = 0; ch < chunks; ++ch) p += candidate_sums[ch * trials + t];
      if (p < best_potential) {
        best_potential = p;
        best = candidates[t];
      }
    }
    std::copy_n(data.row(best), d, out.begin() + c * d);
    steps.choose(best, chunk_sums);
    potential = total(chunk_sums);
  }
}

}  // namespace

template <class T>
std::vector<T> initial_centroids(const Dataset<T>& data, const Params& params, bool on_gpu) {
  // Given centroids may outnumber the objects (predict labels a single object with K of them).
  if (params.init != Init::given) check_clusters(params.k, data.n);
  const auto k = static_cast<std::size_t>(params.k);
  std::vector<T> out(k * data.d);
  switch (params.init) {
    case Init::first: std::copy_n(data.values.data(), k * data.d, out.begin()); break;
    case Init::random: pick_random(data, k, params.seed, out); break;
    case Init::kmeanspp: {
      const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
      std::unique_ptr<PlusPlusSteps> steps;
      if (on_gpu)
        steps = gpu_plusplus_steps(data, trials);
      else
        steps = std::make_unique<CpuPlusPlus<T>>(data);
      pick_kmeanspp(data, k, params.seed, *steps, out);
      progress::end_stage();
      break;
    }
    case Init::given:
      if (params.given_d != data.d)
        throw UsageError(strprintf("the centroids have %zu coordinates but the data has %zu", params.given_d, data.d));
      for (std::size_t i = 0; i < k * data.d; ++i) out[i] = static_cast<T>(params.given_centroids[i]);
      break;
  }
  return out;
}

template std::vector<float> initial_centroids(const Dataset<float>&, const Params&, bool);
template std::vector<double> initial_centroids(const Dataset<double>&, const Params&, bool);

}  // namespace km
