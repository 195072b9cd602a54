// mlp: trains a multilayer perceptron on Fashion-MNIST (or any IDX set of 10 classes) with
// every product through one kernel of the GEMM registry, and reports each epoch's time by
// phase (batch in, nn / tn / nt products, elementwise kernels, metrics out), training loss
// and test accuracy. Every failure ends as one line on stderr, "mlp: error: ...", exit 2
// (options) or 1 (data, device).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include <unistd.h>

#include "cli/options.hpp"
#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "common/progress.hpp"
#include "cuda/device.hpp"
#include "gemm/registry.hpp"
#include "io/idx.hpp"
#include "io/write.hpp"
#include "mlp/backend.hpp"
#include "mlp/mlp.hpp"
#include "report/report.hpp"

namespace {

constexpr int kClasses = 10;

struct Cli {
  std::string kernel, precision = "float", data = "/usr/share/datasets/fashion-mnist", report = "table", hidden = "512,256";
  std::string dump;
  long long train_limit = 0, test_limit = 0, tile = 16, mma = 0, batch = 128, epochs = 10;  // (cast once checked)
  bool allow_tf32 = false, no_phases = false, quiet = false, list = false;
  km::mlp::Options o;
};

std::vector<int> parse_sizes(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') throw km::UsageError("--hidden=" + s + ": expected sizes like 512,256");
    if (v < 1 || v > (1 << 16)) throw km::UsageError("--hidden=" + s + ": every size must be in 1..65536");
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw km::UsageError("--hidden: need at least one hidden layer");
  return out;
}

void write_json(std::ostream& out, const Cli& c, const std::string& device, const std::vector<int>& sizes,
                std::size_t train_n, std::size_t test_n, const std::vector<km::mlp::EpochStats>& epochs) {
  nlohmann::ordered_json j = {{"kernel", c.o.backend.kernel},
                              {"precision", c.precision},
                              {"device", device},
                              {"layers", sizes},
                              {"batch", c.o.batch},
                              {"lr", c.o.lr},
                              {"momentum", c.o.momentum},
                              {"seed", c.o.seed},
                              {"train_items", train_n},
                              {"test_items", test_n},
                              {"phases_timed", c.o.backend.phases}};
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& e : epochs)
    list.push_back({{"epoch", e.epoch},
                    {"seconds", e.seconds},
                    {"h2d", e.phases.h2d},
                    {"nn", e.phases.nn},
                    {"tn", e.phases.tn},
                    {"nt", e.phases.nt},
                    {"elementwise", e.phases.elementwise},
                    {"d2h", e.phases.d2h},
                    {"train_loss", e.train_loss},
                    {"train_accuracy", e.train_accuracy},
                    {"test_loss", e.test_loss},
                    {"test_accuracy", e.test_accuracy},
                    {"eval_seconds", e.eval_seconds}});
  j["epochs"] = list;
  out << j.dump(2) << "\n";
}

void write_csv(std::ostream& out, const Cli& c, const std::string& device,
               const std::vector<km::mlp::EpochStats>& epochs) {
  out << "kernel,precision,device,batch,epoch,seconds,h2d,nn,tn,nt,elementwise,d2h,train_loss,train_accuracy,"
         "test_loss,test_accuracy,eval_seconds\n";
  for (const auto& e : epochs) {
    out << c.o.backend.kernel << "," << c.precision << ",\"" << device << "\"," << c.o.batch << "," << e.epoch;
    for (double v : {e.seconds, e.phases.h2d, e.phases.nn, e.phases.tn, e.phases.nt, e.phases.elementwise,
                     e.phases.d2h, e.train_loss, e.train_accuracy, e.test_loss, e.test_accuracy, e.eval_seconds})
      out << "," << km::number_text(v);
    out << "\n";
  }
}

void write_table(std::ostream& out, const Cli& c, const std::string& device, const std::vector<int>& sizes,
                 const std::vector<km::mlp::EpochStats>& epochs) {
  std::string layers;
  for (int s : sizes) layers += (layers.empty() ? "" : "-") + std::to_string(s);
  out << km::strprintf("mlp %s  kernel %s (%s) on %s  batch %d  lr %g  momentum %g\n", layers.c_str(),
                       c.o.backend.kernel.c_str(), c.precision.c_str(), device.c_str(), c.o.batch, c.o.lr,
                       c.o.momentum);
  out << "epoch   time(ms)    h2d     nn       tn       nt       elem     d2h    train loss  test acc\n";
  for (const auto& e : epochs)
    out << km::strprintf("%5d %10.2f %7.2f %8.2f %8.2f %8.2f %8.2f %6.3f %11.5f %8.2f%%\n", e.epoch, e.seconds * 1e3,
                         e.phases.h2d * 1e3, e.phases.nn * 1e3, e.phases.tn * 1e3, e.phases.nt * 1e3,
                         e.phases.elementwise * 1e3, e.phases.d2h * 1e3, e.train_loss, 100 * e.test_accuracy);
  if (!c.o.backend.phases) out << "(phases not timed: --no-phases)\n";
}

// Initial weights, batch order and normalisation as .npy, for the PyTorch reference. Everything
// is made, and written into a temporary folder inside the target, before the first file takes
// its place: a failure leaves the folder as it was.
void dump(const Cli& c, const std::vector<int>& sizes, std::size_t train_n, km::mlp::Normalisation norm) {
  std::error_code ec;
  if (!std::filesystem::is_directory(c.dump, ec))
    throw km::UsageError("--dump-init=" + c.dump + ": not an existing folder");
  double bytes = double(c.o.epochs) * double(train_n) * sizeof(std::int32_t);
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) bytes += double(sizes[l]) * sizes[l + 1] * sizeof(double);
  km::check_host_memory(bytes, km::strprintf("--dump-init's weights and batch order of %d epochs", c.o.epochs));
  std::vector<std::vector<double>> weights;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l)
    weights.push_back(km::mlp::initial_weights(c.o.seed, static_cast<int>(l), sizes[l], sizes[l + 1]));
  std::vector<std::int32_t> order;
  order.reserve(std::size_t(c.o.epochs) * train_n);
  for (int e = 1; e <= c.o.epochs; ++e) {
    const auto o = km::mlp::epoch_order(c.o.seed, e, train_n);
    order.insert(order.end(), o.begin(), o.end());
  }
  const double n[2] = {norm.mean, norm.std};
  const std::string staging = c.dump + "/.mlp-dump.tmp." + std::to_string(::getpid());
  std::vector<std::string> names;
  try {
    if (!std::filesystem::create_directory(staging, ec) || ec)
      throw km::InputError("--dump-init=" + c.dump + ": cannot create a folder in it: " + ec.message());
    for (std::size_t l = 0; l < weights.size(); ++l) {
      names.push_back("w" + std::to_string(l) + ".npy");
      km::write_npy_file(staging + "/" + names.back(), "<f8", {std::size_t(sizes[l]), std::size_t(sizes[l + 1])},
                         weights[l].data(), weights[l].size() * sizeof(double));
    }
    names.push_back("order.npy");
    km::write_npy_file(staging + "/order.npy", "<i4", {std::size_t(c.o.epochs), train_n}, order.data(),
                       order.size() * sizeof(std::int32_t));
    names.push_back("norm.npy");
    km::write_npy_file(staging + "/norm.npy", "<f8", {2}, n, sizeof n);
    for (const std::string& name : names) {  // (every rename can happen before the first is made)
      const std::string to = c.dump + "/" + name;
      if (std::filesystem::exists(to, ec) && !std::filesystem::is_regular_file(to, ec))
        throw km::InputError("--dump-init: '" + to + "' exists and is not a file");
    }
    for (const std::string& name : names) std::filesystem::rename(staging + "/" + name, c.dump + "/" + name);
  } catch (...) {
    std::filesystem::remove_all(staging, ec);
    throw;
  }
  std::filesystem::remove(staging, ec);
}

template <class T>
int run(Cli& c) {
  const km::IdxSet train_set = km::read_idx_set(c.data, "train", kClasses);
  const km::IdxSet test_set = km::read_idx_set(c.data, "t10k", kClasses);
  if (test_set.images.rows != train_set.images.rows || test_set.images.cols != train_set.images.cols)
    throw km::InputError(km::strprintf("the test images are %zu x %zu, the training images %zu x %zu",
                                       test_set.images.rows, test_set.images.cols, train_set.images.rows,
                                       train_set.images.cols));
  const km::mlp::Normalisation norm = km::mlp::normalisation_of(train_set.images);
  const auto train = km::mlp::make_samples<T>(train_set, norm, static_cast<std::size_t>(c.train_limit));
  const auto test = km::mlp::make_samples<T>(test_set, norm, static_cast<std::size_t>(c.test_limit));
  km::mlp::validate(c.o, train.n);
  const std::vector<int> sizes = km::mlp::layer_sizes(c.o, train.d, kClasses);
  if (!c.dump.empty()) {
    dump(c, sizes, train.n, norm);
    if (!c.quiet) std::fprintf(stderr, "mlp: wrote the initial weights, batch order and normalisation to %s\n", c.dump.c_str());
    return 0;
  }
  km::mlp::Trainer<T> trainer(c.o, train.d, kClasses);
  std::vector<km::mlp::EpochStats> epochs;
  for (int e = 1; e <= c.o.epochs; ++e) {
    epochs.push_back(trainer.epoch(e, train, test));
    km::progress::update("training", e, c.o.epochs, "epochs",
                         km::strprintf("loss %.4f, test accuracy %.2f%%", epochs.back().train_loss,
                                       100 * epochs.back().test_accuracy));
  }
  km::progress::end_stage();
  const std::string device = trainer.device();
  if (c.report == "json") write_json(std::cout, c, device, sizes, train.n, test.n, epochs);
  else if (c.report == "csv") write_csv(std::cout, c, device, epochs);
  else write_table(std::cout, c, device, sizes, epochs);
  return 0;
}

int run_main(int argc, char** argv) {
  km::cli::ignore_file_size_signal();
  Cli c;
  CLI::App app{"mlp: trains a multilayer perceptron on Fashion-MNIST, every product through one GEMM kernel", "mlp"};
  app.footer(km::gemm::kernels_help());
  app.option_defaults()->always_capture_default();
  const auto integer = km::cli::decimal_integer();
  app.add_option("--kernel", c.kernel, "a GEMM kernel (below; not hybrid) [cublas with a GPU, else cpu-blas]");
  app.add_option("--precision", c.precision, "float or double")->check(CLI::IsMember({"float", "double"}));
  app.add_option("--data", c.data, "folder of the IDX files (train-*, t10k-*; plain or .gz)");
  app.add_option("--hidden", c.hidden, "hidden layer sizes, comma-separated");
  app.add_option("--batch", c.batch, "mini-batch size")->transform(integer);
  app.add_option("--epochs", c.epochs, "epochs")->transform(integer);
  app.add_option("--lr", c.o.lr, "learning rate");
  app.add_option("--momentum", c.o.momentum, "SGD momentum");
  app.add_option("--seed", c.o.seed, "seed of the initial weights and the batch order")
      ->transform(km::cli::decimal_integer(false));
  app.add_option("--threads", c.o.backend.threads, "CPU threads (CPU kernels; default all)")->transform(integer);
  app.add_option("--tile", c.tile, "W of the naive/coalesced/shared GPU kernels: 4, 8, 16, 32")->transform(integer);
  app.add_flag("--allow-tf32", c.allow_tf32, "let tensor run float on TF32");
  app.add_option("--mma", c.mma, "tensor in double: mma shape 884, 1684 or 1688")->transform(integer);
  app.add_option("--train-limit", c.train_limit, "use the first N training items (0: all)")->transform(integer);
  app.add_option("--test-limit", c.test_limit, "use the first N test items (0: all)")->transform(integer);
  app.add_flag("--no-phases", c.no_phases, "GPU: do not time each operation (only the epoch's total)");
  app.add_option("--report", c.report, "table, json or csv")->check(CLI::IsMember({"table", "json", "csv"}));
  app.add_option("--dump-init", c.dump,
                 "write the initial weights, the batch order of every epoch and the normalisation as .npy "
                 "into this folder (for scripts/mlp_torch.py), then exit");
  app.add_flag("--quiet", c.quiet, "no progress line");
  km::cli::add_version_flag(app, "mlp");
  app.add_flag("--list", c.list, "print the GEMM kernels as JSON and exit");
  try {
    km::cli::reject_empty_values(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "mlp: error: %s (see --help)\n", e.what());
    return 2;
  }
  if (c.list) {
    std::cout << km::gemm::kernels_json() << "\n";
    return 0;
  }
  try {
    km::cli::clamp_openmp_threads("mlp");
    if (!c.quiet) km::progress::enable("mlp");
    struct EndStage {  // a line in progress is completed before an error's line
      ~EndStage() { km::progress::end_stage(); }
    } end_stage;
    if (c.train_limit < 0 || c.test_limit < 0) throw km::UsageError("--train-limit and --test-limit must be >= 0");
    if (c.o.backend.threads < 0 || c.o.backend.threads > km::cli::kMaxThreads)  // as kmeans and gemm
      throw km::UsageError(km::strprintf("--threads=%d must be in 0..%d (0: all cores)", c.o.backend.threads,
                                         km::cli::kMaxThreads));
    c.o.hidden = parse_sizes(c.hidden);
    km::mlp::validate_options(c.o);  // before the data is read
    c.o.backend.kernel = c.kernel.empty() ? (km::gpu_info().present ? "cublas" : "cpu-blas") : c.kernel;
    c.o.backend.phases = !c.no_phases;
    if (c.batch < 1 || c.batch > (1 << 16))  // (validate_options' ranges, before the casts)
      throw km::UsageError(km::strprintf("--batch=%lld: must be in 1..65536", c.batch));
    if (c.epochs < 1 || c.epochs > km::mlp::kMaxEpochs)
      throw km::UsageError(km::strprintf("--epochs=%lld: must be in 1..%d", c.epochs, km::mlp::kMaxEpochs));
    c.o.batch = static_cast<int>(c.batch);
    c.o.epochs = static_cast<int>(c.epochs);
    if (c.tile != 4 && c.tile != 8 && c.tile != 16 && c.tile != 32)  // (as gemm: before the casts)
      throw km::UsageError(km::strprintf("--tile=%lld: use 4, 8, 16 or 32", c.tile));
    if (c.mma != 0 && c.mma != 884 && c.mma != 1684 && c.mma != 1688)
      throw km::UsageError(km::strprintf("--mma=%lld: use 884, 1684 or 1688", c.mma));
    c.o.backend.gpu.tile = static_cast<int>(c.tile);
    c.o.backend.gpu.allow_tf32 = c.allow_tf32;
    c.o.backend.gpu.mma = static_cast<int>(c.mma);
    km::mlp::require_runnable(c.o.backend);  // an unknown name, or no GPU for it, fails before the data is read
    return c.precision == "double" ? run<double>(c) : run<float>(c);
  } catch (const km::UsageError& e) {
    std::fprintf(stderr, "mlp: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "mlp: error: out of host memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { return km::cli::stdout_status("mlp", run_main(argc, argv)); }
