// Host helpers of the GEMM launchers (each kernel file ends with its launcher, of one
// signature: GpuLaunch<T> in src/gemm/registry.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/support.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "gemm/gpu_gemm.hpp"
#include "kernels/gemm/common.cuh"

namespace km::kernels::gemm {

using km::gemm::GpuOptions;

// Calls f(std::integral_constant<Op, op>) so a launcher can pass the run-time op as a
// template argument.
template <class F>
void with_op(Op op, F&& f) {
  switch (op) {
    case Op::nn: f(std::integral_constant<Op, Op::nn>{}); break;
    case Op::tn: f(std::integral_constant<Op, Op::tn>{}); break;
    case Op::nt: f(std::integral_constant<Op, Op::nt>{}); break;
  }
}

// The grid of x_tile × y_tile blocks covering x_items × y_items, or UsageError.
inline dim3 grid_2d(std::size_t x_items, int x_tile, std::size_t y_items, int y_tile, const char* kernel) {
  const std::size_t gx = (x_items + x_tile - 1) / x_tile, gy = (y_items + y_tile - 1) / y_tile;
  if (gx > 2147483647ull || gy > 65535ull)
    throw UsageError(strprintf("--kernel=%s: the matrix needs a grid of %zu × %zu blocks, beyond the device's "
                               "2^31-1 × 65535; use a larger --tile or a smaller size",
                               kernel, gx, gy));
  return dim3(unsigned(gx), unsigned(gy));
}

// 16-byte loads need every contiguous extent and leading dimension to be a multiple of
// the vector and the base pointers to be aligned; otherwise the kernels copy one element
// at a time.
template <class T>
bool vectorizable(const GemmArgs<T>& g, int vec) {
  const std::size_t a_inner = g.op == Op::tn ? std::size_t(g.m) : std::size_t(g.k);
  const std::size_t b_inner = g.op == Op::nt ? std::size_t(g.k) : std::size_t(g.n);
  const auto aligned = [&](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % (vec * sizeof(T)) == 0; };
  return a_inner % vec == 0 && b_inner % vec == 0 && g.lda % vec == 0 && g.ldb % vec == 0 && aligned(g.a) &&
         aligned(g.b);
}

}  // namespace km::kernels::gemm
