#include "dist/team.hpp"

#include <algorithm>
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

std::uint64_t fnv1a(const void* bytes, std::size_t count, std::uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(bytes);
  for (std::size_t i = 0; i < count; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

Verdict agree(Team& team, int status, const std::vector<std::uint64_t>& digests) {
  Verdict v;
  v.digests0 = digests;
  if (team.size() == 1) {
    v.status = status;
    v.failed_rank = status ? 0 : -1;
    v.every_rank_failed = status != 0;
    return v;
  }
  // Each rank's status, then its digests (the same count on every rank: the caller's).
  std::vector<std::uint64_t> mine{static_cast<std::uint64_t>(status)};
  mine.insert(mine.end(), digests.begin(), digests.end());
  const std::vector<std::uint64_t> all = gather_all(team, mine);
  const std::size_t per = mine.size();
  int failed = 0;
  for (int r = 0; r < team.size(); ++r) {
    const auto s = static_cast<int>(all[static_cast<std::size_t>(r) * per]);
    if (s == 0) continue;
    ++failed;
    if (v.failed_rank < 0) {
      v.failed_rank = r;
      v.status = s;
    }
  }
  v.every_rank_failed = failed == team.size();
  if (v.status) return v;
  v.digests0.assign(all.begin() + 1, all.begin() + static_cast<std::ptrdiff_t>(per));
  for (int r = 1; r < team.size() && v.differing_rank < 0; ++r) {
    const auto at = all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * per);
    if (!std::equal(at + 1, at + static_cast<std::ptrdiff_t>(per), v.digests0.begin())) {
      v.differing_rank = r;
      v.digests.assign(at + 1, at + static_cast<std::ptrdiff_t>(per));
    }
  }
  return v;
}

int owner_of(std::size_t row, std::size_t total, int ranks) {
  for (int r = 0; r < ranks; ++r)
    if (split_rows(total, r, ranks).owns(row)) return r;
  return ranks - 1;
}

}  // namespace km
