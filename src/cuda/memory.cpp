#include "cuda/memory.hpp"

namespace km::cuda {

PinnedRegion::PinnedRegion(const void* p, std::size_t bytes, bool device_writes) {
  if (!p || !bytes) return;
  // Registration can fail (e.g. unsupported memory); the copy then runs pageable, slower
  // but correct, so the error is cleared rather than thrown.
  void* q = const_cast<void*>(p);
  if (!device_writes && cudaHostRegister(q, bytes, cudaHostRegisterReadOnly) == cudaSuccess)
    ptr_ = q;
  else if (cudaGetLastError(), cudaHostRegister(q, bytes, cudaHostRegisterDefault) == cudaSuccess)
    ptr_ = q;
  else
    cudaGetLastError();
}

PinnedRegion::~PinnedRegion() {
  if (ptr_) cudaHostUnregister(ptr_);
}

}  // namespace km::cuda
