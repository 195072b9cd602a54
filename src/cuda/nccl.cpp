#include "cuda/nccl.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace km::cuda {

namespace {

template <class F>
void bind(void* lib, const char* name, F& out, const std::string& path) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) throw DeviceError(strprintf("NCCL (%s) has no %s: need NCCL 2.x", path.c_str(), name));
}

}  // namespace

const NcclApi& nccl() {
  static std::string failure;
  static const NcclApi* api = [] () -> const NcclApi* {
    const char* env = std::getenv("KMEANS_NCCL");
    const std::string path = env && *env ? env : "libnccl.so.2";
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      failure = strprintf("several GPUs need NCCL, which could not be loaded (%s): install NCCL 2.x or point "
                          "KMEANS_NCCL at libnccl.so.2",
                          why ? why : path.c_str());
      return nullptr;
    }
    static NcclApi a;
    try {
      bind(lib, "ncclCommInitAll", a.comm_init_all, path);
      bind(lib, "ncclGetUniqueId", a.get_unique_id, path);
      bind(lib, "ncclCommInitRank", a.comm_init_rank, path);
      bind(lib, "ncclCommDestroy", a.comm_destroy, path);
      bind(lib, "ncclAllReduce", a.all_reduce, path);
      bind(lib, "ncclGroupStart", a.group_start, path);
      bind(lib, "ncclGroupEnd", a.group_end, path);
      bind(lib, "ncclGetErrorString", a.error_string, path);
      ncclResult_t (*get_version)(int*) = nullptr;
      bind(lib, "ncclGetVersion", get_version, path);
      if (get_version(&a.version) != ncclSuccess) a.version = 0;
    } catch (const DeviceError& e) {
      failure = e.what();
      return nullptr;
    }
    return &a;
  }();
  if (!api) throw DeviceError(failure);
  return *api;
}

void nccl_fail(ncclResult_t r, const char* call, const char* file, int line) {
  throw DeviceError(strprintf("NCCL error %d (%s) in %s at %s:%d", static_cast<int>(r), nccl().error_string(r), call,
                              file, line));
}

NcclComms::NcclComms(const std::vector<int>& devices) : comms_(devices.size(), nullptr) {
  NCCL_CHECK(nccl().comm_init_all(comms_.data(), static_cast<int>(devices.size()), devices.data()));
}

NcclComms::NcclComms(const ncclUniqueId& id, int rank, int ranks) : comms_(1, nullptr) {
  NCCL_CHECK(nccl().comm_init_rank(&comms_[0], ranks, id, rank));
}

NcclComms::~NcclComms() {
  for (ncclComm_t c : comms_)
    if (c) nccl().comm_destroy(c);
}

}  // namespace km::cuda
