// Three well-separated groups of points clustered through the installed library; exits 0 when
// each group is one cluster, the labels of predict are fit's, and bad parameters are refused.
#include <kmeans_gpu/kmeans.hpp>

#include <cstdio>
#include <random>
#include <vector>

int main() {
  const std::size_t per = 1000, d = 4, k = 3;
  std::vector<double> x;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (std::size_t g = 0; g < k; ++g)
    for (std::size_t i = 0; i < per; ++i)
      for (std::size_t j = 0; j < d; ++j) x.push_back(10.0 * static_cast<double>(g) + noise(rng));

  kmeans_gpu::Params p;
  p.n_clusters = static_cast<int>(k);
  p.init = "kmeans++";
  p.seed = 3;
  const auto r = kmeans_gpu::fit(x.data(), k * per, d, p);
  std::printf("kmeans_gpu %s, %s: inertia %.6f after %d iterations\n", kmeans_gpu::version(), r.implementation.c_str(),
              r.inertia, r.n_iter);
  bool ok = true;
  for (std::size_t g = 0; g < k; ++g)
    for (std::size_t i = 0; i < per; ++i) ok = ok && r.labels[g * per + i] == r.labels[g * per];
  ok = ok && r.labels[0] != r.labels[per] && r.labels[per] != r.labels[2 * per] && r.labels[0] != r.labels[2 * per];
  const auto again = kmeans_gpu::predict(x.data(), k * per, d, r.centroids.data(), k);
  ok = ok && again == r.labels;
  // Two problems in one call: each equals its own fit, bit for bit; and the cosine metric.
  std::vector<double> two(x);
  for (double v : x) two.push_back(-v);
  const auto batch = kmeans_gpu::batch_fit(two.data(), 2, k * per, d, p);
  const auto second = kmeans_gpu::fit(two.data() + x.size(), k * per, d, p);
  ok = ok && batch.size() == 2 && batch[0].labels == r.labels && batch[0].centroids == r.centroids &&
       batch[1].labels == second.labels && batch[1].centroids == second.centroids && batch[1].inertia == second.inertia;
  p.metric = "cosine";
  const auto spherical = kmeans_gpu::fit(x.data(), k * per, d, p);
  ok = ok && spherical.inertia >= 0 && spherical.inertia < static_cast<double>(k * per);
  try {
    p.n_clusters = 0;
    kmeans_gpu::fit(x.data(), k * per, d, p);
    ok = false;
  } catch (const kmeans_gpu::InvalidInput& e) {
    std::printf("refused: %s\n", e.what());
  }
  std::puts(ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
