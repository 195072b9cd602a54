// cuBLAS, loaded at its first use instead of by the dynamic loader. libcublas.so pulls in
// libcublasLt.so, whose mapping alone is about 540 MB: under an address-space limit
// (`prlimit --as=700000000`, small containers) every run, CPU-only ones included, failed in
// ld.so before main. The program calls only the entry points below; each forwards to
// libcublas.so.<major> (the major version of the headers it was built with), opened once with
// dlopen, which then loads cuBLASLt itself. A library that cannot be loaded is a DeviceError
// naming it, at the first cuBLAS call (a GPU run), never a CPU run's concern.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "common/errors.hpp"

namespace {

#define KM_STR2(x) #x
#define KM_STR(x) KM_STR2(x)
constexpr const char* kLibrary = "libcublas.so." KM_STR(CUBLAS_VER_MAJOR);

void* library() {
  static std::once_flag once;
  static void* handle = nullptr;
  static std::string why;
  std::call_once(once, [] {
    handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      why = e ? e : "unknown reason";
    }
  });
  if (!handle) throw km::DeviceError(std::string("cannot load cuBLAS (") + kLibrary + "): " + why);
  return handle;
}

template <class F>
F entry(const char* name) {
  void* f = dlsym(library(), name);
  if (!f) throw km::DeviceError(std::string(kLibrary) + " has no " + name);
  return reinterpret_cast<F>(f);
}

}  // namespace

// Each forwarder looks its target up once; the lookup throws rather than returning a status
// that the caller would report as cuBLAS's own.
#define KM_FORWARD(ret, name, params, args)                      \
  extern "C" ret CUBLASWINAPI name params {                      \
    static const auto target = entry<ret(CUBLASWINAPI*) params>(#name); \
    return target args;                                          \
  }

KM_FORWARD(cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
KM_FORWARD(cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
KM_FORWARD(cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
KM_FORWARD(cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
KM_FORWARD(cublasStatus_t, cublasSgemm_v2,
           (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
            const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta, float* C,
            int ldc),
           (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
KM_FORWARD(cublasStatus_t, cublasDgemm_v2,
           (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
            const double* alpha, const double* A, int lda, const double* B, int ldb, const double* beta, double* C,
            int ldc),
           (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))

// The status text, which the error path asks for: without the library, cuBLAS's own names.
extern "C" const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto target = [] {
    try {
      return entry<const char*(CUBLASWINAPI*)(cublasStatus_t)>("cublasGetStatusString");
    } catch (const km::DeviceError&) {
      return static_cast<const char* (*)(cublasStatus_t)>(nullptr);
    }
  }();
  return target ? target(status) : "a cuBLAS error (the library could not be loaded)";
}

#undef KM_FORWARD
#undef KM_STR
#undef KM_STR2
