// k-means||'s draw (init.hpp), written once for the host and the device.
#pragma once

#include <cstdint>

#include "io/hash.hpp"

namespace km {

// Whether round `round` draws object i of n (closest > 0: not already a candidate): a uniform
// u from (seed, round, i) with u * potential < ell * closest. Written once for the host and
// the device, every product rounded on its own (no contraction), so both draw the same.
KM_HASH_HD inline bool parallel_drawn(std::uint64_t seed, int round, std::uint64_t n, std::uint64_t i, double closest,
                                      double ell, double potential) {
  constexpr std::uint64_t kParallelDraws = 23;
  const double u = unit_double(hash64(seed, kParallelDraws, static_cast<std::uint64_t>(round) * n + i));
#if defined(__CUDA_ARCH__)
  return closest > 0 && __dmul_rn(u, potential) < __dmul_rn(ell, closest);
#else
  return closest > 0 && u * potential < ell * closest;
#endif
}

}  // namespace km
