// Reports are views of the run's data: a table for people, JSON and CSV for scripts.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "kmeans/params.hpp"

namespace km {

struct RunReport {
  std::string impl, precision, device, source, path;
  std::string input_dtype;  // what the input held (Dataset::element): "float16", "text"...; empty: generated
  std::vector<std::pair<std::string, std::string>> plan;  // the path's plan (fused; JSON "plan")
  std::size_t objects = 0, coords = 0, clusters = 0;
  int block = 0, threads = 0, loops = 0;
  int gpus = 0, ranks = 1;
  double threshold = 0;
  std::optional<double> tol;
  std::string init;
  std::string metric = "euclidean";
  bool weighted = false;  // the fit had sample weights (Dataset::weights)
  int iterations = 0;
  bool converged = false;
  double inertia = 0;
  std::vector<double> n_init_inertia;  // --n-init: every initialisation's final inertia
  RunSeconds seconds;
  std::vector<IterationStats> per_iteration;
};

// The report of one run, from what ran (implementation name, data, parameters, result).
template <class T>
RunReport make_report(const std::string& impl, const Dataset<T>& data, const Params& params, const Result<T>& result);

// Sum of the per-iteration phases (h2d, kernel, cpu, d2h in the fields, total in total).
IterationStats phase_totals(const std::vector<IterationStats>& per_iteration);

void write_table(std::ostream& out, const RunReport& report);
void write_json(std::ostream& out, const RunReport& report);
void write_csv(std::ostream& out, const RunReport& report);

// A number for the CSV reports: %.17g (reads back to the same double), "null" when not finite.
std::string number_text(double v);

}  // namespace km
