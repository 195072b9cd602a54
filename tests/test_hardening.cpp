// The adversarial cases of the hardening issue, one test per cause: inputs that once
// crashed, hung, were read loosely or produced silent wrong answers now end in one clear
// error (or the right result).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "common/errors.hpp"
#include "io/generate.hpp"
#include "io/load.hpp"
#include "io/text_reader.hpp"
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

}  // namespace
