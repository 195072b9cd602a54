#include "cli/kmeans_batch.hpp"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "io/load.hpp"
#include "io/write.hpp"
#include "common/stats.hpp"
#include "kmeans/batch.hpp"
#include "report/report.hpp"

namespace km::cli {

namespace {

// The checks a batch adds to the command line's, before any fit.
void check_batch(const KmeansOptions& o, std::size_t n, std::size_t batch) {
  if (n % batch != 0) throw InputError("internal: a batch's rows are not whole problems");
  if (!o.predict.empty()) throw UsageError("--predict: a batch (3-D --input) is fitted, not predicted");
  if (o.report == "csv") throw UsageError("--report=csv: a batch (3-D --input) reports as json or table");
  if (!o.output.empty() && format_from_path(o.output) != Format::npy)
    throw UsageError("--output '" + o.output + "': a batch's results are written as .npy (shapes (B, K, d) and (B, N))");
}

}  // namespace

template <class T>
int run_batch(const KmeansOptions& o, const Implementation& impl, const Params& params, const Dataset<T>& data,
              std::size_t batch, double load_seconds) {
  check_batch(o, data.n, batch);
  const std::size_t n = data.n / batch, d = data.d, k = static_cast<std::size_t>(params.k);
  progress::Iterations shown(params.loops, params.n_init);  // the first problem's iterations
  BatchResult<T> fits = km::run_batch(impl, data, batch, std::vector<Params>(batch, params),
                                      [&](std::size_t b, int it, const IterationStats& s) {
                                        if (b == 0) shown(it, static_cast<long long>(s.changed), s.inertia);
                                        else progress::poll();
                                      });
  progress::end_stage();
  if (!fits.problems.empty()) fits.problems[0].seconds.load = load_seconds;
  std::vector<T> centroids;
  std::vector<std::int32_t> labels;
  std::vector<std::string> reports;
  for (std::size_t b = 0; b < batch; ++b) {
    const Result<T>& result = fits.problems[b];
    centroids.insert(centroids.end(), result.centroids.begin(), result.centroids.end());
    labels.insert(labels.end(), result.labels.begin(), result.labels.end());
    Dataset<T> one;  // the report's facts of problem b (its rows are not read)
    one.n = n;
    one.d = d;
    one.source = data.source + "[" + std::to_string(b) + "]";
    one.element = data.element;
    const RunReport r = make_report(impl.name, one, params, result);
    std::ostringstream text;
    if (o.report == "json") {
      write_json(text, r);
    } else {
      text << "problem " << b << " of " << batch << "\n";
      write_table(text, r);
    }
    reports.push_back(text.str());
  }
  if (!o.output.empty())
    write_result(o.output, ResultView<T>{centroids.data(), k, d, labels.data(), n, 0.0, 0, batch});
  const double per_iteration = median(fits.iteration_seconds);
  if (o.report == "json") {
    std::cout << "{\"batch\": " << batch << ", \"together\": " << (fits.together ? "true" : "false")
              << ", \"seconds_per_iteration\": " << per_iteration << ", \"problems\": [";
    for (std::size_t b = 0; b < batch; ++b) {
      std::string r = reports[b];
      while (!r.empty() && r.back() == '\n') r.pop_back();
      std::cout << (b ? ", " : "") << r;
    }
    std::cout << "]}\n";
  } else if (!o.quiet || o.report == "table") {
    for (const std::string& r : reports) std::cout << r;
    std::cout << "batch of " << batch << (fits.together ? ", its iterations together" : ", one fit after another")
              << ": " << per_iteration * 1e3 << " ms per iteration of the batch (median)\n";
  }
  std::cout.flush();
  return 0;
}

template int run_batch(const KmeansOptions&, const Implementation&, const Params&, const Dataset<float>&, std::size_t,
                       double);
template int run_batch(const KmeansOptions&, const Implementation&, const Params&, const Dataset<double>&,
                       std::size_t, double);

}  // namespace km::cli
