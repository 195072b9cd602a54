// The project's counter-based hash (generated data, seeded draws): (seed, stream, index) ->
// 64 bits, the same on the host and, compiled by nvcc, on the device (k-means||'s draws run
// there over the device's copy of the data and must match the CPU's).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KM_HASH_HD __host__ __device__
#else
#define KM_HASH_HD
#endif

namespace km {

// Deterministic 64-bit hash of (seed, stream, index): splitmix64's finaliser, twice.
KM_HASH_HD inline std::uint64_t hash64(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // A second round decorrelates neighbouring indices further.
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform double in [0, 1) from the hash.
KM_HASH_HD inline double unit_double(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

}  // namespace km
