// NCCL, loaded when first needed (dlopen of libnccl.so.2), so that the program starts and runs
// on one GPU where NCCL is not installed; --gpus=N (N > 1) then says what is missing. The
// types come from the toolkit's nccl.h; the functions from whichever NCCL 2.x the loader finds
// (LD_LIBRARY_PATH, or KMEANS_NCCL=/path/to/libnccl.so.2).
#pragma once

#include <nccl.h>

#include <vector>

#include "common/errors.hpp"

namespace km::cuda {

struct NcclApi {
  ncclResult_t (*comm_init_all)(ncclComm_t*, int, const int*);
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*comm_destroy)(ncclComm_t);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*group_start)();
  ncclResult_t (*group_end)();
  const char* (*error_string)(ncclResult_t);
  int version = 0;
};

// Throws DeviceError naming the library it looked for and why it could not load it.
const NcclApi& nccl();

[[noreturn]] void nccl_fail(ncclResult_t r, const char* call, const char* file, int line);

// Communicators, one per local GPU, destroyed together.
class NcclComms {
 public:
  NcclComms() = default;
  // One process, these devices (ncclCommInitAll).
  explicit NcclComms(const std::vector<int>& devices);
  // One rank of `ranks` processes, on the current device (ncclCommInitRank).
  NcclComms(const ncclUniqueId& id, int rank, int ranks);
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;
  ncclComm_t operator[](std::size_t i) const { return comms_[i]; }
  std::size_t size() const { return comms_.size(); }

 private:
  std::vector<ncclComm_t> comms_;
};

}  // namespace km::cuda

#define NCCL_CHECK(call)                                                                         \
  do {                                                                                           \
    const ncclResult_t km_nr_ = (call);                                                          \
    if (km_nr_ != ncclSuccess) ::km::cuda::nccl_fail(km_nr_, #call, __FILE__, __LINE__);         \
  } while (0)
