#include "gemm/gpu_gemm.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <thread>

#include "common/errors.hpp"
#include "gemm/cpu_gemm.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/gpu_engine.hpp"
#include "timing/timer.hpp"
#include "../kernels/gemm_coalesced.cuh"
#include "../kernels/gemm_naive.cuh"
#include "../kernels/gemm_regblock.cuh"
#include "../kernels/gemm_shared.cuh"
#include "../kernels/gemm_shared_static.cuh"
#include "../kernels/gemm_tensor.cuh"

namespace km::gemm {

namespace kg = km::kernels::gemm;
using gpu::DeviceBuffer;

namespace {

#define CUBLAS_CHECK(call)                                                                          \
  do {                                                                                              \
    const cublasStatus_t km_st_ = (call);                                                           \
    if (km_st_ != CUBLAS_STATUS_SUCCESS)                                                            \
      throw DeviceError(strprintf("cuBLAS error %d in %s at %s:%d", int(km_st_), #call, __FILE__, __LINE__)); \
  } while (0)

int compute_capability() {
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major * 10 + minor;
}

int default_mma() { return compute_capability() >= 90 ? 1684 : 884; }

// Tile configurations (see the kernel files for what each number means).
constexpr int kRegF_BM = 128, kRegF_BN = 128, kRegF_BK = 8, kRegF_TM = 8, kRegF_TN = 8;
constexpr int kRegD_BM = 64, kRegD_BN = 64, kRegD_BK = 8, kRegD_TM = 4, kRegD_TN = 4;
constexpr int kTenD_BM = 128, kTenD_BN = 128, kTenD_BK = 16, kTenD_WM = 64, kTenD_WN = 32;
constexpr int kTenF_BM = 128, kTenF_BN = 128, kTenF_BK = 32, kTenF_WM = 64, kTenF_WN = 32;
constexpr int kStages = 3;

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

dim3 grid_2d(std::size_t x_items, int x_tile, std::size_t y_items, int y_tile, const char* kernel) {
  const std::size_t gx = (x_items + x_tile - 1) / x_tile, gy = (y_items + y_tile - 1) / y_tile;
  if (gx > 2147483647ull || gy > 65535ull)
    throw UsageError(strprintf("--kernel=%s: the matrix needs a grid of %zu × %zu blocks, beyond the device's "
                               "2^31-1 × 65535; use a larger --tile or a smaller size",
                               kernel, gx, gy));
  return dim3(unsigned(gx), unsigned(gy));
}

template <class Kernel>
void allow_shared(Kernel kernel, std::size_t bytes, const char* name) {
  if (bytes > gpu::max_shared_bytes())
    throw DeviceError(strprintf("--kernel=%s needs %zu bytes of shared memory per block; this device allows %zu",
                                name, bytes, gpu::max_shared_bytes()));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <int W, Op op, class T>
void launch_static(const GemmArgs<T>& g, cudaStream_t s) {
  const dim3 grid = grid_2d(std::size_t(g.n), W, std::size_t(g.m), W, "shared-static");
  kg::gemm_shared_static<op, T, W><<<grid, dim3(W, W), 0, s>>>(g);
}

template <Op op, class Mma, int BM, int BN, int BK, int WM, int WN>
void launch_tensor(const GemmArgs<typename Mma::T>& g, cudaStream_t s) {
  using T = typename Mma::T;
  constexpr int threads = (BM / WM) * (BN / WN) * 32;
  constexpr std::size_t smem = kg::tensor_smem_bytes<Mma, BM, BN, BK, kStages, op>();
  const dim3 grid = grid_2d(std::size_t(g.n), BN, std::size_t(g.m), BM, "tensor");
  constexpr int vec = 16 / int(sizeof(T));
  if (vectorizable(g, vec)) {
    auto kernel = kg::gemm_tensor<op, Mma, BM, BN, BK, WM, WN, kStages, vec>;
    allow_shared(kernel, smem, "tensor");
    kernel<<<grid, threads, smem, s>>>(g);
  } else {
    auto kernel = kg::gemm_tensor<op, Mma, BM, BN, BK, WM, WN, kStages, 1>;
    allow_shared(kernel, smem, "tensor");
    kernel<<<grid, threads, smem, s>>>(g);
  }
}

template <Op op, class T>
void launch_op(const std::string& kernel, const GemmArgs<T>& g, const GpuOptions& o, cudaStream_t s) {
  const int w = o.tile;
  if (kernel == "naive") {
    kg::gemm_naive<op, T><<<grid_2d(std::size_t(g.m), w, std::size_t(g.n), w, "naive"), dim3(w, w), 0, s>>>(g);
  } else if (kernel == "coalesced") {
    kg::gemm_coalesced<op, T>
        <<<grid_2d(std::size_t(g.n), w, std::size_t(g.m), w, "coalesced"), dim3(w, w), 0, s>>>(g);
  } else if (kernel == "shared") {
    const std::size_t smem = 2 * std::size_t(w) * w * sizeof(T);
    kg::gemm_shared<op, T><<<grid_2d(std::size_t(g.n), w, std::size_t(g.m), w, "shared"), dim3(w, w), smem, s>>>(g);
  } else if (kernel == "shared-static") {
    switch (w) {
      case 4: launch_static<4, op>(g, s); break;
      case 8: launch_static<8, op>(g, s); break;
      case 16: launch_static<16, op>(g, s); break;
      default: launch_static<32, op>(g, s); break;
    }
  } else if (kernel == "regblock") {
    if constexpr (sizeof(T) == 4) {
      constexpr int threads = (kRegF_BM / kRegF_TM) * (kRegF_BN / kRegF_TN);
      const dim3 grid = grid_2d(std::size_t(g.n), kRegF_BN, std::size_t(g.m), kRegF_BM, "regblock");
      if (vectorizable(g, 4))
        kg::gemm_regblock<op, T, kRegF_BM, kRegF_BN, kRegF_BK, kRegF_TM, kRegF_TN, 4><<<grid, threads, 0, s>>>(g);
      else
        kg::gemm_regblock<op, T, kRegF_BM, kRegF_BN, kRegF_BK, kRegF_TM, kRegF_TN, 1><<<grid, threads, 0, s>>>(g);
    } else {
      constexpr int threads = (kRegD_BM / kRegD_TM) * (kRegD_BN / kRegD_TN);
      const dim3 grid = grid_2d(std::size_t(g.n), kRegD_BN, std::size_t(g.m), kRegD_BM, "regblock");
      if (vectorizable(g, 2))
        kg::gemm_regblock<op, T, kRegD_BM, kRegD_BN, kRegD_BK, kRegD_TM, kRegD_TN, 2><<<grid, threads, 0, s>>>(g);
      else
        kg::gemm_regblock<op, T, kRegD_BM, kRegD_BN, kRegD_BK, kRegD_TM, kRegD_TN, 1><<<grid, threads, 0, s>>>(g);
    }
  } else if (kernel == "tensor") {
    if constexpr (sizeof(T) == 4) {
      launch_tensor<op, kg::MmaTf32m16n8k8, kTenF_BM, kTenF_BN, kTenF_BK, kTenF_WM, kTenF_WN>(g, s);
    } else {
      const int shape = o.mma ? o.mma : default_mma();
      if (shape == 884)
        launch_tensor<op, kg::MmaF64m8n8k4, kTenD_BM, kTenD_BN, kTenD_BK, kTenD_WM, kTenD_WN>(g, s);
      else if (shape == 1688)
        launch_tensor<op, kg::MmaF64m16n8k8, kTenD_BM, kTenD_BN, kTenD_BK, kTenD_WM, kTenD_WN>(g, s);
      else
        launch_tensor<op, kg::MmaF64m16n8k4, kTenD_BM, kTenD_BN, kTenD_BK, kTenD_WM, kTenD_WN>(g, s);
    }
  } else {
    throw UsageError("not a GPU kernel: " + kernel);
  }
  CUDA_CHECK_LAUNCH();
}

template <class T>
void launch(const std::string& kernel, const GemmArgs<T>& g, const GpuOptions& o, cudaStream_t s) {
  switch (g.op) {
    case Op::nn: launch_op<Op::nn>(kernel, g, o, s); break;
    case Op::tn: launch_op<Op::tn>(kernel, g, o, s); break;
    case Op::nt: launch_op<Op::nt>(kernel, g, o, s); break;
  }
}

// Row-major through the operand swap: a row-major X is the column-major Xᵀ, so
// C = A·B is computed as Cᵀ = Bᵀ·Aᵀ with the operands exchanged. For nt, D must already
// hold C (β = 1).
cublasStatus_t cublas_gemm(cublasHandle_t h, cublasOperation_t tb, cublasOperation_t ta, int n, int m, int k,
                           const double* alpha, const double* b, int ldb, const double* a, int lda,
                           const double* beta, double* d, int ldc) {
  return cublasDgemm(h, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, d, ldc);
}
cublasStatus_t cublas_gemm(cublasHandle_t h, cublasOperation_t tb, cublasOperation_t ta, int n, int m, int k,
                           const float* alpha, const float* b, int ldb, const float* a, int lda, const float* beta,
                           float* d, int ldc) {
  return cublasSgemm(h, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, d, ldc);
}

template <class T>
void run_cublas(cublasHandle_t h, const GemmArgs<T>& g) {
  const T one = 1, beta = g.op == Op::nt ? T(1) : T(0);
  CUBLAS_CHECK(cublas_gemm(h, g.op == Op::nt ? CUBLAS_OP_T : CUBLAS_OP_N, g.op == Op::tn ? CUBLAS_OP_T : CUBLAS_OP_N,
                           g.n, g.m, g.k, &one, g.b, int(g.ldb), g.a, int(g.lda), &beta, g.d, int(g.ldc)));
}

template <class T>
__global__ void absolute(const T* in, T* out, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = in[i] < T(0) ? -in[i] : in[i];
}

class Events {
 public:
  Events() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Events() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  void start(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(start_, s)); }
  void stop(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(stop_, s)); }
  double seconds() {
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

class Stream {
 public:
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Cublas {
 public:
  explicit Cublas(cudaStream_t s) {
    CUBLAS_CHECK(cublasCreate(&h_));
    CUBLAS_CHECK(cublasSetStream(h_, s));
    CUBLAS_CHECK(cublasSetMathMode(h_, CUBLAS_PEDANTIC_MATH));  // no TF32, no reduced-precision reductions
  }
  ~Cublas() { cublasDestroy(h_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  operator cublasHandle_t() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

void check_memory(std::size_t bytes, const std::string& kernel) {
  std::size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  const std::size_t reserve = 256ull << 20;  // cuBLAS workspace and the runtime
  if (bytes + reserve > free_bytes)
    throw DeviceError(strprintf("--kernel=%s needs %.2f GiB of device memory (operands, result, reference) but "
                                "%.2f GiB are free; use a smaller size or --precision=float",
                                kernel.c_str(), bytes / 1073741824.0, free_bytes / 1073741824.0));
}

// Device copies of a problem's operands (A and B whole; C for nt) and a result buffer.
template <class T>
struct DeviceProblem {
  DeviceBuffer<T> a, b, c, d;
  GemmArgs<T> args;
};

// Times `body` `reps` times after one warm-up; `prepare` runs before each, untimed.
template <class Body, class Prepare>
std::vector<double> time_reps(cudaStream_t s, int reps, Body body, Prepare prepare) {
  Events ev;
  prepare();
  body();
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    prepare();
    ev.start(s);
    body();
    ev.stop(s);
    out.push_back(ev.seconds());
  }
  return out;
}

}  // namespace

const char* hybrid_gpu_kernel(bool is_double) { return is_double ? "tensor" : "regblock"; }

void check_gpu_options(const std::string& kernel, bool is_double, const GpuOptions& o) {
  if (o.tile != 4 && o.tile != 8 && o.tile != 16 && o.tile != 32)
    throw UsageError(strprintf("--tile=%d: use 4, 8, 16 or 32 (W×W threads per block, at most 1024)", o.tile));
  if (o.reps < 1) throw UsageError(strprintf("--reps=%d must be at least 1", o.reps));
  if (kernel == "tensor" && !is_double && !o.allow_tf32)
    throw UsageError("--kernel=tensor in float runs on TF32 (10-bit mantissa inputs, ~1e-3 relative error); "
                     "add --allow-tf32 to accept that, or use --precision=double (FP64 tensor cores)");
  if (o.mma != 0 && o.mma != 884 && o.mma != 1684 && o.mma != 1688)
    throw UsageError(strprintf("--mma=%d: use 884, 1684 or 1688", o.mma));
}

std::string gpu_math(const std::string& kernel, bool is_double, const GpuOptions& o) {
  if (kernel == "tensor") {
    if (!is_double) return kg::MmaTf32m16n8k8::name;
    const int shape = o.mma ? o.mma : default_mma();
    return shape == 884 ? kg::MmaF64m8n8k4::name : shape == 1688 ? kg::MmaF64m16n8k8::name : kg::MmaF64m16n8k4::name;
  }
  return is_double ? "fp64" : "fp32";
}

template <class T>
Timing gpu_run(const std::string& kernel, const Problem<T>& p, const GpuOptions& o, T* out, T* ref, T* scale,
               double* ref_seconds) {
  const bool is_double = sizeof(T) == 8;
  check_gpu_options(kernel, is_double, o);
  if (kernel == "tensor" && is_double && (o.mma == 1684 || o.mma == 1688) && compute_capability() < 90)
    throw UsageError(strprintf("--mma=%d needs sm_90 (this device is sm_%d)", o.mma, compute_capability()));
  const std::size_t mn = std::size_t(p.m) * std::size_t(p.n);
  const std::size_t operand_elems = p.a.size() + p.b.size() + p.c.size() + mn;
  const std::size_t check_elems = ref ? 2 * mn + p.a.size() + p.b.size() + p.c.size() : 0;
  check_memory((operand_elems + check_elems) * sizeof(T), kernel);

  Stream stream;
  Cublas blas(stream);
  Timing t;
  DeviceBuffer<T> da(p.a.size()), db(p.b.size()), dc(p.c.size()), dd(mn);
  GemmArgs<T> g = p.args(dd.get());
  g.a = da.get();
  g.b = db.get();
  g.c = p.op == Op::nt ? dc.get() : nullptr;
  {
    gpu::PinnedRegion pa(p.a.data(), p.a.size() * sizeof(T)), pb(p.b.data(), p.b.size() * sizeof(T));
    gpu::PinnedRegion pc(p.c.data(), p.c.size() * sizeof(T));
    Events ev;
    ev.start(stream);
    CUDA_CHECK(cudaMemcpyAsync(da.get(), p.a.data(), p.a.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(db.get(), p.b.data(), p.b.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    if (p.op == Op::nt)
      CUDA_CHECK(cudaMemcpyAsync(dc.get(), p.c.data(), p.c.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    ev.stop(stream);
    t.h2d = ev.seconds();
  }
  // cuBLAS computes nt in place (D = A·Bᵀ + D): D is refilled with C before each run, untimed.
  const auto refill = [&](T* d) {
    if (p.op == Op::nt) CUDA_CHECK(cudaMemcpyAsync(d, dc.get(), mn * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  };
  if (kernel == "cublas")
    t.kernel_reps = time_reps(stream, o.reps, [&] { run_cublas(blas, g); }, [&] { refill(g.d); });
  else
    t.kernel_reps = time_reps(stream, o.reps, [&] { launch(kernel, g, o, stream); }, [] {});
  t.kernel = median(t.kernel_reps);
  {
    gpu::PinnedRegion po(out, mn * sizeof(T), true);
    Events ev;
    ev.start(stream);
    CUDA_CHECK(cudaMemcpyAsync(out, dd.get(), mn * sizeof(T), cudaMemcpyDeviceToHost, stream));
    ev.stop(stream);
    t.d2h = ev.seconds();
  }
  t.total = t.h2d + t.kernel + t.d2h;

  if (ref) {
    GemmArgs<T> r = g;
    DeviceBuffer<T> dr(mn);
    r.d = dr.get();
    const auto times = time_reps(stream, o.reps, [&] { run_cublas(blas, r); }, [&] { refill(r.d); });
    if (ref_seconds) *ref_seconds = median(times);
    CUDA_CHECK(cudaMemcpyAsync(ref, dr.get(), mn * sizeof(T), cudaMemcpyDeviceToHost, stream));
    if (scale) {
      // |A|·|B| + |C| by cuBLAS on absolute copies (the abs copies reuse the operand buffers
      // only after the result and reference are safely downloaded).
      CUDA_CHECK(cudaStreamSynchronize(stream));
      absolute<<<1024, 256, 0, stream>>>(da.get(), da.get(), da.size());
      CUDA_CHECK_LAUNCH();
      absolute<<<1024, 256, 0, stream>>>(db.get(), db.get(), db.size());
      CUDA_CHECK_LAUNCH();
      if (p.op == Op::nt) {
        absolute<<<1024, 256, 0, stream>>>(dc.get(), dr.get(), dc.size());
        CUDA_CHECK_LAUNCH();
      }
      run_cublas(blas, r);
      CUDA_CHECK(cudaMemcpyAsync(scale, dr.get(), mn * sizeof(T), cudaMemcpyDeviceToHost, stream));
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return t;
}

template <class T>
Timing hybrid_run(const Problem<T>& p, int gpu_rows, const GpuOptions& o, int threads, T* out) {
  const bool is_double = sizeof(T) == 8;
  const char* kernel = hybrid_gpu_kernel(is_double);
  GpuOptions go = o;
  go.allow_tf32 = false;
  check_gpu_options(kernel, is_double, go);
  gpu_rows = std::clamp(gpu_rows, 0, p.m);
  const int cpu_rows = p.m - gpu_rows;
  const std::size_t n = std::size_t(p.n), k = std::size_t(p.k);
  const GemmArgs<T> whole = p.args(out);

  // GPU share: rows [0, gpu_rows). A's rows are contiguous for nn/nt; for tn they are A's
  // first columns, so the whole of A goes up and lda stays m.
  const std::size_t a_up = gpu_rows == 0 ? 0 : p.op == Op::tn ? p.a.size() : std::size_t(gpu_rows) * k;
  const std::size_t b_up = gpu_rows == 0 ? 0 : p.b.size();
  const std::size_t c_up = gpu_rows == 0 || p.op != Op::nt ? 0 : std::size_t(gpu_rows) * n;
  const std::size_t d_up = std::size_t(gpu_rows) * n;
  if (gpu_rows) check_memory((a_up + b_up + c_up + d_up) * sizeof(T), "hybrid");
  Stream stream;
  DeviceBuffer<T> da(a_up), db(b_up), dc(c_up), dd(d_up);
  GemmArgs<T> g = whole;
  g.m = gpu_rows;
  g.a = da.get();
  g.b = db.get();
  g.c = c_up ? dc.get() : nullptr;
  g.d = dd.get();
  GemmArgs<T> c = whole;  // CPU share: rows [gpu_rows, m)
  c.m = cpu_rows;
  c.a = p.op == Op::tn ? whole.a + gpu_rows : whole.a + std::size_t(gpu_rows) * whole.lda;
  if (p.op == Op::nt) c.c = whole.c + std::size_t(gpu_rows) * n;
  c.d = out + std::size_t(gpu_rows) * n;

  gpu::PinnedRegion pa(p.a.data(), p.a.size() * sizeof(T)), pb(p.b.data(), p.b.size() * sizeof(T));
  gpu::PinnedRegion pc(p.c.data(), p.c.size() * sizeof(T)), po(out, std::size_t(p.m) * n * sizeof(T), true);
  Events up, run, down;
  Timing t;
  std::vector<double> walls, cpus, h2ds, d2hs;
  for (int r = 0; r <= o.reps; ++r) {  // r = 0 is the warm-up
    Stopwatch wall;
    if (gpu_rows) {
      up.start(stream);
      CUDA_CHECK(cudaMemcpyAsync(da.get(), p.a.data(), a_up * sizeof(T), cudaMemcpyHostToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(db.get(), p.b.data(), b_up * sizeof(T), cudaMemcpyHostToDevice, stream));
      if (c_up) CUDA_CHECK(cudaMemcpyAsync(dc.get(), p.c.data(), c_up * sizeof(T), cudaMemcpyHostToDevice, stream));
      up.stop(stream);
      run.start(stream);
      launch(kernel, g, go, stream);
      run.stop(stream);
      down.start(stream);
      CUDA_CHECK(cudaMemcpyAsync(out, dd.get(), d_up * sizeof(T), cudaMemcpyDeviceToHost, stream));
      down.stop(stream);
    }
    Stopwatch cpu;
    if (cpu_rows) cpu_blocked(c, threads);  // meanwhile, on this thread's OpenMP team
    const double cpu_s = cpu.seconds();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const double wall_s = wall.seconds();
    if (r == 0) continue;
    walls.push_back(wall_s);
    cpus.push_back(cpu_s);
    if (gpu_rows) {
      h2ds.push_back(up.seconds());
      t.kernel_reps.push_back(run.seconds());
      d2hs.push_back(down.seconds());
    }
  }
  t.total = median(walls);
  t.cpu = median(cpus);
  t.h2d = median(h2ds);
  t.kernel = median(t.kernel_reps);
  t.d2h = median(d2hs);
  return t;
}

template Timing gpu_run<float>(const std::string&, const Problem<float>&, const GpuOptions&, float*, float*, float*,
                               double*);
template Timing gpu_run<double>(const std::string&, const Problem<double>&, const GpuOptions&, double*, double*,
                                double*, double*);
template Timing hybrid_run<float>(const Problem<float>&, int, const GpuOptions&, int, float*);
template Timing hybrid_run<double>(const Problem<double>&, int, const GpuOptions&, int, double*);

}  // namespace km::gemm
