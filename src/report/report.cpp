#include "report/report.hpp"

#include <cmath>
#include <cstdio>

#include "common/errors.hpp"

namespace km {

template <class T>
RunReport make_report(const std::string& impl, const Dataset<T>& data, const Params& params, const Result<T>& result) {
  RunReport r;
  r.impl = impl;
  r.precision = sizeof(T) == 8 ? "double" : "float";
  r.device = result.device;
  r.source = data.source;
  r.objects = data.n;
  r.coords = data.d;
  r.clusters = static_cast<std::size_t>(params.k);
  r.block = params.block;
  r.threads = result.threads;
  r.loops = params.loops;
  r.threshold = params.threshold;
  r.tol = params.tol;
  r.init = to_string(params.init);
  r.iterations = result.iterations;
  r.converged = result.converged;
  r.inertia = result.inertia;
  r.seconds = result.seconds;
  r.per_iteration = result.per_iteration;
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
    sum.total += s.total;
    sum.changed += s.changed;
  }
  return sum;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20)
          out += strprintf("\\u%04x", c);
        else
          out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN/Inf
  return strprintf("%.17g", v);
}

namespace {

std::string tol_text(const std::optional<double>& tol) { return tol ? strprintf("%g", *tol) : "off"; }

std::string phases_json(const IterationStats& s) {
  return "{\"h2d\": " + json_number(s.h2d) + ", \"kernel\": " + json_number(s.kernel) +
         ", \"cpu\": " + json_number(s.cpu) + ", \"d2h\": " + json_number(s.d2h);
}

}  // namespace

void write_table(std::ostream& out, const RunReport& r) {
  const double megabytes = static_cast<double>(r.objects * r.coords) *
                           (r.precision == "float" ? 4.0 : 8.0) / 1048576.0;
  out << strprintf("kmeans   impl=%s  precision=%s  device=%s  threads=%d  block=%d\n", r.impl.c_str(),
                   r.precision.c_str(), r.device.c_str(), r.threads, r.block);
  out << strprintf("data     %s: %zu objects x %zu coords (%.1f MiB), %zu clusters\n", r.source.c_str(),
                   r.objects, r.coords, megabytes, r.clusters);
  out << strprintf("loop     init=%s  loops=%d  threshold=%g  tol=%s\n\n", r.init.c_str(), r.loops, r.threshold,
                   tol_text(r.tol).c_str());
  out << strprintf("%6s %11s %11s %11s %11s %11s %12s\n", "iter", "h2d ms", "kernel ms", "cpu ms", "d2h ms",
                   "total ms", "changed");
  int i = 0;
  for (const auto& s : r.per_iteration)
    out << strprintf("%6d %11.3f %11.3f %11.3f %11.3f %11.3f %12lld\n", ++i, s.h2d * 1e3, s.kernel * 1e3,
                     s.cpu * 1e3, s.d2h * 1e3, s.total * 1e3, static_cast<long long>(s.changed));
  const IterationStats sum = phase_totals(r.per_iteration);
  out << strprintf("%6s %11.3f %11.3f %11.3f %11.3f %11.3f\n\n", "sum", sum.h2d * 1e3, sum.kernel * 1e3,
                   sum.cpu * 1e3, sum.d2h * 1e3, sum.total * 1e3);
  out << strprintf("seconds  load %.3f  init %.3f  setup %.3f  loop %.3f  finish %.3f  total %.3f\n",
                   r.seconds.load, r.seconds.init, r.seconds.setup, r.seconds.loop, r.seconds.finish,
                   r.seconds.total());
  out << strprintf("result   %d iterations, %s, inertia %.10e\n", r.iterations,
                   r.converged ? "converged" : "stopped at the loop limit", r.inertia);
}

void write_json(std::ostream& out, const RunReport& r) {
  out << "{\"impl\": " << json_string(r.impl) << ", \"precision\": " << json_string(r.precision)
      << ", \"device\": " << json_string(r.device) << ", \"source\": " << json_string(r.source)
      << ", \"objects\": " << r.objects << ", \"coords\": " << r.coords << ", \"clusters\": " << r.clusters
      << ", \"block\": " << r.block << ", \"threads\": " << r.threads << ", \"init\": " << json_string(r.init)
      << ", \"loops\": " << r.loops << ", \"threshold\": " << json_number(r.threshold)
      << ", \"tol\": " << (r.tol ? json_number(*r.tol) : "null") << ", \"iterations\": " << r.iterations
      << ", \"converged\": " << (r.converged ? "true" : "false") << ", \"inertia\": " << json_number(r.inertia)
      << ", \"seconds\": {\"load\": " << json_number(r.seconds.load) << ", \"init\": " << json_number(r.seconds.init)
      << ", \"setup\": " << json_number(r.seconds.setup) << ", \"loop\": " << json_number(r.seconds.loop)
      << ", \"finish\": " << json_number(r.seconds.finish) << ", \"total\": " << json_number(r.seconds.total())
      << "}, \"phases\": " << phases_json(phase_totals(r.per_iteration)) << "}, \"per_iteration\": [";
  bool first = true;
  for (const auto& s : r.per_iteration) {
    out << (first ? "" : ", ") << phases_json(s) << ", \"total\": " << json_number(s.total)
        << ", \"changed\": " << s.changed << ", \"shift\": " << json_number(s.shift) << "}";
    first = false;
  }
  out << "]}\n";
}

void write_csv(std::ostream& out, const RunReport& r) {
  // Tidy: one row per iteration, the run's configuration and results on every row.
  out << "impl,precision,device,objects,coords,clusters,block,threads,iterations,converged,inertia,"
         "load,init,setup,loop,finish,iteration,h2d,kernel,cpu,d2h,total,changed,shift\n";
  const std::string prefix =
      strprintf("%s,%s,\"%s\",%zu,%zu,%zu,%d,%d,%d,%d,%s,%s,%s,%s,%s,%s", r.impl.c_str(), r.precision.c_str(),
                r.device.c_str(), r.objects, r.coords, r.clusters, r.block, r.threads, r.iterations,
                r.converged ? 1 : 0, json_number(r.inertia).c_str(), json_number(r.seconds.load).c_str(),
                json_number(r.seconds.init).c_str(), json_number(r.seconds.setup).c_str(),
                json_number(r.seconds.loop).c_str(), json_number(r.seconds.finish).c_str());
  int i = 0;
  for (const auto& s : r.per_iteration)
    out << prefix
        << strprintf(",%d,%s,%s,%s,%s,%s,%lld,%s\n", ++i, json_number(s.h2d).c_str(), json_number(s.kernel).c_str(),
                     json_number(s.cpu).c_str(), json_number(s.d2h).c_str(), json_number(s.total).c_str(),
                     static_cast<long long>(s.changed), json_number(s.shift).c_str());
}

}  // namespace km
