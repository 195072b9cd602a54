#include "dist/team.hpp"

#include <cstdlib>
#include <cstring>

namespace km {

void Team::all_gather(const void* mine, std::size_t bytes, std::vector<unsigned char>& all,
                      std::vector<std::size_t>& counts) {
  all.resize(bytes);
  if (bytes) std::memcpy(all.data(), mine, bytes);
  counts.assign(1, bytes);
}

void Team::gather_to_root(const void* mine, std::size_t bytes, std::vector<unsigned char>& all) {
  all.resize(bytes);
  if (bytes) std::memcpy(all.data(), mine, bytes);
}

void Team::abort(int code) { std::exit(code); }

Team& solo_team() {
  static Team team;
  return team;
}

RowSplit split_rows(std::size_t total, int rank, int ranks) {
  const std::size_t chunks = (total + kRowGranule - 1) / kRowGranule;
  const auto r = static_cast<std::size_t>(rank), R = static_cast<std::size_t>(ranks);
  const std::size_t first = std::min(total, chunks * r / R * kRowGranule);
  const std::size_t end = std::min(total, chunks * (r + 1) / R * kRowGranule);
  return {first, end - first, total};
}

int owner_of(std::size_t row, std::size_t total, int ranks) {
  for (int r = 0; r < ranks; ++r)
    if (split_rows(total, r, ranks).owns(row)) return r;
  return ranks - 1;
}

}  // namespace km
