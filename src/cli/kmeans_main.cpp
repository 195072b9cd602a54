// kmeans: the command-line front end. Every failure ends as one line on stderr,
// "kmeans: error: ...", and a non-zero exit (2 for bad options, 1 for bad data or device).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "cli/options.hpp"
#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "io/generate.hpp"
#include "io/load.hpp"
#include "io/write.hpp"
#include "kmeans/registry.hpp"
#include "report/report.hpp"

namespace {

struct Options {
  std::string impl;
  std::optional<double> size_mb;
  std::optional<long long> objects;
  std::string input, dataset, generator = "uniform";
  long long coords = 16;
  bool coords_given = false;
  long long clusters = 16;
  unsigned long long seed = 0;
  long long loops = 10;
  double threshold = 0;
  std::optional<double> tol;
  std::string init = "first", precision = "double", output, report = "table";
  long long block = 128, threads = 0;
  bool quiet = false;
  bool list = false;
};

int to_int(long long v, const char* option) {
  if (v < -2147483647LL || v > 2147483647LL)
    throw km::UsageError(km::strprintf("%s=%lld is out of range", option, v));
  return static_cast<int>(v);
}

// Prints progress once the run has lasted more than a second, unless --quiet.
class Progress {
 public:
  Progress(bool quiet, int loops) : quiet_(quiet), loops_(loops), tty_(::isatty(2) != 0) {}
  void iteration(int it, const km::IterationStats& s) {
    if (quiet_ || watch_.seconds() < 1.0) return;
    std::fprintf(stderr, "%skmeans: iteration %d/%d, %lld changed, %.3f s%s", tty_ ? "\r" : "", it, loops_,
                 static_cast<long long>(s.changed), s.total, tty_ ? "   " : "\n");
    printed_ = true;
  }
  void note(const std::string& what) {
    if (!quiet_ && watch_.seconds() >= 1.0) std::fprintf(stderr, "kmeans: %s\n", what.c_str());
  }
  void done() {
    if (printed_ && tty_) std::fputc('\n', stderr);
  }

 private:
  bool quiet_;
  int loops_;
  bool tty_;
  bool printed_ = false;
  km::Stopwatch watch_;
};

template <class T>
int run_kmeans(const Options& o, const km::Implementation& impl, const km::Params& params) {
  Progress progress(o.quiet, params.loops);
  km::Stopwatch load_watch;
  km::Dataset<T> data;
  if (!o.input.empty()) {
    km::LoadOptions lo;
    lo.dataset = o.dataset;
    if (o.coords_given) lo.coords = static_cast<std::size_t>(o.coords);
    data = km::load<T>(o.input, lo);
  } else {
    const auto d = static_cast<std::size_t>(o.coords);
    const std::size_t n = o.objects ? static_cast<std::size_t>(*o.objects) : km::objects_for_size(*o.size_mb, d);
    km::check_clusters(params.k, n);  // before the generator allocates K centres
    if (o.generator == "blobs") {
      km::BlobOptions bo;
      bo.n = n;
      bo.d = d;
      bo.k = static_cast<std::size_t>(o.clusters);
      bo.seed = o.seed;
      data = std::move(km::generate_blobs<T>(bo).data);
    } else {
      data = km::generate_uniform<T>(n, d, o.seed);
    }
  }
  const double load_seconds = load_watch.seconds();
  progress.note(km::strprintf("%s %zu objects x %zu coords in %.2f s", o.input.empty() ? "generated" : "loaded",
                              data.n, data.d, load_seconds));

  km::Result<T> result =
      km::run(impl, data, params, [&](int it, const km::IterationStats& s) { progress.iteration(it, s); });
  progress.done();
  result.seconds.load = load_seconds;

  if (!o.output.empty()) {
    km::ResultView<T> view{result.centroids.data(), static_cast<std::size_t>(params.k), data.d,
                           result.labels.data(), data.n, result.inertia, result.iterations};
    km::write_result(o.output, view);
  }

  const km::RunReport r = km::make_report(impl.name, data, params, result);
  if (o.report == "json")
    km::write_json(std::cout, r);
  else if (o.report == "csv")
    km::write_csv(std::cout, r);
  else if (!o.quiet || o.report == "table")
    km::write_table(std::cout, r);
  std::cout.flush();
  return 0;
}

std::string implementations_help() {
  std::string text = "Implementations (--impl):\n";
  for (const km::Implementation* impl : km::implementations())
    text += km::strprintf("  %-14s %s%s\n", impl->name, impl->description, impl->needs_gpu() ? " [GPU]" : "");
  text += "Default: fused when a GPU is present, else omp.\n";
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"kmeans: Lloyd k-means on the CPU and the GPU, with per-iteration timing", "kmeans"};
  app.footer(implementations_help());
  app.option_defaults()->always_capture_default();
  app.add_option("--impl", o.impl, "implementation (see below)");
  auto* size = app.add_option("--size", o.size_mb, "lab data of this many MB: MB*2^20/(coords*8) objects [256]");
  auto* objects = app.add_option("--objects", o.objects, "generate this many objects")->transform(km::cli::decimal_integer());
  auto* input = app.add_option("--input", o.input, "read data from .h5/.hdf5/.csv/.npy/.bin/.txt");
  app.add_option("--dataset", o.dataset, "HDF5 dataset to read (default: the only 2-D dataset)");
  auto* generator = app.add_option("--generator", o.generator, "generated data: uniform or blobs");
  app.add_option("--coords", o.coords, "coordinates per object (generated data; checked against files)")
      ->transform(km::cli::decimal_integer());
  app.add_option("--clusters", o.clusters, "number of clusters K")->transform(km::cli::decimal_integer());
  app.add_option("--seed", o.seed, "seed for generated data and random/kmeans++ init (0..2^64-1)")
      ->transform(km::cli::decimal_integer(false));
  app.add_option("--loops", o.loops, "at most this many iterations")->transform(km::cli::decimal_integer());
  app.add_option("--threshold", o.threshold, "stop when the fraction of objects that changed is <= T");
  app.add_option("--tol", o.tol, "stop when the summed squared centroid shift is <= X (default off)");
  app.add_option("--init", o.init, "initial centroids: first, random or kmeans++");
  app.add_option("--precision", o.precision, "double or float");
  app.add_option("--block", o.block, "GPU threads per block (multiple of 32 in 32..1024)")
      ->transform(km::cli::decimal_integer());
  app.add_option("--threads", o.threads, "CPU threads (default: all cores; at most 1024)")
      ->transform(km::cli::decimal_integer());
  app.add_option("--output", o.output, "write centroids and labels to .h5/.hdf5 or .csv");
  app.add_option("--report", o.report, "report format: table, json or csv");
  app.add_flag("--quiet", o.quiet, "no progress on stderr");
  app.add_flag("--list", o.list, "print the implementations as JSON (name, description, where, order) and exit");
  size->excludes(objects);
  input->excludes(size)->excludes(objects)->excludes(generator);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kmeans: error: %s (see --help)\n", e.what());
    return 2;
  }

  if (o.list) {
    std::printf("%s\n", km::registry_json().c_str());
    return 0;
  }

  try {
    km::cli::clamp_openmp_threads("kmeans");
    if (app.count("--input") && o.input.empty()) throw km::UsageError("--input: the path is empty");
    if (app.count("--output") && o.output.empty()) throw km::UsageError("--output: the path is empty");
    if (o.threads < 0 || o.threads > km::cli::kMaxThreads)
      throw km::UsageError(km::strprintf("--threads=%lld must be in 0..%d (0: all cores)", o.threads,
                                         km::cli::kMaxThreads));
    o.coords_given = app.count("--coords") > 0;
    if (o.coords < 1) throw km::UsageError(km::strprintf("--coords=%lld: must be at least 1", o.coords));
    if (o.objects && *o.objects <= 0)
      throw km::UsageError(km::strprintf("--objects=%lld: must be positive", *o.objects));
    if (o.size_mb && !(*o.size_mb > 0 && std::isfinite(*o.size_mb)))
      throw km::UsageError(km::strprintf("--size=%g: must be a finite positive number of MB", *o.size_mb));
    if (!o.size_mb && !o.objects) o.size_mb = 256.0;
    if (o.generator != "uniform" && o.generator != "blobs")
      throw km::UsageError("--generator must be uniform or blobs, not '" + o.generator + "'");
    if (!o.dataset.empty() && (o.input.empty() || km::format_from_path(o.input) != km::Format::hdf5))
      throw km::UsageError("--dataset applies only to an .h5/.hdf5 --input");
    if (o.precision != "double" && o.precision != "float")
      throw km::UsageError("--precision must be double or float, not '" + o.precision + "'");
    if (o.report != "table" && o.report != "json" && o.report != "csv")
      throw km::UsageError("--report must be table, json or csv, not '" + o.report + "'");

    km::Params params;
    params.k = to_int(o.clusters, "--clusters");
    params.loops = to_int(o.loops, "--loops");
    params.threshold = o.threshold;
    params.tol = o.tol;
    params.init = km::init_from_string(o.init);
    params.seed = o.seed;
    params.block = to_int(o.block, "--block");
    params.threads = to_int(o.threads, "--threads");
    km::validate(params);
    if (!o.output.empty()) km::check_output_path(o.output, o.input);

    const km::GpuInfo& gpu = km::gpu_info();
    const std::string name = o.impl.empty() ? km::default_implementation(gpu.present) : o.impl;
    const km::Implementation& impl = km::find_implementation(name);
    km::require_runnable(impl, gpu);

    return o.precision == "float" ? run_kmeans<float>(o, impl, params) : run_kmeans<double>(o, impl, params);
  } catch (const km::UsageError& e) {
    std::fprintf(stderr, "kmeans: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kmeans: error: out of host memory; use fewer objects, coordinates or clusters\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kmeans: error: %s\n", e.what());
    return 1;
  }
}
