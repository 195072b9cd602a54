#include "gemm/runner.hpp"

#include <omp.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "common/stats.hpp"
#include "cuda/device.hpp"
#include "gemm/cpu_gemm.hpp"
#include "gemm/registry.hpp"
#include "report/report.hpp"
#include "timing/timer.hpp"

namespace km::gemm {

namespace {

template <class T>
double unit_roundoff() {
  return sizeof(T) == 8 ? kUnitRoundoffDouble : kUnitRoundoffFloat;
}

// Times a CPU kernel: `reps` runs (the first also touches the output pages), median.
template <class F>
Timing time_cpu(int reps, F&& body) {
  Timing t;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    Stopwatch w;
    body();
    t.kernel_reps.push_back(w.seconds());
  }
  t.kernel = t.cpu = t.total = median(t.kernel_reps);
  return t;
}

template <class T>
GemmReport run_typed(const RunOptions& o, const KernelInfo& info) {
  GemmReport r;
  r.kernel = o.kernel;
  r.op = op_name(o.op);
  r.precision = sizeof(T) == 8 ? "double" : "float";
  r.m = o.m;
  r.n = o.n;
  r.k = o.k;
  r.tile = info.uses_tile ? o.gpu.tile : 0;
  r.threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  r.reps = o.gpu.reps;
  const bool on_gpu = info.where != Where::cpu;
  if (on_gpu) {
    check_gpu_options(info.where == Where::hybrid ? hybrid_gpu_kernel(sizeof(T) == 8) : o.kernel, sizeof(T) == 8,
                      o.gpu);
    const GpuInfo& gi = gpu_info();
    if (!gi.present) throw DeviceError("--kernel=" + o.kernel + " needs a CUDA GPU: " + gi.why_absent);
    r.device = gi.name;
  } else {
    r.device = "cpu";
    if (o.gpu.reps < 1) throw UsageError(strprintf("--reps=%d must be at least 1", o.gpu.reps));
  }
  if (o.cpu_fraction && !(*o.cpu_fraction >= 0 && *o.cpu_fraction <= 1))  // (NaN too)
    throw UsageError(strprintf("--cpu-fraction=%g must be in [0, 1]", *o.cpu_fraction));

  const Problem<T> p = make_problem<T>(o.op, o.m, o.n, o.k, o.seed);
  const std::size_t mn = std::size_t(o.m) * std::size_t(o.n);
  HostBuffer<T> out(mn), ref(o.check ? mn : 0), scale(o.check ? mn : 0);
  const double flops = gemm_flops(o.op, o.m, o.n, o.k);
  double u_result = unit_roundoff<T>();

  if (info.where == Where::gpu) {
    r.math = gpu_math(o.kernel, sizeof(T) == 8, o.gpu);
    if (r.math.rfind("tf32", 0) == 0) u_result = kUnitRoundoffTf32;
    r.reference = "cublas";
    r.seconds = gpu_run<T>(o.kernel, p, o.gpu, out.data(), o.check ? ref.data() : nullptr,
                           o.check ? scale.data() : nullptr, &r.reference_seconds);
    if (!o.check) {  // the ratio to cuBLAS is still measured in this run
      HostBuffer<T> tmp(mn);
      Timing c = gpu_run<T>("cublas", p, o.gpu, tmp.data());
      r.reference_seconds = c.kernel;
    }
    r.gflops = flops / r.seconds.kernel * 1e-9;
  } else if (info.where == Where::cpu) {
    r.math = sizeof(T) == 8 ? "fp64" : "fp32";
    if (o.kernel == "cpu-blocked") r.math += std::string(" ") + cpu_blocked_isa();
    r.reference = openblas_name();
    const GemmArgs<T> g = p.args(out.data());
    r.seconds = time_cpu(o.gpu.reps, [&] { info.cpu<T>()(g, o.threads); });
    if (o.kernel == "cpu-blas" && !o.check) {
      r.reference_seconds = r.seconds.kernel;
    } else {
      HostBuffer<T> tmp(o.check ? 0 : mn);
      const GemmArgs<T> gr = p.args(o.check ? ref.data() : tmp.data());
      r.reference_seconds = time_cpu(o.gpu.reps, [&] { cpu_blas(gr, o.threads); }).kernel;
    }
    if (o.check) cpu_scale(p.args(nullptr), scale.data(), o.threads);
    r.gflops = flops / r.seconds.kernel * 1e-9;
  } else {  // hybrid
    const char* gk = hybrid_gpu_kernel(sizeof(T) == 8);
    r.math = std::string("GPU ") + gk + " (" + gpu_math(gk, sizeof(T) == 8, o.gpu) + ") + cpu-blocked (" +
             cpu_blocked_isa() + ")";
    r.reference = openblas_name();
    Timing gpu_alone = hybrid_run<T>(p, o.m, o.gpu, o.threads, out.data());
    int cpu_rows = 0;
    if (o.cpu_fraction) {
      cpu_rows = int(std::lround(*o.cpu_fraction * o.m));
      r.note = strprintf("split fixed by --cpu-fraction; GPU alone: %.6g s", gpu_alone.total);
    } else {
      // Rates from this run: the GPU's whole-product time (with transfers) and the CPU
      // kernel's time on a slice of rows; split so that both sides finish together.
      const int probe = std::clamp(o.m / 16, 1, o.m);
      GemmArgs<T> slice = p.args(out.data());
      slice.m = probe;
      Timing cpu_t = time_cpu(2, [&] { cpu_blocked(slice, o.threads); });
      const double cpu_rate = probe / cpu_t.kernel, gpu_rate = o.m / gpu_alone.total;
      cpu_rows = int(std::floor(o.m * cpu_rate / (cpu_rate + gpu_rate)));
      r.note = strprintf("auto split from measured rates: CPU %.4g rows/s, GPU %.4g rows/s (with transfers)",
                         cpu_rate, gpu_rate);
    }
    Timing t = gpu_alone;
    if (cpu_rows > 0) {
      t = hybrid_run<T>(p, o.m - cpu_rows, o.gpu, o.threads, out.data());
      if (!o.cpu_fraction && t.total >= gpu_alone.total) {
        r.note += strprintf("; the split (%d CPU rows) took %.6g s, not faster than GPU alone (%.6g s): kept GPU alone",
                            cpu_rows, t.total, gpu_alone.total);
        cpu_rows = 0;
        t = hybrid_run<T>(p, o.m, o.gpu, o.threads, out.data());
      }
    }
    r.cpu_fraction = double(cpu_rows) / o.m;
    r.seconds = t;
    if (o.check) {
      const GemmArgs<T> gr = p.args(ref.data());
      r.reference_seconds = time_cpu(1, [&] { cpu_blas(gr, o.threads); }).kernel;
      cpu_scale(p.args(nullptr), scale.data(), o.threads);
    }
    r.gflops = flops / r.seconds.total * 1e-9;
  }
  if (info.where != Where::gpu) {
    const std::string w = openblas_warning();
    if (!w.empty()) r.note += (r.note.empty() ? "" : "; ") + w;
  }
  r.gflops_with_transfers = flops / r.seconds.total * 1e-9;
  if (r.reference_seconds > 0) {
    r.reference_gflops = flops / r.reference_seconds * 1e-9;
    r.vs_reference = r.gflops / r.reference_gflops;
  }

  if (o.check) {
    r.checked = true;
    const double tol = (o.k + 2) * (u_result + unit_roundoff<T>());
    r.check = compare<T>(out.data(), ref.data(), scale.data(), o.m, o.n, std::size_t(o.n), tol);
    if constexpr (sizeof(T) == 8) {
      // Same kernel, same shape, A = B = C = 1 + 2⁻²⁵: catches any float/TF32 path.
      const Problem<double> cp = make_constant_problem<double>(o.op, o.m, o.n, o.k, kConstantValue);
      HostBuffer<double> cout(mn);
      GpuOptions once = o.gpu;
      once.reps = 1;
      if (info.where == Where::gpu) {
        gpu_run<double>(o.kernel, cp, once, cout.data());
      } else if (info.where == Where::cpu) {
        info.cpu<double>()(cp.args(cout.data()), o.threads);
      } else {
        hybrid_run<double>(cp, o.m - int(std::lround(*r.cpu_fraction * o.m)), once, o.threads, cout.data());
      }
      r.constant_checked = true;
      r.constant = check_constant(cout.data(), o.op, o.m, o.n, o.k, std::size_t(o.n));
    }
  }
  return r;
}

}  // namespace

GemmReport run(const RunOptions& o) {
  const KernelInfo& info = find_kernel(o.kernel);
  if (o.m < 1 || o.n < 1 || o.k < 1)
    throw UsageError(strprintf("matrix sizes must be positive (m=%d n=%d k=%d)", o.m, o.n, o.k));
  // Every host matrix at once (A, B, C for nt, the result, and the reference and the scale
  // when checking), before any is allocated or filled.
  const double m = o.m, n = o.n, k = o.k;
  const double elems = m * k + k * n + (o.op == Op::nt ? m * n : 0) + m * n * (o.check ? 3 : 1);
  check_host_memory(elems * (o.is_double ? 8 : 4), strprintf("m=%d n=%d k=%d (A, B, C and results)", o.m, o.n, o.k));
  return o.is_double ? run_typed<double>(o, info) : run_typed<float>(o, info);
}

void write_table(std::ostream& out, const GemmReport& r) {
  out << strprintf("gemm %s %s (%s), %s, m=%d n=%d k=%d", r.kernel.c_str(), r.op.c_str(),
                   op_formula(parse_op(r.op)), r.precision.c_str(), r.m, r.n, r.k);
  if (r.tile) out << strprintf(", tile %d", r.tile);
  out << "\n";
  out << strprintf("  device      %s (%s), %d threads for CPU work\n", r.device.c_str(), r.math.c_str(), r.threads);
  out << strprintf("  seconds     h2d %.6f  kernel %.6f (median of %d)  d2h %.6f  total %.6f\n", r.seconds.h2d,
                   r.seconds.kernel, r.reps, r.seconds.d2h, r.seconds.total);
  out << strprintf("  rate        %.3f TFLOP/s (%.3f with transfers)\n", r.gflops * 1e-3,
                   r.gflops_with_transfers * 1e-3);
  if (r.reference_seconds > 0)
    out << strprintf("  reference   %s %.6f s, %.3f TFLOP/s: this run is %.1f%% of it\n", r.reference.c_str(),
                     r.reference_seconds, r.reference_gflops * 1e-3, 100 * r.vs_reference);
  if (r.cpu_fraction) out << strprintf("  split       %.4f of the rows on the CPU\n", *r.cpu_fraction);
  if (!r.note.empty()) out << "  note        " << r.note << "\n";
  if (r.checked)
    out << strprintf("  check       %s: max error %.3g of the element scale (tolerance %.3g)\n",
                     r.check.passed() ? "passed" : "FAILED", r.check.max_rel_error, r.check.tolerance);
  else
    out << "  check       not checked (--no-check)\n";
  if (r.constant_checked)
    out << strprintf("  A=B=1+2^-25 %s: relative error %.3g (tolerance %.3g; a float or TF32 path gives 6e-8)\n",
                     r.constant.passed() ? "passed" : "FAILED", r.constant.max_rel_error, r.constant.tolerance);
}

void write_json(std::ostream& out, const GemmReport& r) {
  using json = nlohmann::ordered_json;
  const json null = nullptr;
  json j = {{"kernel", r.kernel},
            {"op", r.op},
            {"m", r.m},
            {"n", r.n},
            {"k", r.k},
            {"precision", r.precision},
            {"tile", r.tile},
            {"device", r.device},
            {"math", r.math},
            {"threads", r.threads},
            {"reps", r.reps},
            {"seconds",
             {{"h2d", r.seconds.h2d},
              {"kernel", r.seconds.kernel},
              {"d2h", r.seconds.d2h},
              {"cpu", r.seconds.cpu},
              {"total", r.seconds.total}}},
            {"gflops", r.gflops},
            {"gflops_with_transfers", r.gflops_with_transfers},
            {"max_rel_error", r.checked ? json(r.check.max_rel_error) : null},
            {"tolerance", r.checked ? json(r.check.tolerance) : null},
            {"checked", r.checked},
            {"constant_check", r.constant_checked ? json{{"max_rel_error", r.constant.max_rel_error},
                                                         {"passed", r.constant.passed()}}
                                                  : null},
            {"passed", r.passed()},
            {"reference", r.reference},
            {"reference_seconds", r.reference_seconds},
            {"reference_gflops", r.reference_gflops},
            {"vs_reference", r.vs_reference},
            {"cpu_fraction", r.cpu_fraction ? json(*r.cpu_fraction) : null},
            {"note", r.note}};
  out << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

std::string kernels_json() {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  int order = 0;
  for (const KernelInfo& k : kernels())
    list.push_back({{"name", k.name},
                    {"description", k.description},
                    {"where", k.where == Where::gpu ? "gpu" : k.where == Where::cpu ? "cpu" : "hybrid"},
                    {"order", order++},
                    {"uses_tile", k.uses_tile}});
  return list.dump();
}

void write_csv(std::ostream& out, const GemmReport& r, bool header) {
  if (header)
    out << "kernel,op,precision,m,n,k,tile,threads,device,math,h2d_s,kernel_s,d2h_s,cpu_s,total_s,tflops,"
           "tflops_with_transfers,reference,reference_s,reference_tflops,vs_reference,max_rel_error,tolerance,"
           "constant_error,passed,cpu_fraction\n";
  const auto quoted = [](const std::string& s) { return "\"" + s + "\""; };
  out << r.kernel << ',' << r.op << ',' << r.precision << ',' << r.m << ',' << r.n << ',' << r.k << ',' << r.tile
      << ',' << r.threads << ',' << quoted(r.device) << ',' << quoted(r.math) << ','
      << strprintf("%.9g,%.9g,%.9g,%.9g,%.9g,%.6g,%.6g,", r.seconds.h2d, r.seconds.kernel, r.seconds.d2h,
                   r.seconds.cpu, r.seconds.total, r.gflops * 1e-3, r.gflops_with_transfers * 1e-3)
      << r.reference << ',' << strprintf("%.9g,%.6g,%.6g,", r.reference_seconds, r.reference_gflops * 1e-3,
                                         r.vs_reference)
      << (r.checked ? strprintf("%.3g,%.3g", r.check.max_rel_error, r.check.tolerance) : std::string(","))
      << ',' << (r.constant_checked ? strprintf("%.3g", r.constant.max_rel_error) : std::string()) << ','
      << (r.passed() ? "true" : "false") << ',' << (r.cpu_fraction ? strprintf("%.6g", *r.cpu_fraction) : "") << '\n';
}

}  // namespace km::gemm
