#include "kmeans/params.hpp"

#include <cmath>

#include "common/errors.hpp"

namespace km {

const char* to_string(Init init) {
  switch (init) {
    case Init::first: return "first";
    case Init::random: return "random";
    case Init::kmeanspp: return "kmeans++";
    case Init::kmeans_parallel: return "kmeans||";
    case Init::given: return "file";
  }
  return "?";
}

Init init_from_string(const std::string& name) {
  if (name == "first") return Init::first;
  if (name == "random") return Init::random;
  if (name == "kmeans++") return Init::kmeanspp;
  if (name == "kmeans||" || name == "kmeans-parallel") return Init::kmeans_parallel;
  throw UsageError("--init must be first, random, kmeans++ or kmeans|| (also spelt kmeans-parallel), not '" + name + "'");
}

const char* to_string(Metric metric) {
  switch (metric) {
    case Metric::euclidean: return "euclidean";
    case Metric::cosine: return "cosine";
    case Metric::dot: return "dot";
  }
  return "?";
}

Metric metric_from_string(const std::string& name) {
  if (name == "euclidean") return Metric::euclidean;
  if (name == "cosine") return Metric::cosine;
  if (name == "dot") return Metric::dot;
  throw UsageError("--metric must be euclidean, cosine or dot, not '" + name + "'");
}

void validate(const Params& p) {
  if (p.k < 1) throw UsageError(strprintf("--clusters=%d: need at least 1 cluster", p.k));
  if (p.loops < 1) throw UsageError(strprintf("--loops=%d: need at least 1 loop", p.loops));
  if (!(p.threshold >= 0 && p.threshold <= 1))
    throw UsageError(strprintf("--threshold=%s: must be a fraction in [0, 1]", shortest(p.threshold).c_str()));
  if (p.tol && !(*p.tol >= 0 && std::isfinite(*p.tol)))
    throw UsageError(strprintf("--tol=%s: must be finite and >= 0", shortest(*p.tol).c_str()));
  if (p.block < 32 || p.block > 1024 || p.block % 32 != 0)
    throw UsageError(strprintf("--block=%d: must be a multiple of 32 in 32..1024", p.block));
  if (p.threads < 0) throw UsageError(strprintf("--threads=%d: must be positive", p.threads));
  if (p.gpus < 1) throw UsageError(strprintf("--gpus=%d: must be at least 1", p.gpus));
  if (p.n_init < 1) throw UsageError(strprintf("--n-init=%d: need at least 1 initialisation", p.n_init));
  if (!(p.oversampling > 0 && p.oversampling <= 1e6))
    throw UsageError(strprintf("--oversampling=%s: must be positive (k-means|| draws about that times K objects a "
                               "round), at most 1e6", shortest(p.oversampling).c_str()));
  if (p.init_rounds < 1 || p.init_rounds > kMaxInitRounds)
    throw UsageError(strprintf("--init-rounds=%d: must be in 1..%d", p.init_rounds, kMaxInitRounds));
  if (p.n_init > 1 && p.init != Init::random && p.init != Init::kmeanspp && p.init != Init::kmeans_parallel)
    throw UsageError(strprintf("--n-init=%d: several initialisations need --init=random, kmeans++ or kmeans|| (the "
                               "%s init gives the same centroids every time)",
                               p.n_init, to_string(p.init)));
  if (p.init == Init::given && p.given_centroids.size() != static_cast<std::size_t>(p.k) * p.given_d)
    throw UsageError(strprintf("the given centroids hold %zu values, not K=%d x d=%zu", p.given_centroids.size(), p.k,
                               p.given_d));
}

void check_clusters(int k, std::size_t n) {
  if (k < 1 || static_cast<std::size_t>(k) > n)
    throw UsageError(strprintf("--clusters=%d: must be between 1 and the number of objects (n_samples = %zu)", k, n));
}

}  // namespace km
