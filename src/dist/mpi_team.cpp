// The MPI team (built only when CMake finds MPI). Every call is checked: MPI's errors return
// (MPI_ERRORS_RETURN) and become a DeviceError naming the call.
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "common/errors.hpp"
#include "dist/team.hpp"

namespace km {

namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw DeviceError(strprintf("MPI error in %s: %s", call, text));
}
#define KM_MPI(call) check((call), #call)

// MPI counts are int: a gather (per-chunk sums, candidate rows, the labels on rank 0) must stay
// below 2^31 bytes in all, so the labels gather takes up to ~5 * 10^8 objects.
int count_of(std::size_t bytes, const char* what) {
  if (bytes > static_cast<std::size_t>(INT32_MAX))
    throw DeviceError(strprintf("MPI: %s of %zu bytes on one rank is above MPI's 2^31-byte message limit", what,
                                bytes));
  return static_cast<int>(bytes);
}

class MpiTeam final : public Team {
 public:
  MpiTeam(int* argc, char*** argv) {
    int provided = 0;
    KM_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    KM_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    KM_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    KM_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    int major = 0, minor = 0, length = 0;
    MPI_Get_version(&major, &minor);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    MPI_Get_library_version(lib, &length);
    std::string first_line(lib);
    first_line = first_line.substr(0, first_line.find_first_of(",\n"));
    library_ = strprintf("MPI %d.%d (%s)", major, minor, first_line.c_str());
  }
  ~MpiTeam() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void sum(std::int64_t* v, std::size_t n) override {
    KM_MPI(MPI_Allreduce(MPI_IN_PLACE, v, count_of(n * 8, "an all-reduce") / 8, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  }
  void min(std::uint64_t* v, std::size_t n) override {
    KM_MPI(MPI_Allreduce(MPI_IN_PLACE, v, count_of(n * 8, "an all-reduce") / 8, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
  }
  void max(double* v, std::size_t n) override {
    KM_MPI(MPI_Allreduce(MPI_IN_PLACE, v, count_of(n * 8, "an all-reduce") / 8, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  }
  void all_gather(const void* mine, std::size_t bytes, std::vector<unsigned char>& all,
                  std::vector<std::size_t>& counts) override {
    std::vector<int> sizes(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
    int my = count_of(bytes, "a gather");
    KM_MPI(MPI_Allgather(&my, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD));
    std::size_t total = 0;
    counts.assign(sizes.begin(), sizes.end());
    for (int r = 0; r < size_; ++r) {
      offsets[static_cast<std::size_t>(r)] = count_of(total, "a gather");
      total += static_cast<std::size_t>(sizes[static_cast<std::size_t>(r)]);
    }
    count_of(total, "a gather");
    all.resize(total);
    KM_MPI(MPI_Allgatherv(mine, my, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, MPI_COMM_WORLD));
  }
  void gather_to_root(const void* mine, std::size_t bytes, std::vector<unsigned char>& all) override {
    std::vector<int> sizes(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
    int my = count_of(bytes, "a gather");
    KM_MPI(MPI_Gather(&my, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
    std::size_t total = 0;
    if (rank_ == 0) {
      for (int r = 0; r < size_; ++r) {
        offsets[static_cast<std::size_t>(r)] = count_of(total, "a gather");
        total += static_cast<std::size_t>(sizes[static_cast<std::size_t>(r)]);
      }
      count_of(total, "a gather");
    }
    all.assign(total, 0);
    KM_MPI(MPI_Gatherv(mine, my, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, 0, MPI_COMM_WORLD));
  }
  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }
  const char* library() const override { return library_.c_str(); }

 private:
  int rank_ = 0, size_ = 1;
  std::string library_;
};

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace

std::unique_ptr<Team> mpi_team_if_launched(int* argc, char*** argv) {
  if (!launched_by_mpi()) return nullptr;
  return std::make_unique<MpiTeam>(argc, argv);
}

}  // namespace km
