// fused's tensor path: its re-checks exercised on tie-heavy data; the TF32 operands' rounding
// on this device; float's centred TF32 copy against operands formed in the kernel; double's TF32
// candidate keys against FP64 DMMA keys (and kept off beyond 2^48); wgmma against mma.sync on
// sm_90, float16 operands against TF32 ones and at extreme scales; the movers' scheme against every object summed afresh. Each as whole fits, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "cuda/device.hpp"
#include "fit_checks.hpp"
#include "io/generate.hpp"
#include "kmeans/driver.hpp"
#include "kmeans/gpu/tensor_kernels.hpp"
#include "kmeans/gpu/tensor_nearest.hpp"
#include "kmeans/registry.hpp"

namespace {

using namespace kmtest;

// The tensor path's re-checks run on purpose: on quantised data, from centroids of which four
// are copies of object 0 (so its neighbours have four tied keys and are checked against every
// centroid), some objects are queued with their candidates and some against every centroid
// (the JSON's "rechecked" / "rechecked_all"), and the first iteration still equals omp's.
// Double by default scores on TF32 candidates (4 keys kept, as float); with
// FusedConfig::tf32_in_double off on FP64 DMMA keys (2 kept).
template <class T>
void check_recheck_exercised(bool dmma = false) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const LabelShape s{4000, 64, 300};
  const auto data = label_data<T>(2, s);
  km::Params p;
  p.k = s.k;
  p.loops = 3;
  p.init = km::Init::given;
  p.given_d = s.d;
  p.given_centroids.resize(static_cast<std::size_t>(s.k) * s.d);
  for (int c = 0; c < s.k; ++c)
    for (std::size_t j = 0; j < s.d; ++j)
      p.given_centroids[c * s.d + j] = data.row(c >= s.k - 3 ? 0 : static_cast<std::size_t>(c))[j];
  p.fused.tf32_in_double = !dmma;
  const auto& fused = km::find_implementation("fused");
  ASSERT_EQ(fused.path(static_cast<std::size_t>(s.k), s.d, sizeof(T), p.fused).rfind("tensor", 0), 0u);
  const auto got = km::run(fused, data, p);
  const auto ref = km::run(km::find_implementation("omp"), data, p);
  ASSERT_GE(got.per_iteration.size(), 1u);
  EXPECT_EQ(got.path.find("tf32 candidates") != std::string::npos, sizeof(T) == 8 && !dmma) << got.path;
  const auto& first = got.per_iteration[0];
  if (dmma)  // FP64 keys, two kept: any close call is checked against every centroid
    EXPECT_EQ(first.rechecked, first.rechecked_all);
  else
    EXPECT_GT(first.rechecked, first.rechecked_all) << "some objects must be queued with their candidates";
  EXPECT_GT(first.rechecked_all, 0) << "the copies of object 0 must send some objects to every centroid";
  EXPECT_LT(first.rechecked, static_cast<std::int64_t>(s.n));
  EXPECT_EQ(first.changed, ref.per_iteration[0].changed);
  // The GPU sums the inertia in double from T's differences, omp in T: 1e-12 in double, 1e-5 in float.
  EXPECT_NEAR(first.inertia, ref.per_iteration[0].inertia, (sizeof(T) == 8 ? 1e-12 : 1e-5) * ref.per_iteration[0].inertia);
}
TEST(GpuTensorRecheck, Double) { check_recheck_exercised<double>(); }
TEST(GpuTensorRecheck, DoubleDmma) { check_recheck_exercised<double>(true); }
TEST(GpuTensorRecheck, Float) { check_recheck_exercised<float>(); }

// The fused delta kernel's TF32 object operands are x's bits plus 2^12 (one integer add), which
// rounds as cvt.rna only where the tensor cores ignore the 13 low bits. This device's reading of
// both, bit for bit, on the cases that tell: ties (low bits exactly 0x1000), just below and above
// them, carries into the exponent, negatives, zeros, subnormals, large and small magnitudes, and
// random floats. (Were the low bits kept, the operand would still lie within margin.hpp's 2^-11
// of x, but this is what the bound's derivation and the kernel's comment say happens.)
TEST(GpuTf32, HalfUpReadsAsRna) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  std::vector<float> xs;
  auto with_bits = [&](std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    xs.push_back(f);
    xs.push_back(-f);
  };
  for (std::uint32_t exponent : {1u, 60u, 126u, 127u, 128u, 150u, 174u})
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu})
      for (std::uint32_t high : {0x000u, 0x001u, 0x155u, 0x3feu, 0x3ffu})  // the 10 kept mantissa bits
        with_bits(exponent << 23 | high << 13 | low);
  for (std::uint32_t sub : {0x1u, 0x1000u, 0x3000u, 0x7fffffu}) with_bits(sub);  // subnormals
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1000.0f, 1000.0f);
  for (int i = 0; i < 4096; ++i) xs.push_back(u(rng));
  EXPECT_EQ(km::gpu::tf32_half_up_mismatches(xs), 0u) << "of " << xs.size() << " values";
}

// Float's tensor path reads its objects from a centred, TF32-rounded copy when it fits, and
// forms the same operands itself when not (out of core, --device-memory, tensor_copy=0):
// the two give the same keys, so the same labels, centroids, change counts and re-check
// counts, bit for bit; short d (16-deep slices), d not a multiple of 4 (4-byte copies), long d.
// With the copy and several stages of centroids (d = 16, K = 1500) the kernel also starts each
// row's list at a threshold from its previous label, which must leave out only keys the margin
// test never needs: the re-check counts then still agree with the formed path's, which has none.
TEST(GpuTensorCopy, FloatSameAsFormed) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  km::FusedConfig tensor;
  tensor.path = km::FusedConfig::Path::tensor;
  tensor.f16_scores = false;  // the TF32 copy (without it, no float16 copy either)
  check_same_fits_without(tensor, "tensor_copy",
                          quick() ? std::vector<LabelShape>{{2500, 64, 1024}, {6000, 16, 1500}}
                                  : std::vector<LabelShape>{{3000, 3, 100}, {4000, 16, 300}, {2500, 64, 1024},
                                                            {1500, 784, 256}, {6000, 16, 1500}, {5000, 30, 1100}},
                          [](const std::string& copied, const std::string&) {
                            EXPECT_EQ(copied.rfind("tensor", 0), 0u) << copied;
                          });
}

// Double on the tensor path scores its candidates on TF32 tensor cores from a float copy by
// default (margin.hpp: tf32_candidates_bound) and on FP64 DMMA with tf32_in_double=0.
// Both give seq's labels from the same centroids, so whole fits agree bit for bit: labels,
// centroids and change counts (not the re-check counts: the keys differ). Shapes: short d (the
// 16-deep float kernel), d not a multiple of 4, d in wgmma's range, long d, K past a tile.
TEST(GpuTensorDouble, Tf32CandidatesSameAsDmma) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  km::FusedConfig tensor;
  tensor.path = km::FusedConfig::Path::tensor;
  check_same_fits_without<double>(
      tensor, "tf32_in_double",
      quick() ? std::vector<LabelShape>{{3000, 100, 129}}
              : std::vector<LabelShape>{{4000, 16, 300}, {3000, 3, 100}, {3000, 100, 129}, {1500, 784, 256},
                                        {6000, 16, 1500}},
      [](const std::string& tf32, const std::string& dmma) {
        EXPECT_EQ(tf32.rfind("tensor, tf32 candidates", 0), 0u) << tf32;
        EXPECT_EQ(dmma, "tensor");
      },
      "0", false);
}

// Double data beyond 2^48 in magnitude would leave float's range in the TF32 keys: such data
// keeps its FP64 DMMA keys (the report's path "tensor"), and its labels are still omp's.
TEST(GpuTensorDouble, LargeMagnitudesKeepDmmaKeys) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const LabelShape s{3000, 16, 300};
  for (double scale : {1.0, 0x1p50}) {
    auto data = label_data<double>(1, s);
    for (std::size_t i = 0; i < data.n * data.d; ++i) data.values.data()[i] *= scale;
    km::Params p;
    p.k = s.k;
    p.loops = 3;
    p.fused.path = km::FusedConfig::Path::tensor;
    const auto got = km::run(km::find_implementation("fused"), data, p);
    const auto ref = km::run(km::find_implementation("omp"), data, p);
    EXPECT_EQ(got.path, scale > 1 ? "tensor" : "tensor, tf32 candidates") << "scale " << scale;
    EXPECT_EQ(got.labels, ref.labels) << "scale " << scale;
  }
}

// Float on a Hopper GPU (compute capability 9.0) with 32 < d <= 128, d a multiple of 4, takes
// the wgmma assignment (6_fused_wgmma.cuh); wgmma=0 takes the mma.sync one. Both
// give seq's labels from the same centroids, so whole fits agree bit for bit; and the two
// kernels' tensor cores sum the same products alike on sm_90, so the keys, and with them the
// re-check counts, agree too (the thresholds, from iteration 2, leave out only keys the margin
// test never needs). Shapes: d padded within a slice (40, 100), whole slices (64, 128), K past a
// tile's end (129, 300, 1000), one tile (7, 128: the threshold from the tile's least key), n past
// a block's end.
// (f16_scores=0: the TF32 operands; the float16 ones are the next test's.)
TEST(GpuTensorWgmma, FloatSameAsMmaSync) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  if (km::gpu_info().compute_capability != 90)
    GTEST_SKIP() << "wgmma needs compute capability 9.0; this GPU has " << km::gpu_info().compute_capability;
  km::FusedConfig tf32;
  tf32.f16_scores = false;
  check_same_fits_without(tf32, "wgmma",
                          quick() ? std::vector<LabelShape>{{3000, 100, 129}, {2000, 64, 50}}
                                  : std::vector<LabelShape>{{3000, 64, 300}, {2000, 40, 1000}, {3000, 100, 129},
                                                            {5000, 128, 1024}, {4000, 128, 128}, {3000, 48, 7}},
                          [](const std::string& wgmma, const std::string& sync) {
                            EXPECT_EQ(wgmma, "tensor, wgmma");
                            EXPECT_EQ(sync, "tensor");
                          });
}

// Float at 32 < d <= 128 (a multiple of 4) on a Hopper GPU scores on float16 tensor cores
// (margin.hpp: f16_candidates_bound; the report's path "tensor, fp16 wgmma"), and with
// f16_scores=0 on TF32 ones. Both give seq's labels from the same centroids, so whole fits
// agree bit for bit: labels, centroids, change counts and shifts (not the re-check counts: the
// keys differ). Shapes as the test above, and d % 8 = 4 (the float16 rows padded with 4 zeros,
// the centroids' last chunk half zeros: d = 36, 100, 124).
TEST(GpuTensorF16, FloatSameAsTf32) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  if (km::gpu_info().compute_capability != 90)
    GTEST_SKIP() << "wgmma needs compute capability 9.0; this GPU has " << km::gpu_info().compute_capability;
  check_same_fits_without({}, "f16_scores",
                          quick() ? std::vector<LabelShape>{{3000, 128, 300}, {2000, 40, 50}, {3001, 100, 129}}
                                  : std::vector<LabelShape>{{3000, 64, 300}, {2000, 40, 1000}, {3000, 96, 129},
                                                            {5000, 128, 1024}, {4000, 128, 128}, {3000, 48, 7},
                                                            {3001, 100, 129}, {2003, 36, 300}, {2500, 124, 1000}},
                          [](const std::string& f16, const std::string& tf32) {
                            EXPECT_EQ(f16, "tensor, fp16 wgmma");
                            EXPECT_EQ(tf32, "tensor, wgmma");
                          },
                          "0", false);
}

// The float16 operands' scales (2^ex for the objects, from their largest centred coordinate;
// 2^ec for the centroids, each iteration) keep seq's labels at the ends of float's useful range,
// far from the origin, and where one coordinate dwarfs the rest (most of the others then fall
// below float16's normal range: the bound's absolute term).
TEST(GpuTensorF16, ScalesKeepSeqLabels) {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  if (km::gpu_info().compute_capability != 90)
    GTEST_SKIP() << "wgmma needs compute capability 9.0; this GPU has " << km::gpu_info().compute_capability;
  const LabelShape s{3000, 64, 200};
  const char* names[] = {"times 2^-50", "times 2^50", "plus 1000", "one coordinate times 10^6"};
  for (int kind = 0; kind < 3; ++kind)
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(std::string("data kind ") + std::to_string(kind) + ", " + names[variant]);
      auto data = label_data<float>(kind, s);
      for (std::size_t i = 0; i < data.n * data.d; ++i) {
        float& v = data.values.data()[i];
        v = variant == 0 ? v * 0x1p-50f : variant == 1 ? v * 0x1p50f : variant == 2 ? v + 1000.0f
                                                                      : (i % data.d == 0 ? v * 1e6f : v);
      }
      km::Params p;
      p.k = s.k;
      p.loops = 4;
      const auto got = km::run(km::find_implementation("fused"), data, p);
      const auto ref = km::run(km::find_implementation("omp"), data, p);
      EXPECT_EQ(got.path, "tensor, fp16 wgmma");
      EXPECT_EQ(got.labels, ref.labels);
    }
}

// The tensor path's movers scheme (movers_after=1: from the second iteration, the
// kept sums and only the movers through them) against every object summed afresh (=0):
// labels, centroids, change counts and shifts bit for bit (integer sums), and omp's labels;
// the iteration's inertia (the clusters' algebraic sum against the per-object sum, both in
// double) within 1e-11. `summed` says which scheme ran: every object, or the movers only, and
// the movers must be fewer than the objects somewhere (else the test exercised nothing).
// With guard=0 the second iteration's bound "fails": the host sums that inertia
// from the objects, and every later iteration sums every object. The default (0.2) starts
// mid-fit. Shapes: mma.sync's short slices (d = 16), wgmma's range on Hopper (d = 64; double:
// TF32 candidates), d not a multiple of 4 with K past a tile, and d past a warp (d = 100).
template <class T>
void check_tensor_movers() {
  if (!km::gpu_info().present) GTEST_SKIP() << "no usable GPU: " << km::gpu_info().why_absent;
  const km::Implementation& fused = km::find_implementation("fused");
  km::FusedConfig tensor;
  tensor.path = km::FusedConfig::Path::tensor;
  const std::vector<SplitShape> shapes =
      quick() ? std::vector<SplitShape>{{4001, 16, 16}, {3001, 64, 100}}
              : std::vector<SplitShape>{{4001, 16, 16}, {3001, 64, 100}, {2003, 33, 300}, {3001, 100, 20}};
  each_one_pass_case<T>(shapes, tensor, [&](const SplitShape& s, const km::Dataset<T>& data, const km::Params& p) {
    km::Params q = p;
    q.fused.movers_after = 1.0;  // from the second iteration
    const auto on = km::run(fused, data, q);
    q.fused.guard = 0;
    const auto fallback = km::run(fused, data, q);
    q.fused.guard = p.fused.guard;
    q.fused.movers_after = 0;  // never
    const auto off = km::run(fused, data, q);
    const auto by_default = km::run(fused, data, p);
    const auto omp = km::run(km::find_implementation("omp"), data, p);
    const auto n = static_cast<std::int64_t>(s.n);
    for (const auto* r : {&on, &fallback, &by_default}) {
      EXPECT_EQ(r->centroids, off.centroids);
      EXPECT_EQ(r->labels, off.labels);
      ASSERT_EQ(r->iterations, off.iterations);
    }
    EXPECT_EQ(off.labels, omp.labels);
    bool fewer = false;
    for (int it = 0; it < off.iterations; ++it) {
      SCOPED_TRACE("iteration " + std::to_string(it + 1));
      const double tol = 1e-11 * off.per_iteration[it].inertia;
      for (const auto* r : {&on, &fallback, &by_default}) {
        EXPECT_EQ(r->per_iteration[it].changed, off.per_iteration[it].changed);
        EXPECT_EQ(r->per_iteration[it].shift, off.per_iteration[it].shift);
        EXPECT_NEAR(r->per_iteration[it].inertia, off.per_iteration[it].inertia, tol);
      }
      EXPECT_EQ(off.per_iteration[it].summed, n) << "every object summed";
      EXPECT_EQ(on.per_iteration[it].summed, it == 0 ? n : on.per_iteration[it].changed);
      EXPECT_EQ(fallback.per_iteration[it].summed, it == 1 ? fallback.per_iteration[it].changed : n)
          << "after the failed guard every object is summed";
      const std::int64_t got = by_default.per_iteration[it].summed;
      EXPECT_TRUE(got == n || got == by_default.per_iteration[it].changed) << got;
      fewer = fewer || on.per_iteration[it].summed < n;
    }
    EXPECT_TRUE(fewer) << "the movers never went alone";
  });
}

TEST(GpuTensorMovers, DoubleAsAfresh) { check_tensor_movers<double>(); }
TEST(GpuTensorMovers, FloatAsAfresh) { check_tensor_movers<float>(); }

}  // namespace
