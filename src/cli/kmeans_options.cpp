#include "cli/kmeans_options.hpp"

#include <algorithm>
#include <cmath>

#include "cli/options.hpp"
#include "common/errors.hpp"
#include "io/load.hpp"
#include "io/write.hpp"
#include "kmeans/init.hpp"
#include "kmeans/registry.hpp"

namespace km::cli {

namespace {

constexpr long long kMaxCoords = 1LL << 31;
constexpr double kMaxSizeMB = 8796093022208.0;  // 2^43 MB = 2^63 bytes

int to_int(long long v, const char* option) {
  if (v < -2147483647LL || v > 2147483647LL) throw UsageError(strprintf("%s=%lld is out of range", option, v));
  return static_cast<int>(v);
}

std::string implementations_help() {
  std::string text = "Implementations (--impl):\n";
  for (const Implementation* impl : implementations())
    text += strprintf("  %-14s %s%s\n", impl->name, impl->description, impl->needs_gpu() ? " [GPU]" : "");
  text += "Default: fused when a GPU is present, else omp.\n";
  return text;
}

// Reads K x d centroids for --init=PATH or --predict=PATH (any input format) into params; K
// is the file's row count, and must equal --clusters when that is given too. For a float run
// a value beyond float's range is refused as a data file's is (check_finite on the narrowed
// values), rather than becoming an infinite centroid.
void load_given_centroids(const CLI::App& app, const std::string& path, const char* option, bool as_float,
                          Params& params) {
  const Dataset<double> c = load<double>(path);
  if (as_float) {
    Dataset<float> narrowed(c.n, c.d, c.source);
    std::transform(c.values.data(), c.values.data() + c.n * c.d, narrowed.values.data(),
                   [](double v) { return static_cast<float>(v); });
    check_finite(narrowed, strprintf("%s '%s' read as float (out of range; try --precision=double)", option,
                                     path.c_str()));
  }
  if (app.count("--clusters") && static_cast<std::size_t>(params.k) != c.n)
    throw UsageError(strprintf("%s '%s' holds %zu centroids but --clusters=%d", option, path.c_str(), c.n, params.k));
  if (c.n > 2147483647u) throw UsageError(strprintf("%s '%s' holds too many centroids (%zu)", option, path.c_str(), c.n));
  params.k = static_cast<int>(c.n);
  params.init = Init::given;
  params.given_d = c.d;
  params.given_centroids.assign(c.values.data(), c.values.data() + c.n * c.d);
}

// Whether --input holds float16 or bfloat16 values: such data runs in float unless --precision
// says otherwise (it is float's exactly). A file that cannot be read is load()'s to report.
bool sixteen_bit_input(const KmeansOptions& o) {
  if (o.input.empty()) return false;
  try {
    return is_16bit(input_element(o.input, o.dataset));
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

void add_kmeans_options(CLI::App& app, KmeansOptions& o) {
  const auto integer = decimal_integer();
  app.footer(implementations_help());
  app.option_defaults()->always_capture_default();
  app.add_option("--impl", o.impl, "implementation (see below)");
  auto* size = app.add_option("--size", o.size_mb, "lab data of this many MB: MB*2^20/(coords*8) objects [256]");
  auto* objects = app.add_option("--objects", o.objects, "generate this many objects")->transform(integer);
  auto* input = app.add_option("--input", o.input,
                               "read data from .h5/.hdf5/.csv/.npy/.bin/.txt (float16, bfloat16, float32, float64); "
                               "a 3-D .npy or HDF5 dataset (B, N, d) is a batch of B problems, each fitted as alone "
                               "(fused: their iterations together)");
  app.add_option("--dataset", o.dataset,
                 "HDF5 dataset to read (default: the only 2-D dataset, else the only 3-D one: a batch)");
  app.add_option("--weights", o.weights,
                 "sample weights, one per object (a 1-D .npy, or one column of any input format: .h5 its only "
                 "2-D dataset; finite, >= 0): weighted means and inertia, as scikit-learn's sample_weight");
  auto* generator = app.add_option("--generator", o.generator, "generated data: uniform or blobs");
  app.add_option("--coords", o.coords, "coordinates per object (generated data; checked against files)")
      ->transform(integer);
  app.add_option("--clusters", o.clusters, "number of clusters K")->transform(integer);
  app.add_option("--seed", o.seed, "seed for generated data and random/kmeans++/kmeans|| init (0..2^64-1)")
      ->transform(decimal_integer(false));
  app.add_option("--loops", o.loops, "at most this many iterations")->transform(integer);
  app.add_option("--threshold", o.threshold, "stop when the fraction of objects that changed is <= T");
  app.add_option("--tol", o.tol, "stop when the summed squared centroid shift is <= X (default off)");
  app.add_option("--init", o.init,
                 "initial centroids: first, random, kmeans++, kmeans|| (scalable k-means++: a few passes over the "
                 "data, for large K; also spelt kmeans-parallel), or a centroids file (any input format; K rows of "
                 "d values)");
  app.add_option("--metric", o.metric,
                 "euclidean (squared distance), cosine (spherical k-means: objects and centroids normalised; "
                 "inertia = sum of 1 - cos) or dot (largest inner product with unit-length centroids; inertia = "
                 "-sum of x.c)");
  app.add_option("--oversampling", o.oversampling,
                 "kmeans||: each round draws about this many times K objects (default 0.5)");
  app.add_option("--init-rounds", o.init_rounds,
                 "kmeans||: rounds of draws (default 5; more while fewer than K objects were drawn)")
      ->transform(integer);
  app.add_option("--n-init", o.n_init, "initialisations (random, kmeans++, kmeans||; seeds from --seed); the run "
                                       "with the lowest inertia is kept")
      ->transform(integer);
  app.add_option("--predict", o.predict, "label the data with the centroids in this file (any input format), "
                                         "without iterating; writes labels and inertia");
  app.add_option("--precision", o.precision, "double or float (default: double; float for float16/bfloat16 input)");
  app.add_option("--block", o.block,
                 "GPU threads per block (multiple of 32 in 32..1024; default 128, and for fused's one-pass kernels "
                 "their measured best per shape, 128, 192 or 256)")
      ->transform(integer);
  app.add_option("--threads", o.threads, "CPU threads (default: all cores; at most 1024)")->transform(integer);
  app.add_option("--gpus", o.gpus,
                 "GPUs that share the rows (default 1; more need NCCL and --impl=fused, offload or offload-block); "
                 "the result is the one-GPU result bit for bit")
      ->transform(integer);
  app.add_option("--device-memory", o.device_memory,
                 "device memory a GPU implementation may use, e.g. 8G (K, M, G, T: powers of 1024; default: what is "
                 "free); fused and offload-block stream larger data from host memory each iteration");
  app.add_option("--output", o.output, "write centroids and labels to .h5/.hdf5 or .csv");
  app.add_option("--report", o.report, "report format: table, json or csv");
  app.add_flag("--quiet", o.quiet, "no progress on stderr");
  app.add_flag("--on-device", o.on_device,
               "put the data in GPU memory first (counted in the load) and fit it from there, as a CuPy or "
               "PyTorch array is: fused, offload or offload-block");
  // Hidden: fused's tuning fields for measurement tools (docs/configuration.md, kmeans/tuning.hpp).
  app.add_option("--fused-config", o.fused_config, "fused's tuning: name=value,... (docs/configuration.md)")
      ->group("");
  app.add_flag("--init-timings", o.init_timings, "k-means||: its phases' times on stderr")->group("");
  add_version_flag(app, "kmeans");
  app.add_flag("--list", o.list, "print the implementations as JSON (name, description, where, order) and exit; "
                                 "with --coords and --clusters (and --precision) also whether each runs that "
                                 "shape here, the path it takes and fused's whole plan (\"plan\": the path and "
                                 "why, the kernel's variant, launch shape and each feature on or off)");
  size->excludes(objects);
  input->excludes(size)->excludes(objects)->excludes(generator);
}

// "123", "64K", "512M", "8G", "1T" (powers of 1024) as bytes; one clear line otherwise.
static std::size_t parse_bytes(const std::string& text, const char* option) {
  const auto bad = [&] {
    return UsageError(strprintf("%s=%s: give bytes, or a number with K, M, G or T (e.g. 8G)", option, text.c_str()));
  };
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  double unit = 1;
  const std::string rest = text.substr(used);
  if (rest == "K" || rest == "k") unit = 1024.0;
  else if (rest == "M" || rest == "m") unit = 1048576.0;
  else if (rest == "G" || rest == "g") unit = 1073741824.0;
  else if (rest == "T" || rest == "t") unit = 1099511627776.0;
  else if (!rest.empty()) throw bad();
  const double bytes = value * unit;
  if (!(bytes >= 1) || !std::isfinite(bytes) || bytes > 1.8e19) throw bad();
  return static_cast<std::size_t>(bytes);
}

Params check_kmeans_options(const CLI::App& app, KmeansOptions& o) {
  if (app.count("--input") && o.input.empty()) throw UsageError("--input: the path is empty");
  if (app.count("--weights") && o.weights.empty()) throw UsageError("--weights: the path is empty");
  if (app.count("--output") && o.output.empty()) throw UsageError("--output: the path is empty");
  if (o.threads < 0 || o.threads > kMaxThreads)
    throw UsageError(strprintf("--threads=%lld must be in 0..%d (0: all cores)", o.threads, kMaxThreads));
  o.coords_given = app.count("--coords") > 0;
  if (o.coords < 1) throw UsageError(strprintf("--coords=%lld: must be at least 1", o.coords));
  if (o.coords > kMaxCoords)  // a row's index must fit an int (io/dataset.cpp: check_shape)
    throw UsageError(strprintf("--coords=%lld: too large (at most %lld)", o.coords, kMaxCoords));
  if (o.objects && *o.objects <= 0) throw UsageError(strprintf("--objects=%lld: must be positive", *o.objects));
  const std::string size_given = given_value(app, "--size");
  if (o.size_mb && !(*o.size_mb > 0 && std::isfinite(*o.size_mb)))
    throw UsageError(strprintf("--size=%s: must be a finite positive number of MB", size_given.c_str()));
  if (o.size_mb && *o.size_mb > kMaxSizeMB)  // more bytes than a 64-bit size can count
    throw UsageError(strprintf("--size=%s: too large (at most %.0f MB)", size_given.c_str(), kMaxSizeMB));
  if (!o.size_mb && !o.objects) o.size_mb = 256.0;
  if (o.generator != "uniform" && o.generator != "blobs")
    throw UsageError("--generator must be uniform or blobs, not '" + o.generator + "'");
  if (!o.dataset.empty() && (o.input.empty() || format_from_path(o.input) != Format::hdf5))
    throw UsageError("--dataset applies only to an .h5/.hdf5 --input");
  if (o.precision != "double" && o.precision != "float")
    throw UsageError("--precision must be double or float, not '" + o.precision + "'");
  if (!app.count("--precision") && sixteen_bit_input(o)) o.precision = "float";
  if (o.report != "table" && o.report != "json" && o.report != "csv")
    throw UsageError("--report must be table, json or csv, not '" + o.report + "'");
  if (!o.impl.empty()) find_implementation(o.impl);

  Params params;
  params.k = to_int(o.clusters, "--clusters");
  params.loops = to_int(o.loops, "--loops");
  params.threshold = o.threshold;
  params.tol = o.tol;
  params.n_init = to_int(o.n_init, "--n-init");
  params.metric = metric_from_string(o.metric);
  if (app.count("--predict")) {
    if (o.predict.empty()) throw UsageError("--predict: the path is empty");
    for (const char* other : {"--init", "--n-init", "--loops", "--threshold", "--tol"})
      if (app.count(other))
        throw UsageError(std::string("--predict labels the data with given centroids; ") + other + " does not apply");
    load_given_centroids(app, o.predict, "--predict", o.precision == "float", params);
  } else if (o.init == "first" || o.init == "random" || o.init == "kmeans++" || o.init == "kmeans||" ||
             o.init == "kmeans-parallel") {
    params.init = init_from_string(o.init);
  } else if (o.init.find('/') != std::string::npos || o.init.find('.') != std::string::npos) {
    load_given_centroids(app, o.init, "--init", o.precision == "float", params);
  } else {
    throw UsageError(
        "--init must be first, random, kmeans++, kmeans|| or a centroids file (.h5, .csv, .npy, .bin, .txt), not '" +
        o.init + "'");
  }
  for (const char* only : {"--oversampling", "--init-rounds"})
    if (app.count(only) && params.init != Init::kmeans_parallel)
      throw UsageError(std::string(only) + " applies only to --init=kmeans||");
  if (app.count("--oversampling") && !(o.oversampling > 0 && o.oversampling <= 1e6))
    throw UsageError(strprintf("--oversampling=%s: must be positive (k-means|| draws about that times K objects a "
                               "round), at most 1000000", given_value(app, "--oversampling").c_str()));
  params.oversampling = o.oversampling;
  params.init_rounds = to_int(o.init_rounds, "--init-rounds");
  params.seed = o.seed;
  params.block = to_int(o.block, "--block");
  params.block_given = app.count("--block") > 0;
  params.threads = to_int(o.threads, "--threads");
  params.gpus = to_int(o.gpus, "--gpus");
  if (!o.device_memory.empty()) params.device_memory = parse_bytes(o.device_memory, "--device-memory");
  apply_fused_config(params.fused, o.fused_config);
  set_parallel_verbose(o.init_timings);
  validate(params);
  if (!o.output.empty()) {  // every file this run reads, the centroids' too
    std::vector<ReadFile> reads = {{"the input file", o.input}};
    if (!o.weights.empty()) reads.push_back({"the --weights file", o.weights});
    if (app.count("--predict")) reads.push_back({"the --predict file", o.predict});
    else if (params.init == Init::given) reads.push_back({"the --init file", o.init});
    check_output_path(o.output, reads);
  }
  return params;
}

}  // namespace km::cli
