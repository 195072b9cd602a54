// The MLP's elementwise steps on the device (the products go through the GEMM registry).
// Each reads and writes in the same arithmetic as the CPU backend's loops; the loss is
// reduced in one block in a fixed order, so it is the same bits on every run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/mlp/softmax_row.hpp"

namespace km::kernels::mlp {

struct DeviceMetrics {
  double loss_sum;
  long long correct;
};

template <class T>
__global__ void bias_act(T* __restrict__ z, const T* __restrict__ bias, int rows, int cols, bool relu) {
  const std::size_t total = std::size_t(rows) * cols;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const T v = z[i] + bias[i % cols];
    z[i] = relu && !(v > T(0)) ? T(0) : v;
  }
}

template <class T>
__global__ void relu_backward(T* __restrict__ grad, const T* __restrict__ act, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (!(act[i] > T(0))) grad[i] = T(0);
}

// One thread per column, rows in order (as the CPU loop).
template <class T>
__global__ void colsum(const T* __restrict__ g, int rows, int cols, T* __restrict__ out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  T s = 0;
  for (int i = 0; i < rows; ++i) s += g[std::size_t(i) * cols + j];
  out[j] = s;
}

template <class T>
__global__ void sgd(T* __restrict__ w, T* __restrict__ v, const T* __restrict__ g, std::size_t count, T lr,
                    T momentum) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const T vi = momentum * v[i] + g[i];
    v[i] = vi;
    w[i] -= lr * vi;
  }
}

// One block of kSoftmaxThreads: thread t takes rows t, t + blockDim, ...; the per-thread
// losses are summed in a fixed tree, then added to the metrics by thread 0.
constexpr int kSoftmaxThreads = 256;

template <class T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_xent(const T* __restrict__ logits, const std::int32_t* __restrict__ labels, int rows, int cols,
                 T* __restrict__ grad, DeviceMetrics* metrics) {
  __shared__ double loss[kSoftmaxThreads];
  __shared__ long long right[kSoftmaxThreads];
  double my_loss = 0;
  long long my_right = 0;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    const RowResult r = softmax_row(logits + std::size_t(i) * cols, labels[i], cols,
                                       grad ? grad + std::size_t(i) * cols : nullptr, rows);
    my_loss += r.loss;
    my_right += r.correct;
  }
  loss[threadIdx.x] = my_loss;
  right[threadIdx.x] = my_right;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      loss[threadIdx.x] += loss[threadIdx.x + stride];
      right[threadIdx.x] += right[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    metrics->loss_sum += loss[0];
    metrics->correct += right[0];
  }
}

}  // namespace km::kernels::mlp
