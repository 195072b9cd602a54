// The processes that share one run: MPI ranks under `mpirun -np R kmeans ...`, else a team of
// one. Each rank holds a contiguous share of the rows (split_rows); what crosses ranks is
// exact (integer sums) or gathered and combined in rank order, so R ranks give the bits one
// process gives. No MPI type appears here: without MPI the program builds and runs as a team
// of one (src/dist/mpi_team.cpp is compiled only when CMake finds MPI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace km {

class Team {
 public:
  virtual ~Team() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  // In place, element-wise over every rank.
  virtual void sum(std::int64_t*, std::size_t) {}
  virtual void min(std::uint64_t*, std::size_t) {}
  virtual void max(double*, std::size_t) {}
  // Every rank's `bytes` bytes at `mine` (the counts may differ), concatenated in rank order, on
  // every rank; counts[r] receives rank r's byte count.
  virtual void all_gather(const void* mine, std::size_t bytes, std::vector<unsigned char>& all,
                          std::vector<std::size_t>& counts);
  // The same, on rank 0 only (the others' `all` is left empty).
  virtual void gather_to_root(const void* mine, std::size_t bytes, std::vector<unsigned char>& all);
  // Ends every rank's process now with `code` (an error on one rank must not leave the others
  // waiting in a collective).
  virtual void abort(int code);
  // "MPI 3.1 (Open MPI 4.1.4)", or "" for a team of one.
  virtual const char* library() const { return ""; }
};

// The team of one.
Team& solo_team();

// The MPI team when this process was started by an MPI launcher (mpirun sets its variables) and
// the program was built with MPI; MPI is initialised here and finalised when the team goes.
// nullptr otherwise. Only the kmeans executable links MPI (src/dist/mpi_team.cpp, or
// src/dist/no_mpi.cpp without it): the library, the tests and the Python module do not.
std::unique_ptr<Team> mpi_team_if_launched(int* argc, char*** argv);

// A rank's rows: [first, first + count) of `total`. Ranks take whole chunks of kRowGranule
// rows, so every fixed-chunk sum (cpu_steps.hpp's chunked_sum, k-means++'s potentials, the
// inertia) has each chunk on one rank: summed there in object order and combined in chunk
// order, they are the single process's bits.
struct RowSplit {
  std::size_t first = 0, count = 0, total = 0;
  bool owns(std::size_t row) const { return row >= first && row < first + count; }
};
constexpr std::size_t kRowGranule = std::size_t{1} << 14;  // = kSumChunk
RowSplit split_rows(std::size_t total, int rank, int ranks);
// The rank that holds `row`.
int owner_of(std::size_t row, std::size_t total, int ranks);

// Before a run's first collective: every rank's outcome so far (0, or the exit status of an error
// it met) and digests of what must be the same on every rank (its command line, the data's
// shape), compared on every rank. The verdict is the same on every rank, so each can end
// normally, none left waiting in a collective for one that has gone. For a team of one: ok
// unless `status` says otherwise.
struct Verdict {
  int status = 0;              // 0: go on; else every rank's exit status
  int failed_rank = -1;        // the lowest rank whose status was an error (it says why), else -1
  bool every_rank_failed = false;
  int differing_rank = -1;     // the lowest rank whose digests differ from rank 0's, else -1
  std::vector<std::uint64_t> digests0;  // rank 0's digests
  std::vector<std::uint64_t> digests;   // the differing rank's (empty when none differs)
};
Verdict agree(Team& team, int status, const std::vector<std::uint64_t>& digests);

// FNV-1a over bytes, continued from `h` (the digests above).
std::uint64_t fnv1a(const void* bytes, std::size_t count, std::uint64_t h = 1469598103934665603ull);

// Typed helpers over all_gather: every rank's values, in rank order.
template <class V>
std::vector<V> gather_all(Team& team, const std::vector<V>& mine) {
  std::vector<unsigned char> bytes;
  std::vector<std::size_t> counts;
  team.all_gather(mine.data(), mine.size() * sizeof(V), bytes, counts);
  std::vector<V> out(bytes.size() / sizeof(V));
  if (!bytes.empty()) __builtin_memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace km
