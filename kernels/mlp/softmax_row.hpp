// One row of softmax cross-entropy, shared by the MLP's CPU loop and its CUDA kernel so both
// do the same arithmetic in the same order: the arg-max (the first on ties), the shifted
// exponentials' sum, the row's loss, and optionally its gradient (softmax − one-hot) / rows.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define KM_MLP_HD __host__ __device__
#else
#define KM_MLP_HD
#endif

namespace km::kernels::mlp {

struct RowResult {
  double loss;
  bool correct;
};

template <class T>
KM_MLP_HD inline RowResult softmax_row(const T* z, int label, int cols, T* grad, int rows) {
  using std::exp;
  using std::log;
  int best = 0;
  for (int j = 1; j < cols; ++j)
    if (z[j] > z[best]) best = j;
  const T top = z[best];
  T sum = 0;
  for (int j = 0; j < cols; ++j) sum += exp(z[j] - top);
  const T log_sum = log(sum);
  if (grad)
    for (int j = 0; j < cols; ++j) grad[j] = (exp(z[j] - top) / sum - T(j == label)) / T(rows);
  return {static_cast<double>(log_sum - (z[label] - top)), best == label};
}

}  // namespace km::kernels::mlp
