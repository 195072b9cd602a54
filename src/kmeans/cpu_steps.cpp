#include "kmeans/cpu_steps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace km {

template <class T>
double finalize_centroids(const double* sums, const double* carries, const double* counts, std::size_t k,
                          std::size_t d, T* centroids, bool unit) {
  std::vector<T> mean(d);
  return finish_update(k, d, centroids, unit, mean.data(), [&](std::size_t c, T* m) {
    if (counts[c] == 0) return false;  // empty cluster keeps its previous centroid
    for (std::size_t j = 0; j < d; ++j) m[j] = static_cast<T>((sums[c * d + j] + carries[c * d + j]) / counts[c]);
    return true;
  });
}

template <class T>
double inertia(const Dataset<T>& data, const T* centroids, const std::int32_t* labels) {
  std::vector<double> chunk_sums;
  return inertia_chunks(data, centroids, labels, chunk_sums);
}

template <class T>
double inertia_chunks(const Dataset<T>& data, const T* centroids, const std::int32_t* labels,
                      std::vector<double>& chunk_sums) {
  // Chunks of about 2^18 values, a power of two objects (a function of d only, so the sum is
  // the same on any thread count, and a chunk never straddles two MPI ranks, whose rows start
  // at multiples of kSumChunk): wide data gets enough chunks for every core (60,000 x 784 was
  // 4 chunks of 16,384 objects, 20 ms on a 16-core box).
  //
  // Each object's squared distance is seq's (squared_distance_double: one chain of adds over
  // d, in order), and the chunk adds them in object order; four objects' chains run side by
  // side, because one chain is latency-bound (4 cycles an add: 60,000 x 784 took 4 ms on 16
  // cores, 30 ms on 2); the same bits.
  const std::size_t chunk = inertia_chunk(data.d), d = data.d, n = data.n;
  const std::size_t chunks = (n + chunk - 1) / chunk;
  const bool weighted = data.weighted();  // each object's term times its weight (1: the same bits)
  chunk_sums.assign(chunks, 0.0);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t end = std::min(n, (c + 1) * chunk);
    std::size_t i = c * chunk;
    double s = 0;
    for (; i + 4 <= end; i += 4) {
      const T *x0 = data.row(i), *x1 = data.row(i + 1), *x2 = data.row(i + 2), *x3 = data.row(i + 3);
      const T* c0 = centroids + static_cast<std::size_t>(labels[i]) * d;
      const T* c1 = centroids + static_cast<std::size_t>(labels[i + 1]) * d;
      const T* c2 = centroids + static_cast<std::size_t>(labels[i + 2]) * d;
      const T* c3 = centroids + static_cast<std::size_t>(labels[i + 3]) * d;
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (std::size_t j = 0; j < d; ++j) {
        const double e0 = static_cast<double>(x0[j]) - static_cast<double>(c0[j]);
        const double e1 = static_cast<double>(x1[j]) - static_cast<double>(c1[j]);
        const double e2 = static_cast<double>(x2[j]) - static_cast<double>(c2[j]);
        const double e3 = static_cast<double>(x3[j]) - static_cast<double>(c3[j]);
        a0 += e0 * e0;
        a1 += e1 * e1;
        a2 += e2 * e2;
        a3 += e3 * e3;
      }
      if (weighted) {
        s += static_cast<double>(data.weights[i]) * a0;
        s += static_cast<double>(data.weights[i + 1]) * a1;
        s += static_cast<double>(data.weights[i + 2]) * a2;
        s += static_cast<double>(data.weights[i + 3]) * a3;
      } else {
        s += a0;
        s += a1;
        s += a2;
        s += a3;
      }
    }
    for (; i < end; ++i)
      s += static_cast<double>(data.weight(i)) *
           squared_distance_double(data.row(i), centroids + static_cast<std::size_t>(labels[i]) * d, d);
    chunk_sums[c] = s;
  }
  double total = 0;
  for (double v : chunk_sums) total += v;
  return total;
}

template <class T>
double max_abs_value(const Dataset<T>& data) {
  // Blocks of values, each reduced in vector lanes (omp simd): the max of |x|, and the sum of
  // x * 0, which is 0 for finite values and NaN once one is infinite or NaN. A scalar loop
  // that tested finiteness per value ran at 5 GB/s a core (10 ms per 376 MB fit on 16 cores;
  // every fit makes this pass); an "any non-finite" integer flag in the vector loop, at 40%
  // of this speed.
  const std::size_t total = data.n * data.d;
  const T* v = data.values.data();
  constexpr std::size_t kBlock = 8192;
  const std::size_t blocks = (total + kBlock - 1) / kBlock;
  T m = 0;
  unsigned bad = 0;
#pragma omp parallel for reduction(max : m) reduction(| : bad) schedule(static)
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t end = std::min(total, (b + 1) * kBlock);
    T bm = 0, zero = 0;
#pragma omp simd reduction(max : bm) reduction(+ : zero)
    for (std::size_t i = b * kBlock; i < end; ++i) {
      const T a = std::abs(v[i]);
      zero += v[i] * T(0);
      bm = a > bm ? a : bm;
    }
    m = std::max(m, bm);
    bad |= zero == 0 ? 0u : 1u;
  }
  return bad ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(m);
}

template double max_abs_value(const Dataset<float>&);
template double max_abs_value(const Dataset<double>&);
template double finalize_centroids(const double*, const double*, const double*, std::size_t, std::size_t, float*,
                                   bool);
template double finalize_centroids(const double*, const double*, const double*, std::size_t, std::size_t, double*,
                                   bool);
template double inertia(const Dataset<float>&, const float*, const std::int32_t*);
template double inertia(const Dataset<double>&, const double*, const std::int32_t*);
template double inertia_chunks(const Dataset<float>&, const float*, const std::int32_t*, std::vector<double>&);
template double inertia_chunks(const Dataset<double>&, const double*, const std::int32_t*, std::vector<double>&);

}  // namespace km
