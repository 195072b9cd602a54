// What the GPU tests share: the test shapes and data (uniform, blobs, quantised), the loops over
// them, and the comparisons of two fits (bit for bit, or a one-pass variant against the kernel
// without it and omp). Each check returns at once (GTEST_SKIP, with the reason) without a GPU.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "io/generate.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/registry.hpp"
#include "kmeans/tuning.hpp"
#include "test_util.hpp"

namespace km {  // gtest prints a parameter through PrintTo found beside its type
inline void PrintTo(const Implementation* impl, std::ostream* os) { *os << impl->name; }
}  // namespace km

namespace kmtest {

// The same rows in device memory, the host's values dropped (a read of them would crash).
template <class T>
km::Dataset<T> on_device(const km::Dataset<T>& host, km::cuda::DeviceBuffer<T>& held, std::size_t offset = 0) {
  // (offset: the rows start that many values into `held`, off cudaMalloc's alignment)
  held = km::cuda::DeviceBuffer<T>(host.n * host.d + offset);
  CUDA_CHECK(cudaMemcpy(held.get() + offset, host.values.data(), host.n * host.d * sizeof(T), cudaMemcpyHostToDevice));
  km::Dataset<T> out;
  out.n = host.n;
  out.d = host.d;
  out.source = host.source;
  out.device_values = held.get() + offset;
  return out;
}

inline std::string impl_name(const ::testing::TestParamInfo<const km::Implementation*>& param_info) {
  std::string name = param_info.param->name;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

inline std::vector<const km::Implementation*> gpu_implementations() {
  std::vector<const km::Implementation*> out;
  for (const km::Implementation* impl : km::implementations())
    if (impl->needs_gpu()) out.push_back(impl);
  return out;
}

// n objects of d coordinates, K clusters.
struct LabelShape {
  std::size_t n, d;
  int k;
};
struct SplitShape {
  std::size_t n, d;
  int k;
};

// Uniform (kind 0), blobs (1) or quantised data (2: integers / 255, exact ties everywhere).
template <class T>
km::Dataset<T> label_data(int kind, const LabelShape& s) {
  if (kind < 2) return kmtest::make_data<T>(kind == 1, s.n, s.d, static_cast<std::size_t>(s.k), 23);
  auto data = km::generate_uniform<T>(s.n, s.d, 23);
  for (std::size_t i = 0; i < data.n * data.d; ++i)
    data.values.data()[i] = static_cast<T>(std::floor(static_cast<double>(data.values.data()[i]) * 6) / 255.0);
  return data;
}

// body(shape, data) for each shape with uniform, blobs and quantised data (label_data's kinds).
template <class T, class F>
void each_label_case(const std::vector<LabelShape>& shapes, F&& body) {
  for (const LabelShape& s : shapes)
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data " +
                   (kind == 0 ? "uniform" : kind == 1 ? "blobs" : "quantised"));
      body(s, label_data<T>(kind, s));
    }
}

// Each shape with each of label_data's kinds (uniform, clustered, quantised), traced, with
// the one-pass tests' parameters (K, 20 iterations, fused's `config`): body(shape, data, params).
template <class T, class F>
void each_one_pass_case(const std::vector<SplitShape>& shapes, const km::FusedConfig& config, F&& body) {
  for (const SplitShape& s : shapes) {
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("d=" + std::to_string(s.d) + " k=" + std::to_string(s.k) + " data " + std::to_string(kind));
      const auto data = label_data<T>(kind, {s.n, s.d, s.k});
      km::Params p;
      p.k = s.k;
      p.loops = 20;
      p.fused = config;
      body(s, data, p);
    }
  }
}

// Two fits agree bit for bit: centroids, labels, and per iteration the change counts and (with
// `same_keys`) the re-check counts.
template <class R>
void expect_same_fit(const R& with, const R& without, bool same_keys = true) {
  EXPECT_EQ(with.centroids, without.centroids);
  EXPECT_EQ(with.labels, without.labels);
  ASSERT_EQ(with.iterations, without.iterations);
  for (int it = 0; it < with.iterations; ++it) {
    EXPECT_EQ(with.per_iteration[it].changed, without.per_iteration[it].changed) << "iteration " << it + 1;
    if (!same_keys) continue;
    EXPECT_EQ(with.per_iteration[it].rechecked, without.per_iteration[it].rechecked) << "iteration " << it + 1;
    EXPECT_EQ(with.per_iteration[it].rechecked_all, without.per_iteration[it].rechecked_all);
  }
}

// The CPU rung whose update arithmetic a GPU rung shares: seq's double sums for the rungs that
// update on the host, omp's fixed point for the rest.
inline const char* cpu_reference_of(const std::string& impl) {
  return impl == "naive" || impl == "transpose" || impl == "shared" ? "seq" : "omp";
}

// A GPU fit against its CPU rung's (cpu_reference_of), bit for bit: iterations, final inertia,
// every label (the first that differs named) and every centroid value.
template <class R>
void expect_fit_is_reference(const R& got, const R& ref, const char* ref_name) {
  EXPECT_EQ(got.iterations, ref.iterations);
  EXPECT_EQ(got.inertia, ref.inertia);
  ASSERT_EQ(got.labels.size(), ref.labels.size());
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < got.labels.size(); ++i)
    if (got.labels[i] != ref.labels[i] && differ++ == 0) first = i;
  EXPECT_EQ(differ, 0u) << "first at object " << first;
  std::size_t moved = 0;
  for (std::size_t i = 0; i < got.centroids.size(); ++i) moved += got.centroids[i] != ref.centroids[i];
  EXPECT_EQ(moved, 0u) << "centroid values that differ from " << ref_name << "'s";
}

// Whole fits of fused (5 iterations; uniform, blobs, quantised data) with the configuration
// `base` and with `base` and the FusedConfig field `field`=`value` agree bit for bit: labels,
// centroids, and per iteration the change counts and (with `same_keys`) the re-check counts.
// `paths` checks what the two reports name.
template <class T = float, class Paths>
void check_same_fits_without(const km::FusedConfig& base, const std::string& field,
                             const std::vector<LabelShape>& shapes, Paths paths, const std::string& value = "0",
                             bool same_keys = true) {
  const km::Implementation& fused = km::find_implementation("fused");
  each_label_case<T>(shapes, [&](const LabelShape& s, const km::Dataset<T>& data) {
    km::Params p;
    p.k = s.k;
    p.loops = 5;
    p.fused = base;
    const auto with = km::run(fused, data, p);
    km::apply_fused_config(p.fused, field + "=" + value);
    const auto without = km::run(fused, data, p);
    paths(with.path, without.path);
    expect_same_fit(with, without, same_keys);
  });
}

// A variant of the delta kernel (`on`) against the kernel without it (`off`) and omp over the same
// fit: one-pass path, labels and centroids bit for bit, omp's labels, and per iteration the change
// counts and shifts bit for bit and the inertia within 1e-11 (1e-6 + 2^-15 in float: not bit for
// bit, since an object re-checked in seq's arithmetic adds seq's unfused distance, the others the
// fused one, two kernels may re-check different objects, and the FMA-scored kernels take most
// addends from their scores, within 2^-15: margin.hpp, approx_dist_bound). False where the
// iteration counts differ.
template <class T, class R>
bool expect_same_fit(const R& on, const R& off, const R& omp, double inertia_slack = 0) {
  EXPECT_TRUE(on.path.starts_with("one-pass")) << on.path;
  EXPECT_EQ(on.labels, off.labels);
  EXPECT_EQ(on.labels, omp.labels);
  EXPECT_EQ(on.centroids, off.centroids);
  EXPECT_EQ(on.iterations, off.iterations);
  if (on.iterations != off.iterations) return false;
  for (int it = 0; it < on.iterations; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it + 1));
    const auto &a = on.per_iteration[it], &b = off.per_iteration[it];
    EXPECT_EQ(a.changed, b.changed);
    EXPECT_EQ(a.shift, b.shift);
    EXPECT_NEAR(a.inertia, b.inertia, (sizeof(T) == 4 ? 1e-6 + 0x1p-15 : 1e-11) * b.inertia + inertia_slack);
  }
  return true;
}

// A one-pass kernel variant switched by the FusedConfig field `field` (each of `settings` in
// turn) against the same kernel with field = `off` ("0" unless given; the bounds kept off; `also`:
// more fields, "name=value,...", for both): for each shape and data kind (each_one_pass_case's
// uniform, blobs, quantised), the fit without the variant and omp's, then with each setting:
// expect_same_fit, then check(shape, on, off, uniform data?, setting).
template <class T, class Check>
void check_variant_against_off(const std::string& field, const std::vector<SplitShape>& shapes,
                               const std::vector<std::string>& settings, Check&& check,
                               const std::string& off_value = "0", const std::string& also = "") {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  // (the float copy in double, whose inertia is the clusters' algebraic sum, off unless it is the
  // variant: the others are compared bit for bit, inertia included)
  km::FusedConfig base;
  km::apply_fused_config(base, "path=one-pass,float_copy=0," + also);
  int call = 0;
  each_one_pass_case<T>(shapes, base, [&](const SplitShape& s, const km::Dataset<T>& data, const km::Params& p) {
    const bool uniform = call++ % 3 == 0;
    km::Params variant = p;
    km::apply_fused_config(variant.fused, field + "=" + off_value);
    const auto off = km::run(fused, data, variant);
    const auto omp = km::run(km::find_implementation("omp"), data, p);
    for (const std::string& setting : settings) {
      SCOPED_TRACE(field + "=" + setting);
      variant.fused = p.fused;
      km::apply_fused_config(variant.fused, field + "=" + setting);
      const auto on = km::run(fused, data, variant);
      if (expect_same_fit<T>(on, off, omp)) check(s, on, off, uniform, setting);
    }
  });
}

// Two runs of the same arithmetic: every iteration's inertia, re-checked and re-scored objects
// the same (expect_same_fit has compared labels, centroids, change counts and shifts).
template <class R>
void expect_same_counts(const R& on, const R& off) {
  for (int it = 0; it < on.iterations; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it + 1));
    const auto &a = on.per_iteration[it], &b = off.per_iteration[it];
    EXPECT_EQ(a.inertia, b.inertia);
    EXPECT_EQ(a.rechecked, b.rechecked);
    EXPECT_EQ(a.rescored, b.rescored);
  }
}

}  // namespace kmtest
