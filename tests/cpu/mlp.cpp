// The MLP: the IDX reader and its errors, the gradient against finite differences, learning on a
// task with a known answer, every CPU kernel giving the same loss curve and weights as cpu-blas
// to rounding, the same bits run to run, its options checked, its weights and order seeded.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda/device.hpp"
#include "gemm/registry.hpp"
#include "io/idx.hpp"
#include "mlp/mlp.hpp"
#include "mlp_checks.hpp"
#include "test_util.hpp"

namespace {

using namespace kmtest;

using kmtest::TempDir;

std::vector<unsigned char> idx_header(std::uint32_t magic, std::vector<std::uint32_t> dims) {
  std::vector<unsigned char> h;
  for (std::uint32_t v : std::vector<std::uint32_t>{magic}) dims.insert(dims.begin(), v);
  for (std::uint32_t v : dims)
    for (int s = 24; s >= 0; s -= 8) h.push_back(static_cast<unsigned char>(v >> s));
  return h;
}

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), int(bytes.size()));
  gzclose(f);
}

// A set of n images of r × c pixels and labels i % 10, plain or gzipped.
void write_set(const TempDir& dir, const std::string& prefix, std::uint32_t n, std::uint32_t r, std::uint32_t c,
               bool gz) {
  auto images = idx_header(0x803, {n, r, c});
  for (std::uint32_t i = 0; i < n * r * c; ++i) images.push_back(static_cast<unsigned char>(i * 7));
  auto labels = idx_header(0x801, {n});
  for (std::uint32_t i = 0; i < n; ++i) labels.push_back(static_cast<unsigned char>(i % 10));
  const std::string img = dir.file(prefix + "-images-idx3-ubyte"), lab = dir.file(prefix + "-labels-idx1-ubyte");
  if (gz) {
    write_gz(img + ".gz", images);
    write_gz(lab + ".gz", labels);
  } else {
    kmtest::write_bytes(img, images.data(), images.size());
    kmtest::write_bytes(lab, labels.data(), labels.size());
  }
}

TEST(Idx, ReadsPlainAndGzip) {
  for (bool gz : {false, true}) {
    TempDir dir;
    write_set(dir, "train", 12, 3, 4, gz);
    const km::IdxSet s = km::read_idx_set(dir.path().string(), "train", 10);
    EXPECT_EQ(s.images.count, 12u);
    EXPECT_EQ(s.images.rows * s.images.cols, 12u);
    EXPECT_EQ(s.images.pixels[5], static_cast<unsigned char>(35));
    EXPECT_EQ(s.labels[11], 1);
  }
}

TEST(Idx, EveryDefectIsOneLine) {
  TempDir dir;
  kmtest::expect_error([&] { km::read_idx_set(dir.path().string(), "train", 10); }, "neither it nor");
  const std::string img = dir.file("i"), lab = dir.file("l");
  auto good = idx_header(0x803, {2, 2, 2});
  good.insert(good.end(), 8, 1);
  auto bad_magic = good;
  bad_magic[3] = 0x02;
  kmtest::write_bytes(img, bad_magic.data(), bad_magic.size());
  kmtest::expect_error([&] { km::read_idx_images(img); }, "magic number 0x00000802");
  kmtest::write_bytes(img, good.data(), good.size() - 3);
  kmtest::expect_error([&] { km::read_idx_images(img); }, "truncated");
  kmtest::write_bytes(img, good.data(), 10);
  kmtest::expect_error([&] { km::read_idx_images(img); }, "truncated: the file ends inside the header");
  auto extra = good;
  extra.push_back(0);
  kmtest::write_bytes(img, extra.data(), extra.size());
  kmtest::expect_error([&] { km::read_idx_images(img); }, "past the sizes");
  auto labels = idx_header(0x801, {3});
  labels.insert(labels.end(), {1, 10, 2});
  kmtest::write_bytes(lab, labels.data(), labels.size());
  kmtest::expect_error([&] { km::read_idx_labels(lab, 10); }, "label 10 of item 1 is out of range");
  auto empty = idx_header(0x803, {0, 28, 28});
  kmtest::write_bytes(img, empty.data(), empty.size());
  kmtest::expect_error([&] { km::read_idx_images(img); }, "empty images");
  // A gzip stream cut short.
  write_gz(img + ".gz", good);
  std::ifstream in(img + ".gz", std::ios::binary);
  std::vector<char> z((std::istreambuf_iterator<char>(in)), {});
  kmtest::write_bytes(img + ".gz", z.data(), z.size() - 12);
  EXPECT_THROW(km::read_idx_images(img + ".gz"), km::InputError);
  // Counts that disagree.
  write_set(dir, "t10k", 5, 2, 2, false);
  auto four = idx_header(0x801, {4});
  four.insert(four.end(), {0, 1, 2, 3});
  kmtest::write_bytes(dir.file("t10k-labels-idx1-ubyte"), four.data(), four.size());
  kmtest::expect_error([&] { km::read_idx_set(dir.path().string(), "t10k", 10); }, "holds 5 images but");
}

// A header declaring more items than the file holds is refused from the file's size, before
// anything is allocated: 2,000,000 images of 28 x 28 in a file of 116 bytes were zero-filled
// to 1.5 GB before "truncated" (19 GB and 49 s for a larger lie).
TEST(Idx, HeaderIsCheckedAgainstTheFileSize) {
  TempDir dir;
  const std::string img = dir.file("i"), lab = dir.file("l");
  auto lie = idx_header(0x803, {2000000, 28, 28});
  lie.insert(lie.end(), 100, 7);
  kmtest::write_bytes(img, lie.data(), lie.size());
  kmtest::expect_error([&] { km::read_idx_images(img); },
                       "truncated: its header declares 2000000 images of 28 x 28 pixels (1568000000 bytes) but the "
                       "file holds 100 bytes after the header");
  write_gz(img + ".gz", lie);
  kmtest::expect_error([&] { km::read_idx_images(img + ".gz"); }, "compressed bytes can hold");
  auto labels = idx_header(0x801, {5000000});
  labels.insert(labels.end(), {1, 2, 3});
  kmtest::write_bytes(lab, labels.data(), labels.size());
  kmtest::expect_error([&] { km::read_idx_labels(lab, 10); }, "declares 5000000 labels (5000000 bytes)");
  // A gzip file within deflate's ratio but short: read as far as it goes, then one line.
  auto zeros = idx_header(0x803, {1, 1000, 1000});
  zeros.insert(zeros.end(), 300000, 0);
  write_gz(img + ".gz", zeros);
  kmtest::expect_error([&] { km::read_idx_images(img + ".gz"); }, "the file ends inside the pixels");
  // The exact size still reads.
  auto exact = idx_header(0x803, {3, 1, 2});
  exact.insert(exact.end(), {1, 2, 3, 4, 5, 6});
  kmtest::write_bytes(img, exact.data(), exact.size());
  EXPECT_EQ(km::read_idx_images(img).pixels[5], 6);
}

TEST(Mlp, GradientMatchesFiniteDifferences) {
  auto o = small_options("cpu-blas");
  o.momentum = 0;
  o.lr = 1e-3;
  o.batch = 40;
  const auto set = teacher_set<double>(40, 12, 10, 3);
  std::vector<std::int32_t> rows(40);
  for (int i = 0; i < 40; ++i) rows[i] = i;
  for (int layer : {0, 1, 2}) {
    // One trainer steps (and so moves every layer); a fresh one, from the same seed, probes.
    km::mlp::Trainer<double> stepped(o, set.d, 10), t(o, set.d, 10);
    const auto w0 = stepped.weights(layer);
    stepped.step(set, rows.data(), 40);
    const auto w1 = stepped.weights(layer);
    // The step moved w by −lr·g (momentum 0); the loss's slope along each weight is g.
    for (std::size_t i : {std::size_t(0), w0.size() / 3, w0.size() - 1}) {
      const double g = (w0[i] - w1[i]) / o.lr, h = 1e-6;
      auto w = w0;
      w[i] = w0[i] + h;
      t.set_weights(layer, w);
      const double up = t.evaluate(set).loss_sum / 40;
      w[i] = w0[i] - h;
      t.set_weights(layer, w);
      const double down = t.evaluate(set).loss_sum / 40;
      t.set_weights(layer, w0);
      // Central differences: error O(h²) plus rounding ~1e-16/h.
      EXPECT_NEAR(g, (up - down) / (2 * h), 1e-8 + 1e-6 * std::fabs(g)) << "layer " << layer << " weight " << i;
    }
  }
}

TEST(Mlp, LearnsTheTeacher) {
  const auto train = teacher_set<float>(2048, 12, 4, 1), test = teacher_set<float>(512, 12, 4, 2);
  auto o = small_options("cpu-blocked");
  o.epochs = 8;
  const auto epochs = km::mlp::train(o, train, test, 4);
  EXPECT_LT(epochs.back().train_loss, 0.5 * epochs.front().train_loss);
  EXPECT_GT(epochs.back().test_accuracy, 0.85);
}

TEST(Mlp, CpuKernelsGiveTheSameCurve) {
  for (const char* k : {"cpu-blocked", "cpu-omp"}) {
    check_same_curve<float>(k);
    check_same_curve<double>(k);
  }
}

TEST(Mlp, SameBitsEveryRun) {
  const auto train = teacher_set<float>(300, 10, 10, 1), test = teacher_set<float>(50, 10, 10, 2);
  const auto o = small_options("cpu-blocked");
  const auto a = km::mlp::train(o, train, test, 10), b = km::mlp::train(o, train, test, 10);
  for (std::size_t e = 0; e < a.size(); ++e) {
    EXPECT_EQ(std::memcmp(&a[e].train_loss, &b[e].train_loss, sizeof(double)), 0);
    EXPECT_EQ(a[e].test_accuracy, b[e].test_accuracy);
  }
}

TEST(Mlp, OptionsAndKernelsAreChecked) {
  auto o = small_options("cpu-blas");
  o.batch = 0;
  kmtest::expect_error<km::UsageError>([&] { km::mlp::validate(o, 100); }, "--batch=0");
  o = small_options("cpu-blas");
  o.batch = 200;
  kmtest::expect_error<km::UsageError>([&] { km::mlp::validate(o, 100); }, "larger than the 100 training items");
  o = small_options("cpu-blas");
  o.lr = -1;
  kmtest::expect_error<km::UsageError>([&] { km::mlp::validate(o, 100); }, "--lr=-1");
  o = small_options("cpu-blas");
  o.momentum = 1;
  kmtest::expect_error<km::UsageError>([&] { km::mlp::validate(o, 100); }, "--momentum=1");
  // Epochs beyond what can run (the int counter, one EpochStats each) are refused up front.
  o = small_options("cpu-blas");
  o.epochs = 2147483647;
  kmtest::expect_error<km::UsageError>([&] { km::mlp::validate(o, 100); }, "--epochs=2147483647: must be in 1..1000000");
  o.epochs = 1000000;
  EXPECT_NO_THROW(km::mlp::validate(o, 100));
  o = small_options("hybrid");
  kmtest::expect_error<km::UsageError>([&] { km::mlp::Trainer<float>(o, 10, 10); }, "splits each product");
  o = small_options("nope");
  kmtest::expect_error<km::UsageError>([&] { km::mlp::Trainer<float>(o, 10, 10); }, "is not one of");
  if (!km::gpu_info().present) {
    o = small_options("regblock");
    kmtest::expect_error<km::UsageError>([&] { km::mlp::Trainer<float>(o, 10, 10); }, "needs a CUDA GPU");
  }
}

TEST(Mlp, InitialWeightsAndOrderAreSeeded) {
  EXPECT_EQ(km::mlp::initial_weights(3, 1, 20, 7), km::mlp::initial_weights(3, 1, 20, 7));
  EXPECT_NE(km::mlp::initial_weights(3, 1, 20, 7), km::mlp::initial_weights(4, 1, 20, 7));
  const auto w = km::mlp::initial_weights(3, 0, 600, 50);
  const double bound = std::sqrt(6.0 / 600);
  double lo = 0, hi = 0;
  for (double v : w) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_LE(hi, bound);
  EXPECT_GE(lo, -bound);
  EXPECT_GT(hi, 0.9 * bound);
  auto order = km::mlp::epoch_order(1, 2, 1000);
  EXPECT_NE(order, km::mlp::epoch_order(1, 3, 1000));
  std::sort(order.begin(), order.end());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(order[i], i);
}

}  // namespace
