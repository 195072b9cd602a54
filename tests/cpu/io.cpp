// Readers, writers and every bad input of the front end.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/errors.hpp"
#include "common/progress.hpp"
#include "io/generate.hpp"
#include "io/load.hpp"
#include "io/write.hpp"
#include "test_util.hpp"

using kmtest::TempDir;

namespace {

using kmtest::expect_error;

// The values must arrive exactly: as parsed from text, or as the float32 the file held.
template <class T>
void expect_values(const km::Dataset<T>& data, std::size_t n, std::size_t d, const std::vector<double>& want,
                   bool stored_as_float = false) {
  ASSERT_EQ(data.n, n);
  ASSERT_EQ(data.d, d);
  for (std::size_t i = 0; i < n * d; ++i) {
    const T expected = stored_as_float ? static_cast<T>(static_cast<float>(want[i])) : static_cast<T>(want[i]);
    EXPECT_EQ(data.values[i], expected) << "at " << i;
  }
}

const std::vector<double> kSix = {1.5, -2, 3.25, 4e-3, 5, 6.125};

// ------------------------------------------------------------------ readers, happy paths

TEST(Csv, ReadsWithAndWithoutHeader) {
  TempDir dir;
  kmtest::write_text(dir.file("a.csv"), "x,y\n1.5,-2\n3.25, 4e-3\n5,+6.125\n");
  expect_values(km::load<double>(dir.file("a.csv")), 3, 2, kSix);
  kmtest::write_text(dir.file("b.csv"), "1.5,-2\r\n3.25,4e-3\r\n\r\n5,6.125");  // CRLF, blank line, no final newline
  expect_values(km::load<float>(dir.file("b.csv")), 3, 2, kSix);
}

TEST(Csv, LongFileStreamsAcrossChunks) {
  TempDir dir;
  std::ostringstream text;
  const std::size_t n = 60000;  // > 1 MiB of text: crosses the reader's chunk boundary
  for (std::size_t i = 0; i < n; ++i) text << i << "." << (i % 7) << "," << -static_cast<double>(i) << ",1e-5\n";
  kmtest::write_text(dir.file("long.csv"), text.str());
  auto data = km::load<double>(dir.file("long.csv"));
  ASSERT_EQ(data.n, n);
  ASSERT_EQ(data.d, 3u);
  EXPECT_DOUBLE_EQ(data.row(12345)[0], 12345.4);
  EXPECT_DOUBLE_EQ(data.row(n - 1)[1], -static_cast<double>(n - 1));
}

TEST(Txt, ReadsClassicFormatWithAndWithoutIds) {
  TempDir dir;
  kmtest::write_text(dir.file("ids.txt"), "1 1.5 -2\n2 3.25 4e-3\n3 5 6.125\n");
  expect_values(km::load<double>(dir.file("ids.txt")), 3, 2, kSix);
  kmtest::write_text(dir.file("plain.txt"), "1.5\t-2\n 3.25   4e-3\n5 6.125\n\n");
  expect_values(km::load<double>(dir.file("plain.txt")), 3, 2, kSix);
  // Integer data whose first column is not a 0/1-based sequence keeps every column...
  kmtest::write_text(dir.file("ints.txt"), "7 1\n3 2\n");
  EXPECT_EQ(km::load<double>(dir.file("ints.txt")).d, 2u);
  // ...and --coords decides when the first column is ambiguous.
  kmtest::write_text(dir.file("seq.txt"), "0 10\n1 20\n2 30\n");
  EXPECT_EQ(km::load<double>(dir.file("seq.txt")).d, 1u);
  km::LoadOptions two;
  two.coords = 2;
  EXPECT_EQ(km::load<double>(dir.file("seq.txt"), two).d, 2u);
}

TEST(Bin, ReadsClassicBinary) {
  TempDir dir;
  std::vector<float> v(kSix.begin(), kSix.end());
  kmtest::write_bin(dir.file("a.bin"), 3, 2, v);
  expect_values(km::load<double>(dir.file("a.bin")), 3, 2, kSix, true);
  expect_values(km::load<float>(dir.file("a.bin")), 3, 2, kSix, true);
}

TEST(Npy, ReadsFloat64AndFloat32) {
  TempDir dir;
  kmtest::write_npy(dir.file("d.npy"), "<f8", "(3, 2)", kSix.data(), kSix.size() * 8);
  expect_values(km::load<double>(dir.file("d.npy")), 3, 2, kSix);
  std::vector<float> f(kSix.begin(), kSix.end());
  kmtest::write_npy(dir.file("f.npy"), "<f4", "(3, 2)", f.data(), f.size() * 4);
  expect_values(km::load<double>(dir.file("f.npy")), 3, 2, kSix, true);
  expect_values(km::load<float>(dir.file("f.npy")), 3, 2, kSix, true);
}

TEST(Hdf5, ReadsOnlyDatasetOrNamedOne) {
  TempDir dir;
  kmtest::write_h5(dir.file("a.h5"), "/group/points", {3, 2}, H5T_NATIVE_DOUBLE, kSix.data());
  expect_values(km::load<double>(dir.file("a.h5")), 3, 2, kSix);
  std::vector<float> f(kSix.begin(), kSix.end());
  kmtest::write_h5(dir.file("two.hdf5"), "first", {3, 2}, H5T_NATIVE_FLOAT, f.data(), "second");
  expect_error([&] { km::load<double>(dir.file("two.hdf5")); }, "--dataset");
  km::LoadOptions named;
  named.dataset = "second";
  expect_values(km::load<double>(dir.file("two.hdf5"), named), 3, 2, kSix, true);
  expect_values(km::load<float>(dir.file("two.hdf5"), named), 3, 2, kSix, true);
}

// ------------------------------------------------------------------ writers, round trips

template <class T>
void round_trip(const std::string& ext) {
  TempDir dir;
  const std::vector<T> centroids = {T(0.1), T(-1e-7), T(3) / T(7), T(12345.678)};
  const std::vector<std::int32_t> labels = {0, 1, 1, 0, 1};
  km::ResultView<T> view{centroids.data(), 2, 2, labels.data(), labels.size(), 42.5, 7};
  const std::string path = dir.file("out" + ext);
  km::write_result(path, view);

  auto back = km::load<T>(path, {});  // the centroids read back through the front end
  ASSERT_EQ(back.n, 2u);
  ASSERT_EQ(back.d, 2u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(back.values[i], centroids[i]) << "exact round trip";
  if (ext == ".csv") {
    std::ifstream in(km::labels_path_for(path));
    std::vector<std::int32_t> got;
    for (int v; in >> v;) got.push_back(v);
    EXPECT_EQ(got, labels);
  } else {
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    std::vector<std::int32_t> got(labels.size());
    hid_t ds = H5Dopen2(file, "labels", H5P_DEFAULT);
    H5Dread(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, got.data());
    double inertia = 0;
    std::int32_t iterations = 0;
    hid_t a = H5Aopen(file, "inertia", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_DOUBLE, &inertia);
    H5Aclose(a);
    a = H5Aopen(file, "iterations", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_INT32, &iterations);
    H5Aclose(a);
    H5Dclose(ds);
    H5Fclose(file);
    EXPECT_EQ(got, labels);
    EXPECT_EQ(inertia, 42.5);
    EXPECT_EQ(iterations, 7);
  }
  // Only the outputs remain: no temporary files left behind.
  std::size_t files = 0;
  for (auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos);
  }
  EXPECT_EQ(files, ext == ".csv" ? 2u : 1u);
}

TEST(Writers, CsvRoundTripDouble) { round_trip<double>(".csv"); }
TEST(Writers, CsvRoundTripFloat) { round_trip<float>(".csv"); }
TEST(Writers, Hdf5RoundTripDouble) { round_trip<double>(".h5"); }
TEST(Writers, Hdf5RoundTripFloat) { round_trip<float>(".hdf5"); }

TEST(Writers, LabelsPathSitsBesideTheCsv) {
  EXPECT_EQ(km::labels_path_for("out/run.csv"), "out/run.labels.csv");
  EXPECT_EQ(km::labels_path_for("run.csv"), "run.labels.csv");
}

// ------------------------------------------------------------------ bad inputs

TEST(BadInput, MissingFile) {
  expect_error([] { km::load<double>("/nonexistent/dir/data.csv"); }, "No such file");
}

TEST(BadInput, DirectoryInsteadOfFile) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("d.csv"));
  expect_error([&] { km::load<double>(dir.file("d.csv")); }, "directory");
}

TEST(BadInput, UnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: file permissions do not stop reads";
  TempDir dir;
  kmtest::write_text(dir.file("locked.csv"), "1,2\n");
  std::filesystem::permissions(dir.file("locked.csv"), std::filesystem::perms::none);
  expect_error([&] { km::load<double>(dir.file("locked.csv")); }, "cannot open");
}

TEST(BadInput, UnknownExtension) {
  TempDir dir;
  kmtest::write_text(dir.file("data.xyz"), "1,2\n");
  expect_error([&] { km::load<double>(dir.file("data.xyz")); }, "unknown extension '.xyz'");
}

TEST(BadInput, EmptyFileInEveryFormat) {
  TempDir dir;
  for (const char* name : {"e.csv", "e.txt", "e.bin", "e.npy", "e.h5"}) {
    kmtest::write_text(dir.file(name), "");
    SCOPED_TRACE(name);
    expect_error([&] { km::load<double>(dir.file(name)); }, std::string(name).ends_with(".h5") ? "not an HDF5" : "empty");
  }
  kmtest::write_text(dir.file("blank.csv"), "\n\n  \n");
  expect_error([&] { km::load<double>(dir.file("blank.csv")); }, "empty");
  kmtest::write_text(dir.file("header_only.csv"), "x,y\n");
  expect_error([&] { km::load<double>(dir.file("header_only.csv")); }, "empty");
}

TEST(BadInput, BinShorterThanHeaderSays) {
  TempDir dir;
  kmtest::write_bin(dir.file("short.bin"), 4, 2, {1, 2, 3, 4, 5});
  expect_error([&] { km::load<double>(dir.file("short.bin")); }, "truncated");
  kmtest::write_text(dir.file("tiny.bin"), "abc");
  expect_error([&] { km::load<double>(dir.file("tiny.bin")); }, "too short");
  kmtest::write_bin(dir.file("long.bin"), 1, 2, {1, 2, 3});
  expect_error([&] { km::load<double>(dir.file("long.bin")); }, "bytes after");
}

TEST(BadInput, NegativeOrAbsurdHeader) {
  TempDir dir;
  kmtest::write_bin(dir.file("neg.bin"), -5, 2, {1, 2});
  expect_error([&] { km::load<double>(dir.file("neg.bin")); }, "invalid shape");
  kmtest::write_bin(dir.file("zero.bin"), 3, 0, {});
  expect_error([&] { km::load<double>(dir.file("zero.bin")); }, "invalid shape");
  kmtest::write_bin(dir.file("huge.bin"), 2147483647, 2147483647, {1, 2});
  expect_error([&] { km::load<double>(dir.file("huge.bin")); }, "header");
  double v[2] = {1, 2};
  kmtest::write_npy(dir.file("huge.npy"), "<f8", "(4611686018427387904, 4611686018427387904)", v, 16);
  expect_error([&] { km::load<double>(dir.file("huge.npy")); }, "absurd shape");
  kmtest::write_npy(dir.file("neg.npy"), "<f8", "(-1, 2)", v, 16);
  expect_error([&] { km::load<double>(dir.file("neg.npy")); }, "non-negative integers");
}

TEST(BadInput, CsvNonNumericCell) {
  TempDir dir;
  kmtest::write_text(dir.file("a.csv"), "1,2\n3,abc\n");
  expect_error([&] { km::load<double>(dir.file("a.csv")); }, "line 2, column 2: 'abc' is not a number");
  kmtest::write_text(dir.file("empty_cell.csv"), "1,2\n3,\n");
  expect_error([&] { km::load<double>(dir.file("empty_cell.csv")); }, "is not a number");
  kmtest::write_text(dir.file("mixed_header.csv"), "x,2\n3,4\n");
  expect_error([&] { km::load<double>(dir.file("mixed_header.csv")); }, "'x' is not a number");
}

TEST(BadInput, RaggedRows) {
  TempDir dir;
  kmtest::write_text(dir.file("a.csv"), "1,2\n3,4,5\n");
  expect_error([&] { km::load<double>(dir.file("a.csv")); }, "ragged");
  kmtest::write_text(dir.file("a.txt"), "1 2 3\n4 5\n");
  expect_error([&] { km::load<double>(dir.file("a.txt")); }, "ragged");
}

TEST(BadInput, NanOrInfInEveryFormat) {
  TempDir dir;
  kmtest::write_text(dir.file("nan.csv"), "1,2\n3,nan\n");
  expect_error([&] { km::load<double>(dir.file("nan.csv")); }, "NaN/Inf");
  kmtest::write_text(dir.file("inf.txt"), "1 2\n-inf 4\n");
  expect_error([&] { km::load<double>(dir.file("inf.txt")); }, "NaN/Inf");
  kmtest::write_text(dir.file("overflow.csv"), "1,2\n3,1e999\n");
  expect_error([&] { km::load<double>(dir.file("overflow.csv")); }, "NaN/Inf");
  kmtest::write_text(dir.file("float_overflow.csv"), "1,2\n3,1e300\n");  // fine in double, Inf in float
  expect_error([&] { km::load<float>(dir.file("float_overflow.csv")); }, "NaN/Inf");
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  kmtest::write_bin(dir.file("nan.bin"), 2, 2, {1, 2, 3, qnan});
  expect_error([&] { km::load<double>(dir.file("nan.bin")); }, "object 1, coordinate 1");
  double v[4] = {1, std::numeric_limits<double>::infinity(), 3, 4};
  kmtest::write_npy(dir.file("inf.npy"), "<f8", "(2, 2)", v, sizeof v);
  expect_error([&] { km::load<double>(dir.file("inf.npy")); }, "Inf at object 0, coordinate 1");
  kmtest::write_h5(dir.file("inf.h5"), "x", {2, 2}, H5T_NATIVE_DOUBLE, v);
  expect_error([&] { km::load<double>(dir.file("inf.h5")); }, "NaN/Inf");
}

TEST(BadInput, CoordsDisagreeWithFile) {
  TempDir dir;
  kmtest::write_text(dir.file("a.csv"), "1,2\n3,4\n");
  km::LoadOptions three;
  three.coords = 3;
  expect_error([&] { km::load<double>(dir.file("a.csv"), three); }, "--coords=3 but");
  kmtest::write_text(dir.file("a.txt"), "1 2\n3 4\n");
  expect_error([&] { km::load<double>(dir.file("a.txt"), km::LoadOptions{"", 5}); }, "--coords=5 but");
}

TEST(BadInput, Hdf5MissingDatasetOrNot2D) {
  TempDir dir;
  kmtest::write_h5(dir.file("a.h5"), "points", {3, 2}, H5T_NATIVE_DOUBLE, kSix.data());
  expect_error([&] { km::load<double>(dir.file("a.h5"), km::LoadOptions{"nope", {}}); }, "no dataset named 'nope'");
  expect_error([&] { km::load<double>(dir.file("a.h5"), km::LoadOptions{"/g/nope", {}}); }, "no dataset named");
  kmtest::write_h5(dir.file("flat.h5"), "v", {6}, H5T_NATIVE_DOUBLE, kSix.data());
  expect_error([&] { km::load<double>(dir.file("flat.h5"), km::LoadOptions{"v", {}}); }, "is 1-D");
  expect_error([&] { km::load<double>(dir.file("flat.h5")); }, "no 2-D dataset");
  kmtest::write_text(dir.file("fake.h5"), "not hdf5 at all");
  expect_error([&] { km::load<double>(dir.file("fake.h5")); }, "not an HDF5 file");
}

TEST(BadInput, IntegerTypedDatasetsAreRefused) {
  TempDir dir;
  const std::int32_t ints[6] = {1, 2, 3, 4, 5, 6};
  kmtest::write_h5(dir.file("i.h5"), "x", {3, 2}, H5T_NATIVE_INT32, ints);
  expect_error([&] { km::load<double>(dir.file("i.h5")); }, "integer type; refused");
  kmtest::write_npy(dir.file("i.npy"), "<i4", "(3, 2)", ints, sizeof ints);
  expect_error([&] { km::load<double>(dir.file("i.npy")); }, "integer dtype '<i4' is refused");
}

TEST(BadInput, NpyOddities) {
  TempDir dir;
  double v[6] = {1, 2, 3, 4, 5, 6};
  kmtest::write_npy(dir.file("f.npy"), "<f8", "(3, 2)", v, sizeof v, true);
  expect_error([&] { km::load<double>(dir.file("f.npy")); }, "Fortran-order");
  kmtest::write_npy(dir.file("be.npy"), ">f8", "(3, 2)", v, sizeof v);
  expect_error([&] { km::load<double>(dir.file("be.npy")); }, "not little-endian");
  kmtest::write_npy(dir.file("1d.npy"), "<f8", "(6,)", v, sizeof v);
  expect_error([&] { km::load<double>(dir.file("1d.npy")); }, "2-D");
  kmtest::write_npy(dir.file("short.npy"), "<f8", "(4, 2)", v, sizeof v);
  expect_error([&] { km::load<double>(dir.file("short.npy")); }, "truncated");
  kmtest::write_text(dir.file("junk.npy"), "hello world, not numpy");
  expect_error([&] { km::load<double>(dir.file("junk.npy")); }, "bad magic");
}

TEST(BadInput, OutputPathChecks) {
  TempDir dir;
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("no/such/dir/out.h5")); }, "does not exist");
  EXPECT_NO_THROW(km::check_output_path(dir.file("out.npy")));  // .npy outputs exist now
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("out.bin")); }, "written as");
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("out.abc")); }, "unknown extension");
  EXPECT_NO_THROW(km::check_output_path(dir.file("out.csv")));
}

TEST(BadInput, FailedWriteLeavesNoFile) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("taken.h5"));  // the rename onto a directory fails
  const double c[2] = {1, 2};
  const std::int32_t l[1] = {0};
  km::ResultView<double> view{c, 1, 2, l, 1, 0.0, 1};
  EXPECT_THROW(km::write_result(dir.file("taken.h5"), view), std::runtime_error);
  for (auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << "temporary left behind";
}

// An MPI rank's share (LoadOptions rank/ranks): .bin, .npy and .h5 read only their rows (by
// byte offset / hyperslab), .csv is parsed whole and sliced; the shares, in rank order, are the
// whole file, each starting at a multiple of 16,384 rows (kRowGranule), and the split says so.
TEST(Load, RankSharesMakeTheWholeFile) {
  TempDir dir;
  const std::int32_t n = 40000, d = 3;
  std::vector<float> values(static_cast<std::size_t>(n) * d);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) * 0.25f;
  kmtest::write_bin(dir.file("a.bin"), n, d, values);
  kmtest::write_npy(dir.file("a.npy"), "<f4", "(40000, 3)", values.data(), values.size() * 4);
  kmtest::write_h5(dir.file("a.h5"), "x", {static_cast<hsize_t>(n), static_cast<hsize_t>(d)}, H5T_NATIVE_FLOAT,
                   values.data());
  std::string csv;
  for (std::int32_t i = 0; i < n; ++i)
    csv += km::strprintf("%g,%g,%g\n", values[i * d], values[i * d + 1], values[i * d + 2]);
  kmtest::write_text(dir.file("a.csv"), csv);
  for (const char* name : {"a.bin", "a.npy", "a.h5", "a.csv"})
    for (int ranks : {1, 2, 3, 5}) {
      SCOPED_TRACE(std::string(name) + " ranks=" + std::to_string(ranks));
      std::vector<double> joined;
      for (int r = 0; r < ranks; ++r) {
        km::RowSplit split;
        km::LoadOptions o;
        o.rank = r;
        o.ranks = ranks;
        o.split = &split;
        const auto part = km::load<double>(dir.file(name), o);
        EXPECT_EQ(split.total, static_cast<std::size_t>(n));
        EXPECT_EQ(split.count, part.n);
        EXPECT_EQ(split.first, joined.size() / d);
        EXPECT_EQ(split.first % km::kRowGranule, 0u);
        joined.insert(joined.end(), part.values.data(), part.values.data() + part.n * d);
      }
      ASSERT_EQ(joined.size(), values.size());
      for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(joined[i], static_cast<double>(values[i])) << i;
    }
}

// A dataset over 64 MB is read in strips (whole chunks of a chunked one), so progress shows
// while it is read: every value arrives, whole or as an MPI rank's share whose first row is no
// strip's or chunk's, chunked or contiguous, and the line counts the file's MB.
TEST(Load, Hdf5InStrips) {
  TempDir dir;
  const hsize_t n = 525522, d = 16;  // 67.3 MB in double: two strips
  std::vector<float> values(n * d);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);  // exact up to 2^24
  for (const bool chunked : {true, false}) {
    const std::string path = dir.file(chunked ? "chunked.h5" : "contiguous.h5");
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = {n, d}, chunk[2] = {1000, 8};
    const hid_t space = H5Screate_simple(2, dims, nullptr), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) H5Pset_chunk(dcpl, 2, chunk);
    const hid_t ds = H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(file);
    for (const int ranks : {1, 3}) {
      SCOPED_TRACE(std::string(chunked ? "chunked" : "contiguous") + " ranks=" + std::to_string(ranks));
      std::size_t row = 0;
      for (int r = 0; r < ranks; ++r) {
        std::FILE* lines = std::tmpfile();
        km::progress::detail::enable_on(lines, "t", 0, 0);
        km::LoadOptions o;
        o.rank = r;
        o.ranks = ranks;
        const auto part = km::load<double>(path, o);
        km::progress::disable();
        std::size_t same = 0;
        while (same < part.n * d && part.values.data()[same] == static_cast<double>(values[row * d + same])) ++same;
        EXPECT_EQ(same, part.n * d) << "the first wrong value is of row " << row + same / d;
        row += part.n;
        if (ranks == 1) {
          std::string text(512, '\0');
          std::rewind(lines);
          text.resize(std::fread(text.data(), 1, text.size(), lines));
          EXPECT_NE(text.find("\rt: reading 99%"), std::string::npos) << "the first strip of two: " << text;
          EXPECT_NE(text.find("\rt: reading 100%  33.63 of 33.63 MB"), std::string::npos) << text;
        }
        std::fclose(lines);
      }
      EXPECT_EQ(row, n);
    }
  }
}

}  // namespace
