// The device side of the delta kernel's protocol with the host (one_pass_iterate.cu: iterate,
// launch_iteration, launch_dependent; DeltaPass's fields):
// - launched as a programmatic dependent, each block triggers the kernel queued behind it at its
//   start (all blocks are resident, one wave) and waits for the kernel before, or
// - released early: it waits for the release flag's value (block_acquire), which the last block
//   of the kernel before writes once everything the next kernel reads is written;
// - launched ahead: where the gate is set (the last iteration met the stop rule) it returns
//   after its prologue, having written nothing;
// - the last block writes the sequence number last, after a system fence: the host spins on it
//   before it reads the counters in pinned memory.
#pragma once

namespace km::kernels {

// Waits until *flag == value, an acquire at GPU scope by thread 0, then the block's barrier.
__device__ __forceinline__ void block_acquire(const unsigned* flag, unsigned value) {
  if (threadIdx.x == 0) {
    unsigned seen;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
      if (seen == value) break;
      __nanosleep(64);
    }
  }
  __syncthreads();
}

// Programmatic dependent launch (sm_90; one_pass.hpp: launch_dependent). The trigger lets the kernel
// queued behind this one start its blocks as this one's leave; the wait holds until the kernel
// before has ended and its writes are visible, so nothing it writes is read before. Both are
// no-ops where the kernel was launched without the attribute or nothing is queued behind it.
__device__ __forceinline__ void dependent_launch_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void dependent_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// %globaltimer in ns: the kernel's start and end where the host times it without events.
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace km::kernels
