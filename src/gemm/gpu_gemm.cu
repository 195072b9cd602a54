#include "gemm/gpu_gemm.hpp"

#include <algorithm>

#include "common/stats.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "cuda/timer.hpp"
#include "gemm/cpu_gemm.hpp"
#include "gemm/registry.hpp"

namespace km::gemm {

using cuda::DeviceBuffer;
using cuda::EventPair;

namespace {

template <class T>
__global__ void absolute(const T* in, T* out, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = in[i] < T(0) ? -in[i] : in[i];
}

void check_memory(std::size_t bytes, const std::string& kernel) {
  check_device_memory(bytes, "--kernel=" + kernel + " (operands, result, reference)",
                      "use a smaller size or --precision=float");
}

// The registry entry of a GPU kernel, or UsageError.
const KernelInfo& gpu_kernel(const std::string& name) {
  const KernelInfo& info = find_kernel(name);
  if (info.where != Where::gpu) throw UsageError("not a GPU kernel: " + name);
  return info;
}

}  // namespace

const char* hybrid_gpu_kernel(bool is_double) { return is_double ? "tensor" : "regblock"; }

void check_gpu_options(const std::string& kernel, bool is_double, const GpuOptions& o) {
  if (o.tile != 4 && o.tile != 8 && o.tile != 16 && o.tile != 32)
    throw UsageError(strprintf("--tile=%d: use 4, 8, 16 or 32 (W×W threads per block, at most 1024)", o.tile));
  if (o.reps < 1) throw UsageError(strprintf("--reps=%d must be at least 1", o.reps));
  if (o.mma != 0 && o.mma != 884 && o.mma != 1684 && o.mma != 1688)
    throw UsageError(strprintf("--mma=%d: use 884, 1684 or 1688", o.mma));
  const KernelInfo& info = find_kernel(kernel);
  if (info.supports) {
    const Support s = info.supports(is_double, o, gpu_info());
    if (!s.ok) throw UsageError(s.reason);
  }
}

std::string gpu_math(const std::string& kernel, bool is_double, const GpuOptions& o) {
  const KernelInfo& info = find_kernel(kernel);
  return info.math ? info.math(is_double, o) : is_double ? "fp64" : "fp32";
}

template <class T>
Timing gpu_run(const std::string& kernel, const Problem<T>& p, const GpuOptions& o, T* out, T* ref, T* scale,
               double* ref_seconds) {
  const bool is_double = sizeof(T) == 8;
  check_gpu_options(kernel, is_double, o);
  const GpuLaunch<T> launch = gpu_kernel(kernel).gpu<T>();
  const GpuLaunch<T> reference = find_kernel("cublas").gpu<T>();
  const std::size_t mn = std::size_t(p.m) * std::size_t(p.n);
  const std::size_t operand_elems = p.a.size() + p.b.size() + p.c.size() + mn;
  const std::size_t check_elems = ref ? 2 * mn + p.a.size() + p.b.size() + p.c.size() : 0;
  check_memory((operand_elems + check_elems) * sizeof(T), kernel);

  cuda::Stream stream;
  cuda::CublasHandle blas(stream);
  Timing t;
  DeviceBuffer<T> da(p.a.size()), db(p.b.size()), dc(p.c.size()), dd(mn);
  GemmArgs<T> g = p.args(dd.get());
  g.a = da.get();
  g.b = db.get();
  g.c = p.op == Op::nt ? dc.get() : nullptr;
  {
    cuda::PinnedRegion pa(p.a.data(), p.a.size() * sizeof(T)), pb(p.b.data(), p.b.size() * sizeof(T));
    cuda::PinnedRegion pc(p.c.data(), p.c.size() * sizeof(T));
    EventPair ev;
    ev.start(stream);
    CUDA_CHECK(cudaMemcpyAsync(da.get(), p.a.data(), p.a.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(db.get(), p.b.data(), p.b.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    if (p.op == Op::nt)
      CUDA_CHECK(cudaMemcpyAsync(dc.get(), p.c.data(), p.c.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    ev.stop(stream);
    t.h2d = ev.seconds();
  }
  // cuBLAS computes nt in place (D = A·Bᵀ + D): D is refilled with C before each of its
  // runs, untimed. The other kernels read C and write D.
  const auto refill = [&](T* d) {
    if (p.op == Op::nt && launch == reference) CUDA_CHECK(cudaMemcpyAsync(d, dc.get(), mn * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  };
  const auto run = [&](GpuLaunch<T> f, const GemmArgs<T>& args) {
    f(args, o, stream, blas);
    CUDA_CHECK_LAUNCH();
  };
  t.kernel_reps = cuda::time_reps(stream, o.reps, [&] { run(launch, g); }, [&] { refill(g.d); });
  t.kernel = median(t.kernel_reps);
  {
    cuda::PinnedRegion po(out, mn * sizeof(T), true);
    EventPair ev;
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
    const auto times = cuda::time_reps(stream, o.reps, [&] { run(reference, r); }, [&] {
      if (p.op == Op::nt) CUDA_CHECK(cudaMemcpyAsync(r.d, dc.get(), mn * sizeof(T), cudaMemcpyDeviceToDevice, stream));
    });
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
      run(reference, r);
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
  const GpuLaunch<T> launch = gpu_kernel(kernel).gpu<T>();
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
  cuda::Stream stream;
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

  cuda::PinnedRegion pa(p.a.data(), p.a.size() * sizeof(T)), pb(p.b.data(), p.b.size() * sizeof(T));
  cuda::PinnedRegion pc(p.c.data(), p.c.size() * sizeof(T)), po(out, std::size_t(p.m) * n * sizeof(T), true);
  EventPair up, run, down;
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
      launch(g, go, stream, nullptr);
      CUDA_CHECK_LAUNCH();
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
