// Greedy k-means++ (init.hpp): the CPU's steps (CpuPlusPlus: OpenMP over chunks, the
// candidates' distances as vector lanes), the draws' walk, and the driver shared with the GPU's
// steps (src/kmeans/gpu/kmeanspp.cu), so both give the same centres.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "kmeans/cpu_steps.hpp"
#include "kmeans/init.hpp"
#include "kmeans/init_detail.hpp"

namespace km {

using init_detail::fetch_rows;
using init_detail::kLanes;
using init_detail::kMaxPadded;
using init_detail::kPlusPlus;
using init_detail::lane_distances;
using init_detail::lane_distances4;
using init_detail::Lanes;
using init_detail::Uniform;

namespace {

// The candidates' chunk sums over objects [begin, end): s[t] += min(closest[i], w_i times the
// squared distance from object i to candidate t; w_i = 1 unweighted), the distances (in double, summed over j in order) taken from cc
// ([d][padded]) as vector lanes. Built for AVX-512, AVX2 and baseline x86-64, chosen at run time.
template <class T>
[[gnu::always_inline]] inline void candidate_sums_impl(const Dataset<T>& data, std::size_t begin, std::size_t end,
                                                       const double* closest, const double* cc,
                                                       std::size_t padded, std::size_t trials, double* s) {
  const std::size_t d = data.d;
  const T* weights = data.weighted() ? data.weights.data() : nullptr;  // (w = 1: the same bits)
  auto add = [&](std::size_t i, std::size_t g, const Lanes& acc) {
    const double w = weights ? static_cast<double>(weights[i]) : 1.0;
    for (std::size_t l = 0; l < kLanes && g + l < trials; ++l)
      s[g + l] += std::min(closest[i], w * acc[l]);
  };
  std::size_t i = begin;
  // Four objects at a time; each candidate's sum still takes the objects in order.
  for (; i + 4 <= end; i += 4)
    for (std::size_t g = 0; g < padded; g += kLanes) {
      Lanes a[4];
      lane_distances4(data.row(i), d, cc + g, padded, a);
      for (std::size_t r = 0; r < 4; ++r) add(i + r, g, a[r]);
    }
  for (; i < end; ++i)
    for (std::size_t g = 0; g < padded; g += kLanes) {
      Lanes a;
      lane_distances(data.row(i), d, cc + g, padded, a);
      add(i, g, a);
    }
}

template <class T>
using CandidateSums = void (*)(const Dataset<T>&, std::size_t, std::size_t, const double*, const double*,
                               std::size_t, std::size_t, double*);
#define KM_CANDIDATE_VARIANT(NAME, ATTR)                                                                             \
  template <class T>                                                                                                  \
  ATTR void NAME(const Dataset<T>& data, std::size_t begin, std::size_t end, const double* closest,                  \
                 const double* cc, std::size_t padded, std::size_t trials, double* s) {                               \
    candidate_sums_impl<T>(data, begin, end, closest, cc, padded, trials, s);                                         \
  }
KM_CANDIDATE_VARIANT(candidate_sums_baseline, )
KM_CANDIDATE_VARIANT(candidate_sums_avx2, KM_TARGET_AVX2)
KM_CANDIDATE_VARIANT(candidate_sums_avx512, KM_TARGET_AVX512)
#undef KM_CANDIDATE_VARIANT

// closest[i] = min(closest[i], w_i times the squared distance from object i to centre) for i in
// [begin, end) (w_i = 1 unweighted); returns
// their sum in object order. Four objects at a time keep
// four independent add chains in flight; each distance is still summed over j in order.
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
    s += closest[i] = std::min(closest[i], static_cast<double>(data.weight(i)) * a0);
    s += closest[i + 1] = std::min(closest[i + 1], static_cast<double>(data.weight(i + 1)) * a1);
    s += closest[i + 2] = std::min(closest[i + 2], static_cast<double>(data.weight(i + 2)) * a2);
    s += closest[i + 3] = std::min(closest[i + 3], static_cast<double>(data.weight(i + 3)) * a3);
  }
  for (; i < end; ++i) {
    double a = 0;
    for (std::size_t j = 0; j < d; ++j) {
      const double e = static_cast<double>(data.row(i)[j]) - centre[j];
      a += e * e;
    }
    s += closest[i] = std::min(closest[i], static_cast<double>(data.weight(i)) * a);
  }
  return s;
}

template <class T>
CandidateSums<T> pick_candidate_sums() {
  return pick_by_isa<CandidateSums<T>>(candidate_sums_avx512<T>, candidate_sums_avx2<T>, candidate_sums_baseline<T>);
}

}  // namespace

// The walk of one draw (init.hpp: PlusPlusSteps::Draw) over closest[n].
std::size_t walk_chunk(const double* closest, std::size_t n, std::size_t chunk, double r, std::size_t chunk_size) {
  const std::size_t begin = chunk * chunk_size, end = std::min(n, begin + chunk_size);
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

// The CPU's steps: OpenMP over chunks, vector lanes for the candidates. Over a team, each
// rank holds its rows' closest distances and sums its own chunks (whole chunks: split_rows);
// the chunk sums are gathered in rank order, which is chunk order, so every rank sees the
// single process's sums and makes the same choices.
template <class T>
class CpuPlusPlus final : public PlusPlusSteps {
 public:
  // skip_zero: rows of length 0 get no share (init_detail.hpp: skips_zero_rows).
  CpuPlusPlus(const Dataset<T>& local, const RowSplit& split, Team& team, bool skip_zero)
      : data_(local), split_(split), team_(team), skip_zero_(skip_zero), closest_(local.n) {}

  bool weighted() const override { return data_.weighted(); }
  void weights(std::vector<double>& chunk_sums) override {
    std::vector<double> mine;
    chunked_sum(data_.n, mine, [&](std::size_t i) {
      return closest_[i] = skipped(i) ? 0.0 : static_cast<double>(data_.weights[i]);
    });
    chunk_sums = gather_all(team_, mine);
  }

  void start(std::size_t first, std::vector<double>& chunk_sums) override {
    const std::vector<T> centre = fetch_rows(data_, split_, team_, {first});
    std::vector<double> mine;
    chunked_sum(
        data_.n, mine,
        [&](std::size_t i) {
          return closest_[i] = skipped(i) ? 0.0
                                          : static_cast<double>(data_.weight(i)) *
                                                squared_distance_double(data_.row(i), centre.data(), data_.d);
        });
    chunk_sums = gather_all(team_, mine);
  }

  void walk(std::vector<Draw>& draws) override {
    if (team_.size() == 1) {
      for (Draw& w : draws) w.cand = walk_chunk(closest_.data(), data_.n, w.chunk, w.r);
      return;
    }
    // The rank holding each draw's chunk walks it (walk_chunk's first loop); then, as there,
    // on past objects already at a centre, cyclically over the whole data: each rank offers
    // the cyclic distance to its first such object, and the nearest wins.
    const std::size_t n = split_.total, first_chunk = split_.first / kSumChunk;
    const std::size_t chunks = (data_.n + kSumChunk - 1) / kSumChunk;
    std::vector<std::uint64_t> cand(draws.size(), UINT64_MAX);
    for (std::size_t q = 0; q < draws.size(); ++q) {
      const Draw& w = draws[q];
      if (w.chunk < first_chunk || w.chunk >= first_chunk + chunks) continue;
      const std::size_t begin = (w.chunk - first_chunk) * kSumChunk, end = std::min(data_.n, begin + kSumChunk);
      std::size_t c = end - 1;
      double r = w.r;
      for (std::size_t i = begin; i < end; ++i) {
        if (r < closest_[i]) {
          c = i;
          break;
        }
        r -= closest_[i];
      }
      cand[q] = split_.first + c;
    }
    team_.min(cand.data(), cand.size());
    std::vector<std::uint64_t> step(draws.size(), UINT64_MAX);
    for (std::size_t q = 0; q < draws.size(); ++q) {
      const std::size_t c = cand[q];
      auto offer = [&](std::size_t local) {
        const std::size_t global = split_.first + local;
        step[q] = std::min<std::uint64_t>(step[q], global >= c ? global - c : global + n - c);
      };
      std::size_t i = c > split_.first ? std::min(c - split_.first, data_.n) : 0;
      while (i < data_.n && closest_[i] == 0) ++i;
      if (i < data_.n) offer(i);
      if (c > split_.first) {  // wrapping round to this rank's start
        std::size_t w = 0;
        while (w < data_.n && closest_[w] == 0) ++w;
        if (w < data_.n) offer(w);
      }
    }
    team_.min(step.data(), step.size());
    for (std::size_t q = 0; q < draws.size(); ++q) draws[q].cand = (cand[q] + step[q]) % n;
  }

  void candidate_sums(const std::vector<std::size_t>& cands, std::vector<double>& out) override {
    // The candidates' coordinates, in double, coordinate-major [d][padded]: one object's
    // distances to kLanes candidates run as the lanes of a vector, each still summed over the
    // coordinates in order (element-wise arithmetic rounds as the scalar code does).
    const std::size_t n = data_.n, d = data_.d, trials = cands.size();
    const std::size_t padded = (trials + kLanes - 1) / kLanes * kLanes;
    const std::vector<T> rows = fetch_rows(data_, split_, team_, cands);
    coords_.assign(d * padded, 0.0);
    for (std::size_t t = 0; t < trials; ++t)
      for (std::size_t j = 0; j < d; ++j) coords_[j * padded + t] = static_cast<double>(rows[t * d + j]);
    const std::size_t chunks = (n + kSumChunk - 1) / kSumChunk;
    std::vector<double> mine(chunks * trials, 0.0);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t ch = 0; ch < chunks; ++ch)
      if (!progress::interrupt_requested())  // an interruption skips the rest (progress.hpp)
        sums_(data_, ch * kSumChunk, std::min(n, (ch + 1) * kSumChunk), closest_.data(), coords_.data(), padded,
              trials, &mine[ch * trials]);
    progress::check_interrupt();
    out = gather_all(team_, mine);
  }

  void choose(std::size_t centre_index, std::vector<double>& chunk_sums) override {
    const std::size_t n = data_.n, d = data_.d;
    const std::vector<T> row = fetch_rows(data_, split_, team_, {centre_index});
    std::vector<double> centre(d);
    for (std::size_t j = 0; j < d; ++j) centre[j] = static_cast<double>(row[j]);
    const std::size_t chunks = (n + kSumChunk - 1) / kSumChunk;
    std::vector<double> mine(chunks, 0.0);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t ch = 0; ch < chunks; ++ch)
      if (!progress::interrupt_requested())
        mine[ch] = update_closest(data_, ch * kSumChunk, std::min(n, (ch + 1) * kSumChunk), centre.data(),
                                  closest_.data());
    progress::check_interrupt();
    chunk_sums = gather_all(team_, mine);
  }

 private:
  bool skipped(std::size_t i) const { return skip_zero_ && init_detail::zero_row(data_.row(i), data_.d); }

  const Dataset<T>& data_;
  const RowSplit split_;
  Team& team_;
  const bool skip_zero_;
  std::vector<double> closest_, coords_;
  const CandidateSums<T> sums_ = pick_candidate_sums<T>();
};

// fetch(index, out): copies that object's row to out (on every rank, collectively).
// fetch(rows, into): those objects' rows into `into`, in order (on every rank, collectively).
// skip_zero (cosine and dot): no row of length 0 is drawn (init_detail.hpp: draw_nonzero_row).
template <class T, class Fetch>
void pick_kmeanspp(std::size_t n, std::size_t d, std::size_t k, std::uint64_t seed, bool skip_zero,
                   PlusPlusSteps& steps, std::vector<T>& out, Fetch&& fetch) {
  Uniform u{seed, kPlusPlus};
  const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
  if (trials > kMaxPadded) throw UsageError(strprintf("--clusters=%zu: too many for k-means++ here", k));

  std::vector<double> chunk_sums, candidate_sums;  // [chunk], [chunk][candidate]
  auto total = [](const std::vector<double>& sums) {  // in chunk order
    double p = 0;
    for (double s : sums) p += s;
    return p;
  };
  std::vector<PlusPlusSteps::Draw> draws;
  // Draws with probability proportional to closest[i]: the chunk here, the object within it by
  // the steps' walk.
  auto draw = [&](std::size_t count, double potential) {
    draws.resize(count);
    for (auto& w : draws) {
      w.r = u() * potential;
      w.chunk = 0;
      while (w.chunk + 1 < chunk_sums.size() && w.r >= chunk_sums[w.chunk]) w.r -= chunk_sums[w.chunk++];
    }
    steps.walk(draws);
  };
  std::vector<T> row;
  std::vector<std::size_t> chosen;  // the centres' objects, in order
  auto take = [&](std::size_t object) {
    fetch(std::vector<std::size_t>{object}, row);
    std::copy_n(row.begin(), d, out.begin() + static_cast<std::ptrdiff_t>(chosen.size() * d));
    chosen.push_back(object);
  };
  std::size_t first = 0;
  if (steps.weighted()) {  // the first centre in proportion to the weights (0 for rows skipped)
    steps.weights(chunk_sums);
    if (!(total(chunk_sums) > 0)) init_detail::no_direction("kmeans++");
    draw(1, total(chunk_sums));
    first = draws[0].cand;
  } else if (skip_zero) {
    first = init_detail::draw_nonzero_row(n, d, u, {}, fetch, row);
    if (first == n) init_detail::no_direction("kmeans++");
  } else {
    first = u.below(n);
  }
  take(first);
  steps.start(first, chunk_sums);
  double potential = total(chunk_sums);

  std::vector<std::size_t> candidates(trials);
  for (std::size_t c = 1; c < k; ++c) {
    progress::update("k-means++", static_cast<double>(c), static_cast<double>(k), "centres");
    // Draw candidates with probability proportional to the squared distance: the chunk here,
    // the object within it by the steps' walk.
    if (potential <= 0) {  // every object sits on a chosen centre: duplicates are unavoidable
      for (auto& cand : candidates) cand = init_detail::draw_duplicate(n, d, u, skip_zero, chosen, fetch, row);
    } else {
      draw(trials, potential);
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
    take(best);
    steps.choose(best, chunk_sums);
    potential = total(chunk_sums);
  }
}

}  // namespace

namespace init_detail {

template <class T>
std::vector<T> kmeanspp_centres(const Dataset<T>& local, const RowSplit& split, Team& team, const Params& params,
                                bool on_gpu, const T* device_rows) {
  const std::size_t n = split.total, d = local.d;
  const auto k = static_cast<std::size_t>(params.k);
  std::vector<T> out(k * d);
  const std::size_t trials = 2 + static_cast<std::size_t>(std::log(static_cast<double>(k)));
  std::unique_ptr<PlusPlusSteps> steps;
  const bool skip_zero = init_detail::skips_zero_rows(params);
  if (on_gpu && team.size() == 1 && !local.weighted())  // (data on the device: read there)
    steps = gpu_plusplus_steps(local, trials, device_rows ? device_rows : local.device_values, skip_zero);
  else
    steps = std::make_unique<CpuPlusPlus<T>>(local, split, team, skip_zero);
  pick_kmeanspp(n, d, k, params.seed, skip_zero, *steps, out,
                [&](const std::vector<std::size_t>& rows, std::vector<T>& into) {
                  init_detail::fetch_rows_into(local, split, team, rows, into);
                });
  progress::end_stage();
  return out;
}

template std::vector<float> kmeanspp_centres(const Dataset<float>&, const RowSplit&, Team&, const Params&, bool,
                                             const float*);
template std::vector<double> kmeanspp_centres(const Dataset<double>&, const RowSplit&, Team&, const Params&, bool,
                                              const double*);

}  // namespace init_detail

}  // namespace km
