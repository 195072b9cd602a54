// The adversarial cases of the hardening issue, one test per cause: inputs that once
// crashed, hung, were read loosely or produced silent wrong answers now end in one clear
// error (or the right result).
#include <gtest/gtest.h>
#include <omp.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "io/generate.hpp"
#include "io/load.hpp"
#include "io/text_reader.hpp"
#include "io/write.hpp"
#include "kmeans/registry.hpp"
#include "test_util.hpp"

namespace {

using kmtest::expect_error;
using kmtest::TempDir;

TEST(Hardening, ByteOrderMarkIsNothing) {
  TempDir dir;
  kmtest::write_text(dir.file("one.csv"), "\xEF\xBB\xBF" "1.5\n2.5\n3.5\n");
  auto a = km::load<double>(dir.file("one.csv"));
  ASSERT_EQ(a.n, 3u) << "the BOM must not turn the first row into a header";
  EXPECT_EQ(a.values[0], 1.5);
  kmtest::write_text(dir.file("head.csv"), "\xEF\xBB\xBF" "x,y\n1,2\n");
  EXPECT_EQ(km::load<double>(dir.file("head.csv")).n, 1u);
  kmtest::write_text(dir.file("c.txt"), "\xEF\xBB\xBF" "0 1 2\n1 3 4\n");
  EXPECT_EQ(km::load<double>(dir.file("c.txt")).d, 2u);
}

TEST(Hardening, NumbersParseStrictlyAndWhole) {
  TempDir dir;
  for (const char* cell : {"1e-400xyz", "+-1", "-+1", "++1", "1e999x", "0x10", "1;5"}) {
    kmtest::write_text(dir.file("bad.csv"), std::string("1,2\n3,") + cell + "\n");
    expect_error([&] { km::load<double>(dir.file("bad.csv")); }, "is not a number");
  }
  kmtest::write_text(dir.file("ok.csv"), "+1,-2\n1e-400,3\n");
  auto d = km::load<double>(dir.file("ok.csv"));
  EXPECT_EQ(d.values[0], 1.0);
  EXPECT_EQ(d.values[2], 0.0) << "underflow reads as zero";
  kmtest::write_text(dir.file("big.csv"), "1,2\n1e999,3\n");
  expect_error([&] { km::load<double>(dir.file("big.csv")); }, "NaN/Inf or out of range");
  kmtest::write_text(dir.file("bigf.csv"), "1,2\n1e300,3\n");
  expect_error([&] { km::load<float>(dir.file("bigf.csv")); }, "--precision=double");
}

TEST(Hardening, ControlCharactersShowInMessages) {
  TempDir dir;
  kmtest::write_text(dir.file("nul.csv"), std::string("1,2\n3,4\0x\n", 10));
  expect_error([&] { km::load<double>(dir.file("nul.csv")); }, "4\\x00x");
  kmtest::write_text(dir.file("cr.csv"), "1,2\r3,x\r");
  expect_error([&] { km::load<double>(dir.file("cr.csv")); }, "\\r");
}

TEST(Hardening, OnlyRegularFiles) {
  TempDir dir;
  const std::string fifo = dir.file("pipe.csv");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { km::load<double>(fifo); }, "not a regular file (a FIFO)");  // must not block
  const std::string zero = dir.file("zero.csv");
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  expect_error([&] { km::load<double>(zero); }, "not a regular file (a device)");
  ASSERT_EQ(::symlink(dir.file("b.csv").c_str(), dir.file("a.csv").c_str()), 0);
  ASSERT_EQ(::symlink(dir.file("a.csv").c_str(), dir.file("b.csv").c_str()), 0);
  expect_error([&] { km::load<double>(dir.file("a.csv")); }, "symbolic links");
  expect_error([&] { km::load<double>(dir.file("gone.h5")); }, "No such file");
}

TEST(Hardening, LinesAreCapped) {
  TempDir dir;
  {
    std::ofstream out(dir.file("long.csv"), std::ios::binary);
    const std::string block(1 << 20, '7');
    for (std::size_t i = 0; i <= (km::LineReader::kMaxLine >> 20); ++i) out << block;
  }
  expect_error([&] { km::load<double>(dir.file("long.csv")); }, "longer than 64 MiB");
}

TEST(Hardening, NpyHeaderIsAPythonDict) {
  TempDir dir;
  const double v[6] = {1, 2, 3, 4, 5, 6};
  auto header = [&](const std::string& dict) {
    kmtest::write_npy_header(dir.file("h.npy"), dict, v, sizeof v);
    return dir.file("h.npy");
  };
  // Another key's text that looks like a descr is not the descr; unknown keys are refused.
  expect_error([&] { km::load<double>(header("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), "
                                             "'note': \"'descr': '<i4'\"}")); },
               "unexpected key");
  // A repeated key: the last one wins, as in Python and numpy.
  auto d = km::load<double>(header("{'descr': '<f8', 'shape': (1, 2), 'fortran_order': False, 'shape': (3, 2), }"));
  EXPECT_EQ(d.n, 3u);
  EXPECT_EQ(d.d, 2u);
  expect_error([&] { km::load<double>(header("{'descr': '<f8', 'fortran_order': 1, 'shape': (3, 2), }")); },
               "True or False");
  expect_error([&] { km::load<double>(header("{'descr': '<f8', 'fortran_order': Maybe, 'shape': (3, 2), }")); },
               "True or False");
  expect_error([&] { km::load<double>(header("{'descr': '<f8', 'fortran_order': True, 'shape': (3, 2), }")); },
               "Fortran-order");
  expect_error([&] { km::load<double>(header("{'descr': '<f8', 'fortran_order': False, 'shape': "
                                             "(99999999999999999999999, 2), }")); },
               "too large");
  expect_error([&] { km::load<double>(header("{'descr': '<f8', 'fortran_order': False}")); }, "no 'shape'");
  expect_error([&] { km::load<double>(header("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2)} x")); },
               "text after");
}

TEST(Hardening, OverflowIsAnErrorNotAResult) {
  // ±1.5e308 rows: the sums overflow (omp once made a NaN centroid and wrote out of bounds).
  km::Dataset<double> huge(4, 2, "test");
  const double v[8] = {1.5e308, -1.5e308, -1.5e308, 1.5e308, 1.5e308, 1.5e308, -1.5e308, -1.5e308};
  std::copy(v, v + 8, huge.values.data());
  km::Params p;
  p.k = 1;
  p.threads = 2;
  for (const char* impl : {"seq", "omp"})
    expect_error([&] { km::run(km::find_implementation(impl), huge, p); }, "too large");
  // Double data scaled by 1e154: squared distances overflow double.
  auto scaled = km::generate_uniform<double>(500, 4, 1);
  for (std::size_t i = 0; i < 500 * 4; ++i) scaled.values[i] *= 1e154;
  p.k = 3;
  expect_error([&] { km::run(km::find_implementation("omp"), scaled, p); }, "overflow double");
  // Float data of 1e20: squared distances overflow float; suggest double.
  auto f = km::generate_uniform<float>(500, 4, 1);
  for (std::size_t i = 0; i < 500 * 4; ++i) f.values[i] *= 1e20f;
  expect_error([&] { km::run(km::find_implementation("seq"), f, p); }, "--precision=double");
  // The same values in double run and give a finite inertia.
  auto d = km::generate_uniform<double>(500, 4, 1);
  for (std::size_t i = 0; i < 500 * 4; ++i) d.values[i] *= 1e20;
  EXPECT_TRUE(std::isfinite(km::run(km::find_implementation("omp"), d, p).inertia));
}

TEST(Hardening, OutputNeverOverwritesTheInput) {
  TempDir dir;
  const std::string input = dir.file("x.csv");
  kmtest::write_text(input, "1,2\n3,4\n");
  expect_error<km::UsageError>([&] { km::check_output_path(input, input); }, "would overwrite the input");
  // Another name for the same file.
  ASSERT_EQ(::link(input.c_str(), dir.file("y.csv").c_str()), 0);
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("y.csv"), input); }, "would overwrite");
  ASSERT_EQ(::symlink(input.c_str(), dir.file("z.csv").c_str()), 0);
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("z.csv"), input); }, "would overwrite");
  // X.csv writes X.labels.csv: refused when that is the input.
  const std::string labels_input = dir.file("r.labels.csv");
  kmtest::write_text(labels_input, "1\n2\n");
  expect_error<km::UsageError>([&] { km::check_output_path(dir.file("r.csv"), labels_input); }, "r.labels.csv");
  EXPECT_NO_THROW(km::check_output_path(dir.file("other.csv"), input));
  expect_error<km::UsageError>([&] { km::check_output_path("", input); }, "empty");
}

TEST(Hardening, CsvPairIsCommittedTogether) {
  TempDir dir;
  // The centroids cannot be renamed into place (a directory stands there): the labels file
  // must come back as it was, and no temporary may stay.
  const std::string out = dir.file("r.csv");
  std::filesystem::create_directories(out + "/full");
  kmtest::write_text(dir.file("r.labels.csv"), "old labels\n");
  const double c[2] = {1, 2};
  const std::int32_t l[1] = {0};
  km::ResultView<double> view{c, 1, 2, l, 1, 0.0, 1};
  EXPECT_THROW(km::write_result(out, view), km::InputError);
  std::ifstream in(dir.file("r.labels.csv"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "old labels\n") << "the old labels must be restored";
  for (auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  // Without an old labels file, a failed commit leaves none.
  std::filesystem::remove(dir.file("r.labels.csv"));
  EXPECT_THROW(km::write_result(out, view), km::InputError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("r.labels.csv")));
}

TEST(Hardening, SignalsRemoveTemporaries) {
  TempDir dir;
  const std::string tmp = dir.file(".r.h5.tmp.test");
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1}) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const struct rlimit no_core {0, 0};
      ::setrlimit(RLIMIT_CORE, &no_core);  // SIGQUIT's default dumps core
      std::signal(sig, SIG_DFL);           // as a program starts (the runner may ignore some)
      km::TemporaryFile t(tmp);
      kmtest::write_text(t.path(), "partial");
      std::raise(sig);
      std::_Exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "the signal still ends the program";
    EXPECT_FALSE(std::filesystem::exists(tmp)) << "signal " << sig << " left the temporary";
  }
}

// A signal the caller ignores (nohup's SIGHUP) stays ignored: the run goes on.
TEST(Hardening, IgnoredSignalsStayIgnored) {
  TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGHUP, SIG_IGN);
    km::TemporaryFile t(dir.file(".r.h5.tmp.test"));
    std::raise(SIGHUP);
    std::_Exit(7);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << "SIGHUP, ignored, ended the run";
}

// An initial centroid far from the data (an --init file's): omp's fixed-point inertia took its
// scale from the farthest centroid, so it rounded to 0 (1e100) or wrapped (1e200); it now comes
// from the nearest one, and every iteration's inertia is seq's. Centroids all so far that every
// distance overflows would tie at infinity (wrong labels): refused.
TEST(Hardening, FarInitialCentroids) {
  const auto data = kmtest::make_data<double>(false, 100, 3, 3, 5);
  for (double far : {1e100, 1e200}) {
    km::Params p;
    p.k = 3;
    p.loops = 3;
    p.init = km::Init::given;
    p.given_d = 3;
    p.given_centroids.assign(data.row(0), data.row(0) + 9);
    for (int j = 6; j < 9; ++j) p.given_centroids[j] *= far;
    const auto seq = km::run(km::find_implementation("seq"), data, p);
    const auto omp = km::run(km::find_implementation("omp"), data, p);
    ASSERT_EQ(omp.per_iteration.size(), seq.per_iteration.size());
    for (std::size_t i = 0; i < seq.per_iteration.size(); ++i)
      EXPECT_NEAR(omp.per_iteration[i].inertia, seq.per_iteration[i].inertia, 1e-12 * seq.per_iteration[i].inertia)
          << "far centroid " << far << ", iteration " << i + 1;
    EXPECT_EQ(omp.labels, seq.labels);
  }
  const auto floats = kmtest::make_data<float>(false, 100, 2, 2, 5);
  km::Params p;
  p.k = 2;
  p.init = km::Init::given;
  p.given_d = 2;
  p.given_centroids = {1e20, 1e20, -3e19, -3e19};
  for (const char* impl : {"seq", "omp"}) {
    EXPECT_THROW(km::predict(km::find_implementation(impl), floats, p), km::InputError) << impl;
    EXPECT_THROW(km::run(km::find_implementation(impl), floats, p), km::InputError) << impl;
  }
}

TEST(Hardening, CpuRunsAreBitReproducible) {
  const auto data = kmtest::make_data<double>(true, 20000, 8, 12, 3);
  km::Params p;
  p.k = 12;
  p.threads = 2;
  for (const char* impl : {"seq", "omp"}) {
    const auto a = km::run(km::find_implementation(impl), data, p);
    const auto b = km::run(km::find_implementation(impl), data, p);
    EXPECT_EQ(a.centroids, b.centroids) << impl;
    EXPECT_EQ(a.labels, b.labels) << impl;
    EXPECT_EQ(std::memcmp(&a.inertia, &b.inertia, sizeof(double)), 0) << impl;
  }
}

TEST(Hardening, HdfDatasetMustHoldWhatItDeclares) {
  TempDir dir;
  // Declared 100000 x 1000 doubles (800 MB) but never written: refused before anything is
  // allocated or read (an uncompressed dataset must store every byte it declares).
  const std::string path = dir.file("empty.h5");
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {100000, 1000};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t ds = H5Dcreate2(file, "data", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(file);
  expect_error([&] { km::load<double>(path); }, "never written");
}

// A compressed dataset stores fewer bytes than it declares, so its chunks are counted instead:
// one never written (HDF5 would read it as zeros) is refused. So is a filter this HDF5 lacks,
// named, before a read fails.
// A filter that passes its bytes through, registered under LZF's id while a test writes with it
// (then unregistered: the file's filter is one this HDF5 lacks).
std::size_t pass_through(unsigned, std::size_t, const unsigned[], std::size_t bytes, std::size_t*, void**) {
  return bytes;
}

void write_chunked(const std::string& path, int rows_written, bool unknown_filter, bool required = false) {
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {300, 4}, chunk[2] = {100, 4};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 2, chunk);
  H5Z_class2_t lzf = {H5Z_CLASS_T_VERS, 32000, 1, 1, "pass-through", nullptr, nullptr, pass_through};
  if (unknown_filter && required) H5Zregister(&lzf);
  if (unknown_filter)  // (optional and unavailable: HDF5 writes the chunks unfiltered, and records the filter)
    H5Pset_filter(dcpl, 32000, required ? H5Z_FLAG_MANDATORY : H5Z_FLAG_OPTIONAL, 0, nullptr);
  else
    H5Pset_deflate(dcpl, 6);
  hid_t ds = H5Dcreate2(file, "data", H5T_IEEE_F64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  std::vector<double> values(static_cast<std::size_t>(rows_written) * 4, 0.25);
  const hsize_t start[2] = {0, 0}, count[2] = {static_cast<hsize_t>(rows_written), 4};
  hid_t memory = H5Screate_simple(2, count, nullptr);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  H5Dwrite(ds, H5T_NATIVE_DOUBLE, memory, space, H5P_DEFAULT, values.data());
  H5Sclose(memory);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(file);
  if (unknown_filter && required) H5Zunregister(32000);
}

TEST(Hardening, CompressedHdfDatasetMustHoldEveryChunk) {
  TempDir dir;
  const std::string partial = dir.file("partial.h5"), whole = dir.file("whole.h5"), odd = dir.file("odd.h5");
  write_chunked(partial, 100, false);
  expect_error([&] { km::load<double>(partial); }, "in 3 chunks but stores 1 of them");
  write_chunked(whole, 300, false);
  EXPECT_EQ(km::load<double>(whole).n, 300u);
  if (H5Zfilter_avail(32000) <= 0) {  // (LZF: h5py's, not in Debian's HDF5)
    write_chunked(odd, 300, true, true);  // required: its chunks cannot be read here
    expect_error([&] { km::load<double>(odd); }, "compressed with filter 32000");
    write_chunked(odd, 300, true, false);  // optional: written unfiltered, read without it
    EXPECT_EQ(km::load<double>(odd).n, 300u);
  }
}

// The run check's host memory: what each implementation allocates. omp at K = 2 keeps a [d][K]
// copy padded to 16 centroids and a K x d sum per thread (--threads=0: every core): the issue's
// 2 x 1e8 at K = 2 on 16 threads was killed at 22.7 GB while the check counted 6.4 GB.
TEST(Hardening, HostMemoryEstimateCountsThreadsAndPadding) {
  const km::Implementation& omp = km::find_implementation("omp");
  const km::Implementation& seq = km::find_implementation("seq");
  km::Params p;
  p.k = 2;
  p.threads = 16;
  const double n = 2, d = 1e8, kd = 2 * d;
  EXPECT_GE(km::host_bytes(omp, 2, 100000000, 4, p), 22.7e9);
  EXPECT_GE(km::host_bytes(omp, 2, 100000000, 4, p), 16 * 8 * kd + 16 * 4 * d + 3 * 4 * kd);
  p.threads = 1;
  const double one = km::host_bytes(omp, 2, 100000000, 4, p);
  p.threads = 2;
  const double per_thread = km::host_bytes(omp, 2, 100000000, 4, p) - one;
  EXPECT_GE(per_thread, 8 * kd);
  p.threads = 0;
  EXPECT_DOUBLE_EQ(km::host_bytes(omp, 2, 100000000, 4, p), one + (omp_get_max_threads() - 1) * per_thread);
  // seq: its double sums and their carries beside the centroids (its own, the initial ones and the
  // result's).
  EXPECT_GE(km::host_bytes(seq, 2, 100000000, 4, p), 16 * kd + 3 * 4 * kd + 2 * 4 * n);
  // k-means++ holds a distance per object while it runs.
  p.k = 10;
  p.init = km::Init::kmeanspp;
  EXPECT_GE(km::host_bytes(seq, 100000000, 2, 4, p), 8 * 1e8);
}

TEST(Iterations, InertiaOfEachIterationComesFromItsAssignment) {
  // Iteration 2 assigns against the centroids iteration 1 produced, so its inertia is the
  // final inertia of a one-loop run (which assigns once more against those centroids).
  const auto data = kmtest::make_data<double>(true, 5000, 6, 7, 11);
  km::Params p;
  p.k = 7;
  p.loops = 1;
  p.threads = 2;
  for (const char* impl : {"seq", "omp"}) {
    const auto one = km::run(km::find_implementation(impl), data, p);
    km::Params two = p;
    two.loops = 2;
    const auto r = km::run(km::find_implementation(impl), data, two);
    ASSERT_EQ(r.iterations, 2) << impl;
    EXPECT_NEAR(r.per_iteration[1].inertia, one.inertia, 1e-12 * one.inertia) << impl;
    EXPECT_GT(r.per_iteration[0].inertia, r.per_iteration[1].inertia) << impl << ": Lloyd never increases it";
  }
}

TEST(TextReaders, ParallelPartsReadEveryRowInPlace) {
  // More rows than several parse parts (32768 rows each), with blank lines and a header: every
  // value lands in its row, and an error deep in the file names its own line.
  TempDir dir;
  const std::size_t rows = 100000;
  std::string csv = "a,b,c\n", txt;
  for (std::size_t i = 0; i < rows; ++i) {
    csv += std::to_string(i) + "," + std::to_string(i % 7) + ".5," + std::to_string(-static_cast<long long>(i)) + "\n";
    if (i % 40000 == 0) csv += "\n";
    txt += std::to_string(i + 1) + " " + std::to_string(i) + " 0.25\n";
  }
  kmtest::write_text(dir.file("rows.csv"), csv);
  kmtest::write_text(dir.file("rows.txt"), txt);
  const kmtest::ScopedThreads threads(2);
  const auto a = km::load<double>(dir.file("rows.csv"));
  ASSERT_EQ(a.n, rows);
  for (std::size_t i = 0; i < rows; i += 997) {
    ASSERT_EQ(a.row(i)[0], static_cast<double>(i));
    ASSERT_EQ(a.row(i)[1], static_cast<double>(i % 7) + 0.5);
    ASSERT_EQ(a.row(i)[2], -static_cast<double>(i));
  }
  EXPECT_EQ(a.row(rows - 1)[0], static_cast<double>(rows - 1));
  const auto t = km::load<double>(dir.file("rows.txt"));
  ASSERT_EQ(t.n, rows);
  ASSERT_EQ(t.d, 2u) << "the id column is recognised";
  EXPECT_EQ(t.row(77777)[0], 77777.0);
  // Row 90000 (line 90005: the header and three blank lines come before it) is bad; a later part.
  const std::size_t at = csv.find("\n90000,") + 1;
  csv.replace(at, 5, "9x000");
  kmtest::write_text(dir.file("bad.csv"), csv);
  expect_error([&] { km::load<double>(dir.file("bad.csv")); }, "line 90005, column 1: '9x000'");
}

// The room a memory cgroup leaves (a container's limit, which /proc/meminfo does not show): the
// least over the cgroup and its ancestors of the limit less the usage that is not page cache,
// v1 and v2, an unlimited level ("max", v1's huge number) skipped, nothing readable SIZE_MAX.
TEST(HostMemory, CgroupRoom) {
  const std::filesystem::path root = std::filesystem::temp_directory_path() / ("km_cgroup_" + std::to_string(getpid()));
  auto put = [&](const std::string& file, const std::string& text) {
    std::filesystem::create_directories((root / file).parent_path());
    std::ofstream(root / file) << text;
  };
  put("memory/a/memory.limit_in_bytes", "1000000\n");  // v1: 1e6 less (400000 - 100000)
  put("memory/a/memory.usage_in_bytes", "400000\n");
  put("memory/a/memory.stat", "cache 5\ntotal_cache 100000\n");
  put("memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");
  put("memory/a/b/memory.usage_in_bytes", "1\n");
  put("x/memory.max", "max\n");  // v2: 5e6 less (2e6 - 5e5) at x/y
  put("x/y/memory.max", "5000000\n");
  put("x/y/memory.current", "2000000\n");
  put("x/y/memory.stat", "anon 7\nfile 500000\ninactive_file 3\n");
  put("full/memory.max", "100\n");  // v2, usage past the limit: no room
  put("full/memory.current", "200\n");
  const std::string r = root.string();
  EXPECT_EQ(km::cgroup_room("4:memory:/a/b\n", r), 700000u);
  EXPECT_EQ(km::cgroup_room("0::/x/y\n", r), 3500000u);
  EXPECT_EQ(km::cgroup_room("4:cpu,memory:/a/b\n0::/x/y\n", r), 700000u);
  EXPECT_EQ(km::cgroup_room("0::/full\n", r), 0u);
  EXPECT_EQ(km::cgroup_room("3:cpu:/a\n0::/nowhere\n", r), SIZE_MAX);
  EXPECT_EQ(km::cgroup_room("garbage\n", r), SIZE_MAX);
  std::filesystem::remove_all(root);
}

}  // namespace
