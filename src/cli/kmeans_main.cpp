// kmeans: the command-line front end. Every failure ends as one line on stderr,
// "kmeans: error: ...", and a non-zero exit (2 for bad options, 1 for bad data or device).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "cli/kmeans_options.hpp"
#include "cli/options.hpp"
#include "common/errors.hpp"
#include "common/progress.hpp"
#include "cuda/device.hpp"
#include "io/generate.hpp"
#include "io/load.hpp"
#include "io/write.hpp"
#include "kmeans/registry.hpp"
#include "report/report.hpp"

namespace {

using Options = km::cli::KmeansOptions;

template <class T>
int run_kmeans(const Options& o, const km::Implementation& impl, const km::Params& params) {
  km::Stopwatch load_watch;
  km::Dataset<T> data;
  if (!o.input.empty()) {
    km::LoadOptions lo;
    lo.dataset = o.dataset;
    if (o.coords_given) lo.coords = static_cast<std::size_t>(o.coords);
    data = km::load<T>(o.input, lo);
  } else {
    // Generated data takes its dimension from given centroids unless --coords says otherwise.
    const auto d = params.init == km::Init::given && !o.coords_given ? params.given_d : static_cast<std::size_t>(o.coords);
    const std::size_t n = o.objects ? static_cast<std::size_t>(*o.objects) : km::objects_for_size(*o.size_mb, d);
    km::check_clusters(params.k, n);  // before the generator allocates K centres
    if (o.generator == "blobs") {
      km::BlobOptions bo;
      bo.n = n;
      bo.d = d;
      bo.k = static_cast<std::size_t>(params.k);
      bo.seed = o.seed;
      data = std::move(km::generate_blobs<T>(bo).data);
    } else {
      data = km::generate_uniform<T>(n, d, o.seed);
    }
  }
  const double load_seconds = load_watch.seconds();

  const bool predicting = !o.predict.empty();
  km::Result<T> result =
      predicting ? km::predict(impl, data, params)
                 : km::run(impl, data, params, [&](int it, const km::IterationStats& s) {
                     km::progress::update("iterations", it, params.loops * params.n_init, "iterations",
                                          km::strprintf("%lld changed, inertia %.6e", static_cast<long long>(s.changed),
                                                        s.inertia));
                   });
  km::progress::end_stage();
  result.seconds.load = load_seconds;

  if (!o.output.empty()) {
    km::Stopwatch write_watch;
    km::ResultView<T> view{result.centroids.data(), static_cast<std::size_t>(params.k), data.d,
                           result.labels.data(), data.n, result.inertia, result.iterations};
    km::write_result(o.output, view);
    result.seconds.write = write_watch.seconds();
  }

  km::RunReport r = km::make_report(impl.name, data, params, result);
  if (predicting) r.init = "predict";
  if (o.report == "json")
    km::write_json(std::cout, r);
  else if (o.report == "csv")
    km::write_csv(std::cout, r);
  else if (!o.quiet || o.report == "table")
    km::write_table(std::cout, r);
  std::cout.flush();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"kmeans: Lloyd k-means on the CPU and the GPU, with per-iteration timing", "kmeans"};
  km::cli::add_kmeans_options(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kmeans: error: %s (see --help)\n", e.what());
    return 2;
  }

  if (o.list) {  // with --coords and --clusters: whether each runs that shape here, and its path
    const bool shape = app.count("--coords") && app.count("--clusters") && o.coords > 0 && o.clusters > 0;
    std::printf("%s\n", km::registry_json(shape ? static_cast<std::size_t>(o.clusters) : 0,
                                          shape ? static_cast<std::size_t>(o.coords) : 0,
                                          o.precision == "float" ? 4 : 8)
                            .c_str());
    return 0;
  }

  try {
    km::cli::clamp_openmp_threads("kmeans");
    if (!o.quiet) km::progress::enable("kmeans");
    const km::Params params = km::cli::check_kmeans_options(app, o);
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
