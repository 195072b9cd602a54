// gemm: the GEMM workload's command line. Runs one kernel on one product, validates it
// against the reference measured in the same run, and reports. Every failure ends as one
// line on stderr, "gemm: error: ...", exit 2 (options), 1 (device or data), 3 (the result
// failed validation).
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <string>

#include "cli/options.hpp"
#include "common/errors.hpp"
#include "gemm/registry.hpp"
#include "gemm/runner.hpp"

namespace {

int to_dim(long long v, const char* option) {
  if (v < 1 || v > 2147483647LL) throw km::UsageError(km::strprintf("%s=%lld must be in 1..2147483647", option, v));
  return static_cast<int>(v);
}

int run_main(int argc, char** argv) {
  km::cli::ignore_file_size_signal();
  CLI::App app{"gemm: C=A·B, C=Aᵀ·B and D=A·Bᵀ+C through naive to tensor-core kernels, on the GPU and the CPU",
               "gemm"};
  app.footer(km::gemm::kernels_help());
  app.option_defaults()->always_capture_default();
  std::string kernel = "cublas", op = "nn", precision = "double", report = "table";
  std::optional<long long> m, n, k, size;
  long long tile = 16, reps = 5, threads = 0, mma = 0;
  unsigned long long seed = 0;
  std::optional<double> cpu_fraction;
  bool allow_tf32 = false, no_check = false, list = false;
  app.add_option("--kernel", kernel, "kernel (see below)");
  app.add_option("--op", op, "nn: C=A·B, tn: C=Aᵀ·B, nt: D=A·Bᵀ+C");
  const auto integer = km::cli::decimal_integer();
  auto* mo = app.add_option("--m", m, "rows of the result")->transform(integer);
  auto* no = app.add_option("--n", n, "columns of the result")->transform(integer);
  auto* ko = app.add_option("--k", k, "inner dimension")->transform(integer);
  auto* so = app.add_option("--size", size, "m = n = k = N [1024]")->transform(integer);
  app.add_option("--tile", tile, "W of the naive/coalesced blocks and the shared tiles: 4, 8, 16, 32")->transform(integer);
  app.add_option("--precision", precision, "double or float");
  app.add_option("--reps", reps, "timed repetitions after a warm-up (the median is reported)")->transform(integer);
  app.add_option("--threads", threads, "CPU threads (CPU kernels, the CPU reference, hybrid; default all)")
      ->transform(integer);
  app.add_option("--cpu-fraction", cpu_fraction, "hybrid: share of rows on the CPU (default: from measured rates)");
  app.add_flag("--allow-tf32", allow_tf32, "let tensor run float on TF32 (reported as such)");
  app.add_option("--mma", mma, "tensor in double: mma shape 884, 1684 or 1688 (default 1684 on sm_90)")->transform(integer);
  app.add_option("--seed", seed, "seed of the random operands (0..2^64-1)")
      ->transform(km::cli::decimal_integer(false));
  app.add_flag("--no-check", no_check, "skip the validation (the report says so)");
  app.add_option("--report", report, "table, json or csv");
  km::cli::add_version_flag(app, "gemm");
  app.add_flag("--list", list, "print the kernels as JSON (name, description, where, order) and exit");
  so->excludes(mo)->excludes(no)->excludes(ko);

  try {
    km::cli::reject_empty_values(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "gemm: error: " << e.what() << "\n";
    return 2;
  }

  if (list) {
    std::cout << km::gemm::kernels_json() << "\n";
    return 0;
  }

  try {
    km::cli::clamp_openmp_threads("gemm");
    km::gemm::RunOptions o;
    o.kernel = kernel;
    km::gemm::find_kernel(kernel);
    o.op = km::gemm::parse_op(op);
    const long long base = size.value_or(1024);
    o.m = to_dim(m.value_or(base), "--m");
    o.n = to_dim(n.value_or(base), "--n");
    o.k = to_dim(k.value_or(base), "--k");
    if (precision != "double" && precision != "float")
      throw km::UsageError("--precision=" + precision + " is not double or float");
    o.is_double = precision == "double";
    if (report != "table" && report != "json" && report != "csv")
      throw km::UsageError("--report=" + report + " is not table, json or csv");
    if (threads < 0 || threads > km::cli::kMaxThreads)
      throw km::UsageError(km::strprintf("--threads=%lld must be in 0..%d", threads, km::cli::kMaxThreads));
    if (reps < 1 || reps > 1000) throw km::UsageError(km::strprintf("--reps=%lld must be in 1..1000", reps));
    if (tile != 4 && tile != 8 && tile != 16 && tile != 32)
      throw km::UsageError(km::strprintf("--tile=%lld: use 4, 8, 16 or 32", tile));
    o.gpu.tile = static_cast<int>(tile);
    o.gpu.reps = static_cast<int>(reps);
    o.gpu.allow_tf32 = allow_tf32;
    if (mma != 0 && mma != 884 && mma != 1684 && mma != 1688)
      throw km::UsageError(km::strprintf("--mma=%lld: use 884, 1684 or 1688", mma));
    o.gpu.mma = static_cast<int>(mma);
    o.threads = static_cast<int>(threads);
    o.cpu_fraction = cpu_fraction;
    if (cpu_fraction && kernel != "hybrid") throw km::UsageError("--cpu-fraction applies to --kernel=hybrid only");
    if (cpu_fraction && !(*cpu_fraction >= 0 && *cpu_fraction <= 1))  // (NaN too; before the GPU is looked for)
      throw km::UsageError(km::strprintf("--cpu-fraction=%g must be in [0, 1]", *cpu_fraction));
    o.check = !no_check;
    o.seed = static_cast<std::uint64_t>(seed);

    const km::gemm::GemmReport r = km::gemm::run(o);
    if (report == "json") km::gemm::write_json(std::cout, r);
    else if (report == "csv") km::gemm::write_csv(std::cout, r, true);
    else km::gemm::write_table(std::cout, r);
    std::cout.flush();
    if (!r.passed()) {
      std::cerr << "gemm: error: " << kernel << " " << op << " " << precision << " failed validation against "
                << r.reference << ": "
                << (r.check.passed() ? r.constant.first_mismatches : r.check.first_mismatches) << "\n";
      return 3;
    }
    return 0;
  } catch (const km::UsageError& e) {
    std::cerr << "gemm: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "gemm: error: out of host memory for the matrices; use a smaller size\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gemm: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { return km::cli::stdout_status("gemm", run_main(argc, argv)); }
