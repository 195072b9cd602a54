// kmeans-probe: the device's ceilings, measured in the same run as the benchmarks.
//   read bandwidth  a kernel that reads a 1 GiB buffer once (16-byte loads, grid-stride),
//                   median of 20 timed runs after a warm-up;
//   h2d bandwidth   pinned host -> device copies of 1 GiB, median of 10 after a warm-up (the
//                   link that out-of-core k-means streams over);
//   gemm            cuBLAS time of an m x k by k x n product (double and float, TF32 off),
//                   median of 10 runs after a warm-up, for --gemm=m,n,k;
//   assign          with --assign=N, the bare assignment pass at d = 16, K = 16 in float over N
//                   uniform objects (x [d][n] as the engine keeps it), median of 20 runs: the work
//                   any exact design with FMA scores repeats per object (16-byte loads, one FMA a
//                   coordinate and centroid against shared-memory rows |c|^2, -2c, the best two with
//                   the index in the score's low bits, |x|^2 and the margin's test, every label
//                   stored) and nothing else: no centring, update, movers, inertia or re-check. The
//                   ceiling the lab's float row at d = 16 is measured against (its "floor" is
//                   the bytes alone). U objects a lane, U = 2 and 4; its labels are checked against
//                   the same arithmetic on the CPU for the first 4096 objects.
//   assign-mma      with --assign-mma=N, the same at d = 32, K = 64 in float with the scores on the
//                   tensor cores (TF32 mma.m16n8k8 as the delta kernel's MMA path: objects' operands
//                   by one integer add, accumulators started at |c|^2, -2c's fragments from shared
//                   memory, the best two of each lane's 16 scores a row, merged over the quad; |x|^2
//                   and the margin's test; a label a lane stored), 32 objects a warp a pass. Its labels
//                   are checked against the CPU's exact argmin where the CPU's two best are clear
//                   of each other by more than TF32 could move them.
// Prints one JSON object. Usage: kmeans-probe [--gemm=M,N,K]... [--assign=N]... [--assign-mma=N]...
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/memory.hpp"
#include "cuda/timer.hpp"
#include "kernels/gemm/6_tensor.cuh"

namespace {

using km::cuda::DeviceBuffer;

__global__ void read_all(const double2* __restrict__ in, std::size_t count, double* out) {
  double acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double2 v = in[i];
    acc += v.x + v.y;
  }
  if (acc == 1234.5) *out = acc;  // keeps the loads alive; never true for zeroed memory
}

template <class T>
double gemm_seconds(cudaStream_t s, cublasHandle_t h, int m, int n, int k) {
  DeviceBuffer<T> a(std::size_t(m) * k), b(std::size_t(k) * n), c(std::size_t(m) * n);
  CUDA_CHECK(cudaMemsetAsync(a.get(), 0, a.bytes(), s));
  CUDA_CHECK(cudaMemsetAsync(b.get(), 0, b.bytes(), s));
  const T one = 1, zero = 0;
  return km::cuda::time_median(s, 10, [&] {
    if constexpr (sizeof(T) == 8)
      CUBLAS_CHECK(cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b.get(), k, a.get(), k, &zero, c.get(), n));
    else
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b.get(), k, a.get(), k, &zero, c.get(), n));
  });
}

// The kernels' own span, as the fused engine times its iterations (%globaltimer, not events around
// the launch): the earliest block's start and the latest block's end, into stamps[0], stamps[1].
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void stamp_start(unsigned long long* stamps) {
  if (threadIdx.x == 0) atomicMin(stamps, now_ns());
}
__device__ __forceinline__ void stamp_end(unsigned long long* stamps) {
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(stamps + 1, now_ns());
}

// Median over reps of the span the kernels stamp (launch(stamps) queues one run).
template <class Launch>
double span_median(cudaStream_t s, int reps, Launch&& launch) {
  DeviceBuffer<unsigned long long> stamps(2);
  std::vector<double> spans;
  for (int r = 0; r <= reps; ++r) {
    const unsigned long long init[2] = {~0ull, 0ull};
    unsigned long long got[2] = {0, 0};
    CUDA_CHECK(cudaMemcpyAsync(stamps.get(), init, sizeof init, cudaMemcpyHostToDevice, s));
    launch(stamps.get());
    CUDA_CHECK(cudaMemcpyAsync(got, stamps.get(), sizeof got, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (r > 0) spans.push_back((got[1] - got[0]) * 1e-9);  // (the first run warms up)
  }
  return km::median(spans);
}

// --assign: see the header. A centroid's row is |c|^2, three zeros, then -2c (kAssignRow floats, 16-byte
// aligned), so that f = |c|^2 - 2 x.c is one FMA chain from row[0].
constexpr int kAssignD = 16, kAssignK = 16, kAssignRow = 20;

__device__ __host__ inline float assign_key(const float* row, const float* v, int c) {
  float f = row[0];
  for (int j = 0; j < kAssignD; ++j) f = fmaf(row[4 + j], v[j], f);
  unsigned bits;
  std::memcpy(&bits, &f, 4);
  bits = (bits & ~15u) | static_cast<unsigned>(c);
  std::memcpy(&f, &bits, 4);
  return f;
}

// SCORES false: the same loads and label stores with no scores (a label from the coordinates' bits),
// the pass's memory floor at this size, with its launch and its tail.
template <int U, bool SCORES = true>
__global__ void __launch_bounds__(256) bare_assign(const float* __restrict__ x, long long n,
                                                   const float4* __restrict__ rows_in, float margin,
                                                   int* __restrict__ labels, unsigned* __restrict__ close_out,
                                                   unsigned long long* stamps) {
  static_assert(U == 2 || U == 4, "a lane's U values of a coordinate in one 8- or 16-byte load");
  stamp_start(stamps);
  __shared__ float4 rows[kAssignK * kAssignRow / 4];
  for (int t = threadIdx.x; t < kAssignK * kAssignRow / 4; t += blockDim.x) rows[t] = rows_in[t];
  __syncthreads();
  unsigned close = 0;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x * U;
  for (long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * U; i < n; i += step) {
    float v[U][kAssignD], nx[U], best[U], second[U];
#pragma unroll
    for (int j = 0; j < kAssignD; ++j) {
      if constexpr (U == 4) {
        const float4 w = *reinterpret_cast<const float4*>(x + j * n + i);
        v[0][j] = w.x, v[1][j] = w.y, v[2][j] = w.z, v[3][j] = w.w;
      } else {
        const float2 w = *reinterpret_cast<const float2*>(x + j * n + i);
        v[0][j] = w.x, v[1][j] = w.y;
      }
    }
    if constexpr (!SCORES) {
      int lab[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        unsigned h = 0;
#pragma unroll
        for (int j = 0; j < kAssignD; ++j) h ^= __float_as_uint(v[u][j]);
        lab[u] = static_cast<int>(h & 15u);
      }
      if constexpr (U == 4) *reinterpret_cast<int4*>(labels + i) = make_int4(lab[0], lab[1], lab[2], lab[3]);
      else *reinterpret_cast<int2*>(labels + i) = make_int2(lab[0], lab[1]);
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        nx[u] = 0;
#pragma unroll
        for (int j = 0; j < kAssignD; ++j) nx[u] = fmaf(v[u][j], v[u][j], nx[u]);
        best[u] = second[u] = INFINITY;
      }
#pragma unroll 4
      for (int c = 0; c < kAssignK; ++c) {
        float a[kAssignRow];
#pragma unroll
        for (int q = 0; q < kAssignRow / 4; ++q) {
          const float4 w = rows[c * (kAssignRow / 4) + q];
          a[4 * q] = w.x, a[4 * q + 1] = w.y, a[4 * q + 2] = w.z, a[4 * q + 3] = w.w;
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const float f = assign_key(a, v[u], c);
          second[u] = fminf(second[u], fmaxf(best[u], f));
          best[u] = fminf(best[u], f);
        }
      }
      int lab[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        lab[u] = __float_as_int(best[u]) & 15;
        close += second[u] - best[u] > margin * nx[u] ? 0u : 1u;
      }
      if constexpr (U == 4) *reinterpret_cast<int4*>(labels + i) = make_int4(lab[0], lab[1], lab[2], lab[3]);
      else *reinterpret_cast<int2*>(labels + i) = make_int2(lab[0], lab[1]);
    }
  }
  for (int off = 16; off > 0; off /= 2) close += __shfl_xor_sync(0xffffffffu, close, off);
  if ((threadIdx.x & 31) == 0 && close) atomicAdd(close_out, close);
  stamp_end(stamps);
}

__global__ void fill_uniform(float* x, long long count) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned long long h = static_cast<unsigned long long>(i) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    x[i] = static_cast<float>(h >> 40) * 0x1p-24f;  // [0, 1)
  }
}

// The probe's passes' data: N uniform objects of d coordinates, x [d][n], and the first kCheck
// of them on the host ([d][kCheck]), the centroids' source and the CPU check's objects.
constexpr int kCheck = 4096;
std::vector<float> uniform_objects(cudaStream_t s, const cudaDeviceProp& prop, DeviceBuffer<float>& x, long long n,
                                   int d) {
  fill_uniform<<<prop.multiProcessorCount * 8, 256, 0, s>>>(x.get(), n * d);
  CUDA_CHECK_LAUNCH();
  std::vector<float> head(static_cast<std::size_t>(d) * kCheck);
  for (int j = 0; j < d; ++j)
    CUDA_CHECK(cudaMemcpyAsync(head.data() + static_cast<std::size_t>(j) * kCheck, x.get() + j * n,
                               kCheck * sizeof(float), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return head;
}

// One pass timed both ways (events around the launch, and the kernels' own span), at the grid its
// occupancy allows with blocks of 256; launch(grid, stamps) queues one run. Then the close calls
// counted over every run (each timing warms up once and runs 20 times: 42 runs) and the first
// kCheck labels.
struct PassResult {
  double seconds = 0, span = 0;
  int registers = 0, blocks_per_sm = 0;
  double close_per_run = 0;
  std::vector<int> labels;
};
template <class Kernel, class Launch>
PassResult time_pass(cudaStream_t s, const cudaDeviceProp& prop, Kernel kernel, unsigned* close, const int* labels,
                     Launch&& launch) {
  PassResult r;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, kernel, 256, 0));
  const int grid = prop.multiProcessorCount * r.blocks_per_sm;
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  r.registers = attr.numRegs;
  CUDA_CHECK(cudaMemsetAsync(close, 0, sizeof(unsigned), s));
  DeviceBuffer<unsigned long long> scratch(2);
  r.seconds = km::cuda::time_median(s, 20, [&] { launch(grid, scratch.get()); });
  r.span = span_median(s, 20, [&](unsigned long long* stamps) { launch(grid, stamps); });
  unsigned closes = 0;
  r.labels.resize(kCheck);
  CUDA_CHECK(cudaMemcpyAsync(&closes, close, sizeof closes, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaMemcpyAsync(r.labels.data(), labels, kCheck * sizeof(int), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  r.close_per_run = closes / 42.0;
  return r;
}

// Prints {"objects": n, ...} for n objects (n % 4 == 0), or throws on a launch error or labels
// that differ from the CPU's.
void assign_ceiling(cudaStream_t s, const cudaDeviceProp& prop, long long n, double read_seconds_per_byte) {
  if (n < 4096 || n % 4 != 0) throw std::invalid_argument("--assign=N: N must be a multiple of 4, at least 4096");
  DeviceBuffer<float> x(static_cast<std::size_t>(n) * kAssignD);
  DeviceBuffer<int> labels(static_cast<std::size_t>(n));
  DeviceBuffer<float4> rows(kAssignK * kAssignRow / 4);
  DeviceBuffer<unsigned> close(1);
  // The centroids: the first K objects.
  const std::vector<float> head = uniform_objects(s, prop, x, n, kAssignD);
  std::vector<float> table(kAssignK * kAssignRow, 0.0f);
  for (int c = 0; c < kAssignK; ++c) {
    float c2 = 0;
    for (int j = 0; j < kAssignD; ++j) c2 = std::fma(head[j * kCheck + c], head[j * kCheck + c], c2);
    table[c * kAssignRow] = c2;
    for (int j = 0; j < kAssignD; ++j) table[c * kAssignRow + 4 + j] = -2.0f * head[j * kCheck + c];
  }
  CUDA_CHECK(cudaMemcpyAsync(rows.get(), table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice, s));
  const float margin = 0x1p-20f;  // of the order of filter_bound's factor at d = 16 in float
  std::printf("{\"objects\": %lld, \"coords\": %d, \"clusters\": %d, \"floor_seconds\": %.9g, \"runs\": [",
              n, kAssignD, kAssignK, static_cast<double>(n) * (kAssignD + 1) * 4 * read_seconds_per_byte);
  auto run = [&](auto u_tag, auto scores_tag, bool first) {
    constexpr int U = decltype(u_tag)::value;
    constexpr bool SCORES = decltype(scores_tag)::value;
    const PassResult r =
        time_pass(s, prop, bare_assign<U, SCORES>, close.get(), labels.get(), [&](int grid, unsigned long long* stamps) {
          bare_assign<U, SCORES><<<grid, 256, 0, s>>>(x.get(), n, rows.get(), margin, labels.get(), close.get(), stamps);
          CUDA_CHECK_LAUNCH();
        });
    int wrong = 0;
    for (int o = 0; SCORES && o < kCheck; ++o) {
      float v[kAssignD];
      for (int j = 0; j < kAssignD; ++j) v[j] = head[j * kCheck + o];
      float best = INFINITY;
      for (int c = 0; c < kAssignK; ++c) best = std::fmin(best, assign_key(&table[c * kAssignRow], v, c));
      unsigned bits;
      std::memcpy(&bits, &best, 4);
      wrong += r.labels[o] != static_cast<int>(bits & 15u);
    }
    if (wrong) throw std::runtime_error("--assign: " + std::to_string(wrong) + " of the first 4096 labels differ from the CPU's");
    std::printf("%s{\"u\": %d, \"scores\": %s, \"seconds\": %.9g, \"span_seconds\": %.9g, \"registers\": %d, "
                "\"blocks_per_sm\": %d, \"close_per_run\": %.1f}",
                first ? "" : ", ", U, SCORES ? "true" : "false", r.seconds, r.span, r.registers, r.blocks_per_sm,
                r.close_per_run);
  };
  run(std::integral_constant<int, 4>{}, std::false_type{}, true);
  run(std::integral_constant<int, 2>{}, std::true_type{}, false);
  run(std::integral_constant<int, 4>{}, std::true_type{}, false);
  std::printf("]}");
}

// --assign-mma: see the header. -2c as B fragments in shared memory, [n-tile q][k-step s][lane]
// {b0, b1} = -2 c[8q + g][8s + t], -2 c[8q + g][8s + t + 4] (g = lane / 4, t = lane % 4), and |c|^2.
constexpr int kMmaD = 32, kMmaK = 64;
using Tf32 = km::kernels::gemm::MmaTf32m16n8k8;

__global__ void __launch_bounds__(256) bare_assign_mma(const float* __restrict__ x, long long n,
                                                       const float2* __restrict__ frags_in,
                                                       const float* __restrict__ c2_in, float margin,
                                                       int* __restrict__ labels, unsigned* __restrict__ close_out,
                                                       unsigned long long* stamps) {
  stamp_start(stamps);
  constexpr int QN = kMmaK / 8, KS = kMmaD / 8;
  __shared__ float2 frags[QN * KS * 32];
  __shared__ float c2[kMmaK];
  for (int t = threadIdx.x; t < QN * KS * 32; t += blockDim.x) frags[t] = frags_in[t];
  for (int t = threadIdx.x; t < kMmaK; t += blockDim.x) c2[t] = c2_in[t];
  __syncthreads();
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / 32);
  unsigned close = 0;
  for (long long base = (static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * 32; base < n;
       base += warps * 32) {
    // A fragments of the two m-tiles (objects base + 16 m + {g, g + 8}), coordinates 8s + {t, t + 4}.
    unsigned a[2][KS][4];
    float nx[4] = {0, 0, 0, 0};  // rows: m-tile 0 g, g + 8, m-tile 1 g, g + 8 (this lane's 8 coordinates)
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const float* p0 = x + static_cast<long long>(8 * ks + t) * n + base + 16 * m + g;
        const float* p1 = p0 + 4 * n;
        const float v[4] = {p0[0], p0[8], p1[0], p1[8]};
#pragma unroll
        for (int r = 0; r < 4; ++r) a[m][ks][r] = Tf32::convert_half_up(v[r]);
        nx[2 * m] = fmaf(v[0], v[0], fmaf(v[2], v[2], nx[2 * m]));
        nx[2 * m + 1] = fmaf(v[1], v[1], fmaf(v[3], v[3], nx[2 * m + 1]));
      }
    float best[4], second[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) best[r] = second[r] = INFINITY;
#pragma unroll 2
    for (int q = 0; q < QN; ++q) {
      const float ca = c2[8 * q + 2 * t], cb = c2[8 * q + 2 * t + 1];
      float acc[2][4] = {{ca, cb, ca, cb}, {ca, cb, ca, cb}};
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const float2 b = frags[(q * KS + ks) * 32 + lane];
        const unsigned br[2] = {__float_as_uint(b.x), __float_as_uint(b.y)};
        Tf32::mma(acc[0], a[0][ks], br);
        Tf32::mma(acc[1], a[1][ks], br);
      }
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int e = 0; e < 4; ++e) {  // c0, c1: row g, columns 2t, 2t + 1; c2, c3: row g + 8
          const int r = 2 * m + (e >> 1);
          const float f = __uint_as_float((__float_as_uint(acc[m][e]) & ~63u) | static_cast<unsigned>(8 * q + 2 * t + (e & 1)));
          second[r] = fminf(second[r], fmaxf(best[r], f));
          best[r] = fminf(best[r], f);
        }
    }
    // The quad's four lanes hold the same rows over different columns: merge, and sum |x|^2.
#pragma unroll
    for (int off = 1; off <= 2; off *= 2)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float ob = __shfl_xor_sync(0xffffffffu, best[r], off), os = __shfl_xor_sync(0xffffffffu, second[r], off);
        second[r] = fminf(fmaxf(best[r], ob), fminf(second[r], os));
        best[r] = fminf(best[r], ob);
        nx[r] += __shfl_xor_sync(0xffffffffu, nx[r], off);
      }
    // Lane t stores row r = t's label (objects base + {g, g + 8, 16 + g, 24 + g}).
    float b = best[0], s2 = second[0], nr = nx[0];
#pragma unroll
    for (int r = 1; r < 4; ++r)
      if (t == r) b = best[r], s2 = second[r], nr = nx[r];
    const long long o = base + 8 * t + g;
    close += s2 - b > margin * nr ? 0u : 1u;
    if (o < n) labels[o] = static_cast<int>(__float_as_uint(b) & 63u);
  }
  for (int off = 16; off > 0; off /= 2) close += __shfl_xor_sync(0xffffffffu, close, off);
  if (lane == 0 && close) atomicAdd(close_out, close);
  stamp_end(stamps);
}

// Prints {"objects": n, ...} for the tensor-core pass (n % 32 == 0).
void assign_mma_ceiling(cudaStream_t s, const cudaDeviceProp& prop, long long n, double read_seconds_per_byte) {
  if (n < 4096 || n % 32 != 0) throw std::invalid_argument("--assign-mma=N: N must be a multiple of 32, at least 4096");
  DeviceBuffer<float> x(static_cast<std::size_t>(n) * kMmaD);
  DeviceBuffer<int> labels(static_cast<std::size_t>(n));
  DeviceBuffer<float2> frags(kMmaK / 8 * kMmaD / 8 * 32);
  DeviceBuffer<float> c2(kMmaK);
  DeviceBuffer<unsigned> close(1);
  const std::vector<float> head = uniform_objects(s, prop, x, n, kMmaD);
  auto cv = [&](int c, int j) { return head[static_cast<std::size_t>(j) * kCheck + c]; };  // centroid c = object c
  std::vector<float> c2h(kMmaK), fr(kMmaK / 8 * kMmaD / 8 * 32 * 2);
  for (int c = 0; c < kMmaK; ++c) {
    float v = 0;
    for (int j = 0; j < kMmaD; ++j) v = std::fma(cv(c, j), cv(c, j), v);
    c2h[c] = v;
  }
  auto tf32 = [](float f) {  // cvt.rna.tf32: round half away to 10 mantissa bits
    unsigned b;
    std::memcpy(&b, &f, 4);
    b = (b + 0x1000u) & ~0x1fffu;
    std::memcpy(&f, &b, 4);
    return f;
  };
  for (int q = 0; q < kMmaK / 8; ++q)
    for (int ks = 0; ks < kMmaD / 8; ++ks)
      for (int l = 0; l < 32; ++l) {
        const int g = l >> 2, t = l & 3, at = ((q * (kMmaD / 8) + ks) * 32 + l) * 2;
        fr[at] = tf32(-2.0f * cv(8 * q + g, 8 * ks + t));
        fr[at + 1] = tf32(-2.0f * cv(8 * q + g, 8 * ks + t + 4));
      }
  CUDA_CHECK(cudaMemcpyAsync(frags.get(), fr.data(), fr.size() * sizeof(float), cudaMemcpyHostToDevice, s));
  CUDA_CHECK(cudaMemcpyAsync(c2.get(), c2h.data(), c2h.size() * sizeof(float), cudaMemcpyHostToDevice, s));
  const float margin = 0x1p-9f;  // of the order of the TF32 filter's factor at d = 32
  const PassResult r =
      time_pass(s, prop, bare_assign_mma, close.get(), labels.get(), [&](int grid, unsigned long long* stamps) {
        bare_assign_mma<<<grid, 256, 0, s>>>(x.get(), n, frags.get(), c2.get(), margin, labels.get(), close.get(),
                                             stamps);
        CUDA_CHECK_LAUNCH();
      });
  // The CPU's exact distances in double; a label may differ only where the two best are within
  // what TF32's roundings (2^-10 of |x| |c| a coordinate, summed) could swap.
  int wrong = 0, unclear = 0;
  for (int o = 0; o < kCheck; ++o) {
    double b1 = INFINITY, b2 = INFINITY, xx = 0, cmax = 0;
    int arg = -1;
    for (int j = 0; j < kMmaD; ++j) xx += static_cast<double>(cv(o, j)) * cv(o, j);
    for (int c = 0; c < kMmaK; ++c) {
      double dist = 0;
      for (int j = 0; j < kMmaD; ++j) dist += (static_cast<double>(cv(o, j)) - cv(c, j)) * (static_cast<double>(cv(o, j)) - cv(c, j));
      cmax = std::fmax(cmax, c2h[c]);
      if (dist < b1) b2 = b1, b1 = dist, arg = c;
      else if (dist < b2) b2 = dist;
    }
    const bool clear = b2 - b1 > 4 * 0x1p-10 * std::sqrt(xx * cmax) + 1e-4 * (xx + cmax);
    unclear += clear ? 0 : 1;
    if (clear && r.labels[o] != arg) ++wrong;
  }
  if (wrong)
    throw std::runtime_error("--assign-mma: " + std::to_string(wrong) + " of the first 4096 labels differ from the CPU's where the two best are clear");
  std::printf("{\"objects\": %lld, \"coords\": %d, \"clusters\": %d, \"floor_seconds\": %.9g, \"seconds\": %.9g, "
              "\"span_seconds\": %.9g, \"registers\": %d, \"blocks_per_sm\": %d, \"close_per_run\": %.1f, "
              "\"unclear_of_4096\": %d}",
              n, kMmaD, kMmaK, static_cast<double>(n) * (kMmaD + 1) * 4 * read_seconds_per_byte, r.seconds, r.span,
              r.registers, r.blocks_per_sm, r.close_per_run, unclear);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    km::cuda::Stream stream;
    const std::size_t bytes = 1ull << 30;
    double seconds = 0;
    {
      DeviceBuffer<double2> buf(bytes / sizeof(double2));
      DeviceBuffer<double> out(1);
      CUDA_CHECK(cudaMemsetAsync(buf.get(), 0, bytes, stream));
      const int grid = prop.multiProcessorCount * 8;
      seconds = km::cuda::time_median(stream, 20, [&] {
        read_all<<<grid, 512, 0, stream>>>(buf.get(), buf.size(), out.get());
        CUDA_CHECK_LAUNCH();
      });
    }
    double h2d_seconds = 0;
    {
      DeviceBuffer<unsigned char> dst(bytes);
      void* host = nullptr;
      CUDA_CHECK(cudaMallocHost(&host, bytes));
      std::memset(host, 1, bytes);
      try {
        h2d_seconds = km::cuda::time_median(stream, 10, [&] {
          CUDA_CHECK(cudaMemcpyAsync(dst.get(), host, bytes, cudaMemcpyHostToDevice, stream));
        });
      } catch (...) {
        cudaFreeHost(host);
        throw;
      }
      CUDA_CHECK(cudaFreeHost(host));
    }
    std::printf("{\"device\": \"%s\", \"read_bandwidth_gbs\": %.3f, \"h2d_pinned_gbs\": %.3f", prop.name,
                bytes / seconds / 1e9, bytes / h2d_seconds / 1e9);
    km::cuda::CublasHandle h(stream);
    std::printf(", \"gemm\": [");
    bool first = true;
    for (int i = 1; i < argc; ++i) {
      int m, n, k;
      if (std::sscanf(argv[i], "--gemm=%d,%d,%d", &m, &n, &k) != 3) continue;
      std::printf("%s{\"m\": %d, \"n\": %d, \"k\": %d, \"double_seconds\": %.9g, \"float_seconds\": %.9g}",
                  first ? "" : ", ", m, n, k, gemm_seconds<double>(stream, h, m, n, k),
                  gemm_seconds<float>(stream, h, m, n, k));
      first = false;
    }
    std::printf("], \"assign\": [");
    first = true;
    for (int i = 1; i < argc; ++i) {
      long long n = 0;
      if (std::sscanf(argv[i], "--assign=%lld", &n) != 1) continue;
      std::printf("%s", first ? "" : ", ");
      assign_ceiling(stream, prop, n, seconds / bytes);
      first = false;
    }
    std::printf("], \"assign_mma\": [");
    first = true;
    for (int i = 1; i < argc; ++i) {
      long long n = 0;
      if (std::sscanf(argv[i], "--assign-mma=%lld", &n) != 1) continue;
      std::printf("%s", first ? "" : ", ");
      assign_mma_ceiling(stream, prop, n, seconds / bytes);
      first = false;
    }
    std::printf("]}\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kmeans-probe: error: %s\n", e.what());
    return 1;
  }
}
