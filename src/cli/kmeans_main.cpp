// kmeans: the command-line front end. Every failure ends as one line on stderr,
// "kmeans: error: ...", and a non-zero exit (2 for bad options, 1 for bad data or device).
// Under `mpirun -np R` (built with MPI), each rank generates its share of the rows or reads it
// (.h5 hyperslab, .npy/.bin by byte offset; .csv/.txt parsed whole and sliced),
// the ranks run the loop together (registry.hpp: run_parted), and rank 0 alone reports and
// writes; an error that only some ranks meet ends every rank (MPI_Abort).
#include <cstdlib>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/kmeans_batch.hpp"
#include "cli/kmeans_options.hpp"
#include "cli/options.hpp"
#include "common/errors.hpp"
#include "common/progress.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "io/generate.hpp"
#include "io/load.hpp"
#include "io/write.hpp"
#include "dist/team.hpp"
#include "kmeans/registry.hpp"
#include "report/report.hpp"

namespace {

using Options = km::cli::KmeansOptions;

// A failure that may be this rank's alone (its rows, its memory): one line, then every rank
// ends, so that none waits for this one in a collective.
[[noreturn]] void fail(km::Team& team, const std::string& what) {
  if (team.size() > 1)
    std::fprintf(stderr, "kmeans: error: rank %d: %s\n", team.rank(), what.c_str());
  else
    std::fprintf(stderr, "kmeans: error: %s\n", what.c_str());
  std::fflush(stderr);
  team.abort(1);
  std::exit(1);
}

// --weights=PATH: this rank's rows' sample weights, read as the data's rows are (a 1-D .npy, or
// one column of any input format), given to `data`.
template <class T>
void load_weights(const std::string& path, std::size_t batch, km::Team& team, const km::RowSplit& split,
                  km::Dataset<T>& data) {
  if (batch) throw km::UsageError("--weights applies to one problem, not to a batch (a 3-D --input)");
  km::LoadOptions lo;
  lo.column = true;
  lo.rank = team.rank();
  lo.ranks = team.size();
  km::RowSplit rows;
  lo.split = &rows;
  km::Dataset<T> w = km::load<T>(path, lo);
  if (w.d != 1)
    throw km::InputError(km::strprintf("--weights '%s': %zu values per row; one weight per object (a 1-D array or "
                                       "one column)",
                                       path.c_str(), w.d));
  if (rows.total != split.total)
    throw km::InputError(km::strprintf("--weights '%s' holds %zu weights for %zu objects", path.c_str(), rows.total,
                                       split.total));
  data.weights = std::move(w.values);
  // A rank without rows holds no weights, yet its fit is weighted (Dataset::weighted: a buffer).
  static const T kNone{};
  if (data.n == 0) data.weights = km::HostBuffer<T>::borrow(&kNone, 0);
}

// --on-device: the rows copied into GPU memory and the host's copy freed, so that the fit reads
// them there only (registry.hpp: check_device_data), as it does a CuPy array's. `held` keeps them.
template <class T>
void put_on_device(km::Dataset<T>& data, km::Team& team, km::cuda::DeviceBuffer<T>& held) {
  if (team.size() > 1) throw km::UsageError("--on-device runs in one process, not under mpirun");
  if (!km::gpu_info().present) throw km::UsageError("--on-device needs a CUDA GPU: " + km::gpu_info().why_absent);
  const std::size_t bytes = data.n * data.d * sizeof(T);
  km::check_device_memory(bytes, "--on-device", "use fewer objects or --precision=float");
  held = km::cuda::DeviceBuffer<T>(data.n * data.d);
  CUDA_CHECK(cudaMemcpy(held.get(), data.values.data(), bytes, cudaMemcpyHostToDevice));
  data.device_values = held.get();
  data.values = km::HostBuffer<T>();
}

// This rank's rows: read (each rank its own share: .h5, .npy, .bin) or generated.
template <class T>
void load_data(const Options& o, const km::Params& params, km::Team& team, km::Dataset<T>& data,
               km::RowSplit& split, std::size_t& batch) {
  if (!o.input.empty()) {
    km::LoadOptions lo;
    lo.batch = &batch;  // a 3-D .npy: a batch of problems (cli/kmeans_batch.hpp)
    lo.dataset = o.dataset;
    if (o.coords_given) lo.coords = static_cast<std::size_t>(o.coords);
    lo.rank = team.rank();  // each rank reads its rows only (.h5, .npy, .bin)
    lo.ranks = team.size();
    lo.split = &split;
    data = km::load<T>(o.input, lo);
  } else {
    // Generated data takes its dimension from given centroids unless --coords says otherwise.
    const auto d = params.init == km::Init::given && !o.coords_given ? params.given_d : static_cast<std::size_t>(o.coords);
    const std::size_t n = o.objects ? static_cast<std::size_t>(*o.objects) : km::objects_for_size(*o.size_mb, d);
    km::check_clusters(params.k, n);  // before the generator allocates K centres
    split = km::split_rows(n, team.rank(), team.size());
    if (o.generator == "blobs") {
      km::BlobOptions bo;
      bo.n = n;
      bo.d = d;
      bo.k = static_cast<std::size_t>(params.k);
      bo.seed = o.seed;
      bo.first = split.first;
      bo.count = split.count;
      data = std::move(km::generate_blobs<T>(bo).data);
    } else {
      data = km::generate_uniform_rows<T>(n, d, o.seed, split.first, split.count);
    }
  }
  if (!o.weights.empty()) load_weights(o.weights, batch, team, split, data);
}

// fn()'s outcome as an exit status (0; 2 for a usage error; 1 otherwise) and, when it failed, why.
template <class F>
int outcome(F&& fn, std::string& why) {
  try {
    fn();
    return 0;
  } catch (const km::UsageError& e) {
    why = e.what();
    return 2;
  } catch (const std::bad_alloc&) {
    why = "out of host memory; use fewer objects, coordinates or clusters";
  } catch (const std::exception& e) {
    why = e.what();
  }
  return 1;
}

// agree()'s verdict acted on (dist/team.hpp): the lowest failing rank says why (naming itself
// unless every rank failed), or rank 0 says which rank's `digests` differ from its own (`differ`
// words it); every rank then returns the same status, 0 to go on.
int settle(km::Team& team, int status, const std::string& why, const std::vector<std::uint64_t>& digests,
           const std::function<std::string(const km::Verdict&)>& differ, int differ_status) {
  const km::Verdict v = km::agree(team, status, digests);
  if (v.status) {
    if (team.rank() == v.failed_rank) {
      if (v.every_rank_failed)
        std::fprintf(stderr, "kmeans: error: %s\n", why.c_str());
      else
        std::fprintf(stderr, "kmeans: error: rank %d: %s\n", team.rank(), why.c_str());
    }
    return v.status;
  }
  if (v.differing_rank >= 0) {
    if (team.rank() == 0) std::fprintf(stderr, "kmeans: error: %s\n", differ(v).c_str());
    return differ_status;
  }
  return 0;
}

// The command line after the program's name, as every rank must have it.
std::uint64_t command_digest(int argc, char** argv) {
  std::uint64_t h = km::fnv1a(nullptr, 0);
  for (int i = 1; i < argc; ++i) h = km::fnv1a(argv[i], std::strlen(argv[i]) + 1, h);
  return h;
}

template <class T>
int run_kmeans(const Options& o, const km::Implementation& impl, const km::Params& params, km::Team& team) {
  km::Stopwatch load_watch;
  km::Dataset<T> data;
  km::RowSplit split;
  std::string why;
  std::size_t batch = 0;
  const int status = outcome([&] { load_data(o, params, team, data, split, batch); }, why);
  // Every rank's rows read, or every rank ends; the shape and the given centroids must agree.
  const std::uint64_t given = km::fnv1a(params.given_centroids.data(), params.given_centroids.size() * sizeof(double));
  const auto differ = [](const km::Verdict& v) {
    return km::strprintf("the ranks read different data: rank %d has %llu objects of %llu coordinates, rank 0 %llu of "
                         "%llu%s; give every rank the same input",
                         v.differing_rank, static_cast<unsigned long long>(v.digests[0]),
                         static_cast<unsigned long long>(v.digests[1]), static_cast<unsigned long long>(v.digests0[0]),
                         static_cast<unsigned long long>(v.digests0[1]),
                         v.digests[2] != v.digests0[2] ? " (and different initial centroids)" : "");
  };
  if (const int code = settle(team, status, why, {split.total, data.d, given}, differ, 1)) return code;
  km::cuda::DeviceBuffer<T> on_gpu;
  if (o.on_device) put_on_device(data, team, on_gpu);
  const double load_seconds = load_watch.seconds();
  if (batch) return km::cli::run_batch(o, impl, params, data, batch, load_seconds);

  const bool predicting = !o.predict.empty();
  if (predicting && team.size() > 1) throw km::UsageError("--predict runs in one process, not under mpirun");
  km::progress::Iterations shown(params.loops, params.n_init);
  km::Result<T> result =
      predicting ? km::predict(impl, data, params)
                 : km::run_parted(impl, data, split, team, params, [&](int it, const km::IterationStats& s) {
                     shown(it, static_cast<long long>(s.changed), s.inertia);
                   });
  km::progress::end_stage();
  result.seconds.load = load_seconds;
  if (team.rank() != 0) return 0;  // rank 0 writes and reports

  if (!o.output.empty()) {
    km::Stopwatch write_watch;
    km::ResultView<T> view{result.centroids.data(), static_cast<std::size_t>(params.k), data.d,
                           result.labels.data(), result.labels.size(), result.inertia, result.iterations};
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

int run_main(int argc, char** argv) {
  km::cli::ignore_file_size_signal();
  // 32 hardware work queues, not CUDA's default 8, unless the environment says otherwise: a
  // batch's graph runs one branch a problem side by side (B = 32, N = 16384, K = 100: 0.85x the
  // iteration, H100). Read when the CUDA context is made, so before any CUDA call.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  std::unique_ptr<km::Team> mpi;
  try {
    mpi = km::mpi_team_if_launched(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kmeans: error: %s\n", e.what());
    return 1;
  }
  km::Team& team = mpi ? *mpi : km::solo_team();
  const bool root = team.rank() == 0;
  Options o;
  CLI::App app{"kmeans: Lloyd k-means on the CPU and the GPU, with per-iteration timing", "kmeans"};
  km::cli::add_kmeans_options(app, o);
  // Every rank parses and checks its options, then the ranks compare outcomes and command lines
  // before any collective (settle), so that an error or a difference on one rank ends them all.
  int status = 0;
  std::string why;
  // --help and --version: at once in one process; under mpirun once the ranks agree (a rank that
  // alone was given one differs from rank 0, which says so), and then printed by rank 0 alone.
  std::function<int()> answer;
  try {
    km::cli::reject_empty_values(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    answer = [&app, e] { return app.exit(e); };
  } catch (const CLI::CallForVersion& e) {
    answer = [&app, e] { return app.exit(e); };
  } catch (const CLI::ParseError& e) {
    status = 2, why = std::string(e.what()) + " (see --help)";
  }
  if (answer && team.size() == 1) return answer();
  km::Params params;
  const km::Implementation* impl = nullptr;
  if (status == 0 && !o.list && !answer) {
    status = outcome(
        [&] {
          km::cli::clamp_openmp_threads("kmeans");
          params = km::cli::check_kmeans_options(app, o);
          const km::GpuInfo& gpu = km::gpu_info();
          impl = &km::find_implementation(o.impl.empty() ? km::default_implementation(gpu.present) : o.impl);
          km::require_runnable(*impl, gpu);
        },
        why);
  }
  const auto differ = [](const km::Verdict& v) {
    return km::strprintf("rank %d was started with other options than rank 0; run every rank with the same "
                         "command line",
                         v.differing_rank);
  };
  if (const int code = settle(team, status, why, {command_digest(argc, argv)}, differ, 2)) return code;
  if (answer) return root ? answer() : 0;

  if (o.list && !root) return 0;
  if (o.list) {  // with --coords and --clusters: whether each runs that shape here, its path and plan
    km::FusedConfig config;
    try {
      km::apply_fused_config(config, o.fused_config);
    } catch (const km::UsageError& e) {
      std::fprintf(stderr, "kmeans: error: %s\n", e.what());
      return 2;
    }
    for (const auto& [option, value] : {std::pair<const char*, long long>{"--clusters", o.clusters},
                                        std::pair<const char*, long long>{"--coords", o.coords}})
      if (app.count(option) && value < 1) {
        std::fprintf(stderr, "kmeans: error: %s=%lld: --list takes a shape of at least 1\n", option, value);
        return 2;
      }
    const bool shape = app.count("--coords") && app.count("--clusters");
    std::printf("%s\n", km::registry_json(shape ? static_cast<std::size_t>(o.clusters) : 0,
                                          shape ? static_cast<std::size_t>(o.coords) : 0,
                                          o.precision == "float" ? 4 : 8, config)
                            .c_str());
    return 0;
  }

  try {
    if (!o.quiet && root) km::progress::enable("kmeans");
    struct EndStage {  // a line in progress is completed before an error's line
      ~EndStage() { km::progress::end_stage(); }
    } end_stage;
    return o.precision == "float" ? run_kmeans<float>(o, *impl, params, team)
                                  : run_kmeans<double>(o, *impl, params, team);
  } catch (const km::UsageError& e) {
    // The options and the problem's shape are checked alike on every rank, before any rank
    // waits for another: rank 0 says it, and every rank ends normally.
    if (root) std::fprintf(stderr, "kmeans: error: %s\n", e.what());
    return 2;
  } catch (const km::SharedInputError& e) {  // every rank met it alike: rank 0 says it
    if (root) std::fprintf(stderr, "kmeans: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fail(team, "out of host memory; use fewer objects, coordinates or clusters");
  } catch (const std::exception& e) {
    fail(team, e.what());
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) { return km::cli::stdout_status("kmeans", run_main(argc, argv)); }
