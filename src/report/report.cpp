#include "report/report.hpp"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/errors.hpp"

namespace km {

template <class T>
RunReport make_report(const std::string& impl, const Dataset<T>& data, const Params& params, const Result<T>& result) {
  RunReport r;
  r.impl = impl;
  r.precision = sizeof(T) == 8 ? "double" : "float";
  r.device = result.device;
  r.path = result.path;
  r.plan = result.plan;
  r.source = data.source;
  r.input_dtype = data.element;
  r.objects = result.objects ? result.objects : data.n;
  r.gpus = result.gpus;
  r.ranks = result.ranks;
  r.coords = data.d;
  r.clusters = static_cast<std::size_t>(params.k);
  r.block = result.block ? result.block : params.block;
  r.threads = result.threads;
  r.loops = params.loops;
  r.threshold = params.threshold;
  r.tol = params.tol;
  r.init = to_string(params.init);
  r.metric = to_string(params.metric);
  r.weighted = data.weighted();
  r.iterations = result.iterations;
  r.converged = result.converged;
  r.inertia = result.inertia;
  r.seconds = result.seconds;
  r.per_iteration = result.per_iteration;
  r.n_init_inertia = result.n_init_inertia;
  return r;
}

template RunReport make_report(const std::string&, const Dataset<float>&, const Params&, const Result<float>&);
template RunReport make_report(const std::string&, const Dataset<double>&, const Params&, const Result<double>&);

IterationStats phase_totals(const std::vector<IterationStats>& per_iteration) {
  IterationStats sum;
  for (const auto& s : per_iteration) {
    sum.h2d += s.h2d;
    sum.kernel += s.kernel;
    sum.cpu += s.cpu;
    sum.d2h += s.d2h;
    sum.allreduce += s.allreduce;
    sum.total += s.total;
    sum.changed += s.changed;
  }
  return sum;
}

std::string number_text(double v) {
  if (!std::isfinite(v)) return "null";
  return strprintf("%.17g", v);
}

namespace {

std::string tol_text(const std::optional<double>& tol) { return tol ? strprintf("%g", *tol) : "off"; }

nlohmann::ordered_json phases_json(const IterationStats& s) {
  return {{"h2d", s.h2d}, {"kernel", s.kernel}, {"cpu", s.cpu}, {"d2h", s.d2h}, {"allreduce", s.allreduce}};
}

}  // namespace

void write_table(std::ostream& out, const RunReport& r) {
  const double megabytes = static_cast<double>(r.objects * r.coords) *
                           (r.precision == "float" ? 4.0 : 8.0) / 1048576.0;
  out << strprintf("kmeans   impl=%s%s  precision=%s  device=%s  threads=%d  block=%d", r.impl.c_str(),
                   r.path.empty() ? "" : (" (" + r.path + " path)").c_str(), r.precision.c_str(), r.device.c_str(),
                   r.threads, r.block);
  if (r.gpus > 1 || r.ranks > 1) out << strprintf("  gpus=%d  ranks=%d", r.gpus, r.ranks);
  out << "\n";
  const bool reduced = r.gpus > 1 || r.ranks > 1;
  out << strprintf("data     %s%s: %zu objects x %zu coords (%.1f MiB), %zu clusters%s\n", r.source.c_str(),
                   r.input_dtype.empty() ? "" : (" (" + r.input_dtype + ")").c_str(), r.objects, r.coords, megabytes,
                   r.clusters, r.weighted ? ", sample weights" : "");
  out << strprintf("loop     init=%s  loops=%d  threshold=%g  tol=%s%s\n\n", r.init.c_str(), r.loops, r.threshold,
                   tol_text(r.tol).c_str(), r.metric == "euclidean" ? "" : ("  metric=" + r.metric).c_str());
  // The allreduce column only when parts were summed across GPUs or processes.
  out << strprintf("%6s %11s %11s %11s %11s", "iter", "h2d ms", "kernel ms", "cpu ms", "d2h ms");
  if (reduced) out << strprintf(" %12s", "allreduce ms");
  out << strprintf(" %11s %12s %18s\n", "total ms", "changed", "inertia");
  int i = 0;
  for (const auto& s : r.per_iteration) {
    out << strprintf("%6d %11.3f %11.3f %11.3f %11.3f", ++i, s.h2d * 1e3, s.kernel * 1e3, s.cpu * 1e3, s.d2h * 1e3);
    if (reduced) out << strprintf(" %12.3f", s.allreduce * 1e3);
    out << strprintf(" %11.3f %12lld %18.10e\n", s.total * 1e3, static_cast<long long>(s.changed), s.inertia);
  }
  const IterationStats sum = phase_totals(r.per_iteration);
  out << strprintf("%6s %11.3f %11.3f %11.3f %11.3f", "sum", sum.h2d * 1e3, sum.kernel * 1e3, sum.cpu * 1e3,
                   sum.d2h * 1e3);
  if (reduced) out << strprintf(" %12.3f", sum.allreduce * 1e3);
  out << strprintf(" %11.3f\n\n", sum.total * 1e3);
  out << strprintf("seconds  load %.3f  init %.3f  setup %.3f  loop %.3f  finish %.3f  write %.3f  total %.3f\n",
                   r.seconds.load, r.seconds.init, r.seconds.setup, r.seconds.loop, r.seconds.finish,
                   r.seconds.write, r.seconds.total());
  out << strprintf("result   %d iterations, %s, inertia %.10e\n", r.iterations,
                   r.converged ? "converged" : "stopped at the loop limit", r.inertia);
  if (!r.n_init_inertia.empty()) {
    out << "n-init   inertia of each initialisation:";
    for (double v : r.n_init_inertia) out << strprintf(" %.10e", v);
    out << "\n";
  }
}

namespace {
// The plan's decisions as one JSON object (null where the implementation has no plan).
nlohmann::ordered_json plan_object(const std::vector<std::pair<std::string, std::string>>& plan) {
  if (plan.empty()) return nullptr;
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (const auto& [name, value] : plan) o[name] = value;
  return o;
}
}  // namespace

void write_json(std::ostream& out, const RunReport& r) {
  using json = nlohmann::ordered_json;
  json j = {{"impl", r.impl},
            {"path", r.path.empty() ? json(nullptr) : json(r.path)},
            {"plan", plan_object(r.plan)},
            {"precision", r.precision},
            {"device", r.device},
            {"source", r.source},
            {"input_dtype", r.input_dtype.empty() ? json(nullptr) : json(r.input_dtype)},
            {"objects", r.objects},
            {"coords", r.coords},
            {"clusters", r.clusters},
            {"block", r.block},
            {"threads", r.threads},
            {"gpus", r.gpus},
            {"ranks", r.ranks},
            {"init", r.init},
            {"metric", r.metric},
            {"sample_weights", r.weighted},
            {"loops", r.loops},
            {"threshold", r.threshold},
            {"tol", r.tol ? json(*r.tol) : json(nullptr)},
            {"iterations", r.iterations},
            {"converged", r.converged},
            {"inertia", r.inertia}};
  if (!r.n_init_inertia.empty()) j["n_init_inertia"] = r.n_init_inertia;
  j["seconds"] = {{"load", r.seconds.load},   {"init", r.seconds.init},     {"setup", r.seconds.setup},
                  {"loop", r.seconds.loop},   {"finish", r.seconds.finish}, {"write", r.seconds.write},
                  {"total", r.seconds.total()}};
  j["phases"] = phases_json(phase_totals(r.per_iteration));
  json per = json::array();
  for (const auto& s : r.per_iteration) {
    json it = phases_json(s);
    it["total"] = s.total;
    it["changed"] = s.changed;
    it["shift"] = s.shift;
    it["inertia"] = s.inertia;
    if (s.rechecked >= 0) it["rechecked"] = s.rechecked;
    if (s.rechecked_all >= 0) it["rechecked_all"] = s.rechecked_all;
    if (s.skipped >= 0) it["skipped"] = s.skipped;
    if (s.looked_up >= 0) it["looked_up"] = s.looked_up;
    if (s.rescored >= 0) it["rescored"] = s.rescored;
    if (s.summed >= 0) it["summed"] = s.summed;
    per.push_back(std::move(it));
  }
  j["per_iteration"] = std::move(per);
  // NaN and infinities become null (JSON has neither); doubles print so they read back exactly.
  out << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

void write_csv(std::ostream& out, const RunReport& r) {
  // Tidy: one row per iteration, the run's configuration and results on every row.
  out << "impl,precision,device,objects,coords,clusters,block,threads,iterations,converged,inertia,"
         "load,init,setup,loop,finish,iteration,h2d,kernel,cpu,d2h,total,changed,shift,inertia_iteration,allreduce,gpus,"
         "ranks\n";
  const std::string prefix =
      strprintf("%s,%s,\"%s\",%zu,%zu,%zu,%d,%d,%d,%d,%s,%s,%s,%s,%s,%s", r.impl.c_str(), r.precision.c_str(),
                r.device.c_str(), r.objects, r.coords, r.clusters, r.block, r.threads, r.iterations,
                r.converged ? 1 : 0, number_text(r.inertia).c_str(), number_text(r.seconds.load).c_str(),
                number_text(r.seconds.init).c_str(), number_text(r.seconds.setup).c_str(),
                number_text(r.seconds.loop).c_str(), number_text(r.seconds.finish).c_str());
  int i = 0;
  for (const auto& s : r.per_iteration)
    out << prefix
        << strprintf(",%d,%s,%s,%s,%s,%s,%lld,%s,%s,%s,%d,%d\n", ++i, number_text(s.h2d).c_str(),
                     number_text(s.kernel).c_str(), number_text(s.cpu).c_str(), number_text(s.d2h).c_str(),
                     number_text(s.total).c_str(), static_cast<long long>(s.changed), number_text(s.shift).c_str(),
                     number_text(s.inertia).c_str(), number_text(s.allreduce).c_str(), r.gpus, r.ranks);
}

}  // namespace km
