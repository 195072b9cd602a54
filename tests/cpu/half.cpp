// 16-bit inputs: the exact float16/bfloat16 -> float conversions against an independent
// reference for every bit pattern, and the .npy and HDF5 readers of both formats.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/errors.hpp"
#include "io/element.hpp"
#include "io/load.hpp"
#include "test_util.hpp"

using kmtest::expect_error;
using kmtest::TempDir;

namespace {

// The value a 16-bit pattern of `exponent_bits` exponent and `fraction_bits` fraction bits
// stands for, by the format's definition, computed in double with ldexp (no bit tricks):
// (-1)^s * 2^(e - bias) * 1.f for normal numbers, 2^(1 - bias) * 0.f for subnormals.
double reference_value(std::uint16_t bits, int exponent_bits, int fraction_bits) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int e = (bits >> fraction_bits) & ((1 << exponent_bits) - 1);
  const int f = bits & ((1 << fraction_bits) - 1);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << exponent_bits) - 1)
    return f == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  const double magnitude = e == 0 ? std::ldexp(f, 1 - bias - fraction_bits)
                                  : std::ldexp(f + (1 << fraction_bits), e - bias - fraction_bits);
  return sign * magnitude;
}

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Every one of the 65536 patterns: the same value (the sign of zero included), a NaN for a NaN
// with its sign and payload in float's upper fraction bits.
void check_every_pattern(km::Element element, int exponent_bits, int fraction_bits) {
  int nans = 0, subnormals = 0;
  for (std::uint32_t p = 0; p < 65536; ++p) {
    const auto bits = static_cast<std::uint16_t>(p);
    const float got = km::bits16_to_float(bits, element);
    const double want = reference_value(bits, exponent_bits, fraction_bits);
    if (std::isnan(want)) {
      ++nans;
      ASSERT_TRUE(std::isnan(got)) << std::hex << p;
      ASSERT_EQ(std::signbit(got), (p & 0x8000) != 0) << std::hex << p;
      const std::uint32_t payload = p & ((1u << fraction_bits) - 1);
      ASSERT_EQ(bits_of(got) & 0x7fffffu, payload << (23 - fraction_bits)) << std::hex << p;
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << std::hex << p;  // exact: the float holds the very value
    ASSERT_EQ(std::signbit(got), (p & 0x8000) != 0) << std::hex << p;
    if (want != 0 && ((p >> fraction_bits) & ((1u << exponent_bits) - 1)) == 0) ++subnormals;
  }
  EXPECT_EQ(nans, 2 * ((1 << fraction_bits) - 1));  // the patterns the loop checked as NaN
  EXPECT_EQ(subnormals, 2 * ((1 << fraction_bits) - 1));
}

TEST(Element, Float16EveryPatternExact) { check_every_pattern(km::Element::float16, 5, 10); }

TEST(Element, Bfloat16EveryPatternExact) { check_every_pattern(km::Element::bfloat16, 8, 7); }

TEST(Element, KnownValues) {
  EXPECT_EQ(km::float16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(km::float16_to_float(0xc000), -2.0f);
  EXPECT_EQ(km::float16_to_float(0x7bff), 65504.0f);                 // the largest half
  EXPECT_EQ(km::float16_to_float(0x0001), std::ldexp(1.0f, -24));    // the smallest subnormal
  EXPECT_EQ(km::float16_to_float(0x03ff), std::ldexp(1023.0f, -24)); // the largest subnormal
  EXPECT_EQ(bits_of(km::float16_to_float(0x8000)), 0x80000000u);     // -0
  EXPECT_EQ(km::bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(km::bfloat16_to_float(0x7f7f), std::ldexp(255.0f, 120));  // the largest bfloat16
  EXPECT_EQ(km::bfloat16_to_float(0x0001), std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isinf(km::bfloat16_to_float(0xff80)) && km::bfloat16_to_float(0xff80) < 0);
}

// Half patterns that cover signs, zeros, subnormals, the extremes and ordinary values.
const std::vector<std::uint16_t> kHalf = {0x3c00, 0xc000, 0x0000, 0x8000, 0x0001, 0x83ff,
                                          0x7bff, 0xfbff, 0x3555, 0x4a4d, 0x0400, 0x2e66};
const std::vector<std::uint16_t> kBfloat = {0x3f80, 0xc000, 0x0000, 0x8000, 0x0001, 0x807f,
                                            0x7f7f, 0xff7f, 0x3eaa, 0x4149, 0x0080, 0x3dcc};

template <class T>
void expect_converted(const km::Dataset<T>& data, const std::vector<std::uint16_t>& bits, km::Element element,
                      std::size_t d) {
  ASSERT_EQ(data.n * data.d, bits.size());
  EXPECT_EQ(data.d, d);
  EXPECT_EQ(data.element, km::element_name(element));
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const double want = reference_value(bits[i], element == km::Element::float16 ? 5 : 8,
                                        element == km::Element::float16 ? 10 : 7);
    EXPECT_EQ(static_cast<double>(data.values[i]), want) << i;
    EXPECT_EQ(std::signbit(data.values[i]), (bits[i] & 0x8000) != 0) << i;
  }
}

TEST(Half, NpyFloat16AndBfloat16) {
  TempDir dir;
  kmtest::write_npy(dir.file("h.npy"), "<f2", "(4, 3)", kHalf.data(), kHalf.size() * 2);
  expect_converted(km::load<float>(dir.file("h.npy")), kHalf, km::Element::float16, 3);
  expect_converted(km::load<double>(dir.file("h.npy")), kHalf, km::Element::float16, 3);
  // What np.save writes for ml_dtypes' bfloat16 ('<V2'), for a void array np.load gave back
  // ('|V2'), and the dtype's name.
  for (const char* descr : {"<V2", "|V2", "bfloat16"}) {
    SCOPED_TRACE(descr);
    kmtest::write_npy(dir.file("b.npy"), descr, "(6, 2)", kBfloat.data(), kBfloat.size() * 2);
    expect_converted(km::load<float>(dir.file("b.npy")), kBfloat, km::Element::bfloat16, 2);
    expect_converted(km::load<double>(dir.file("b.npy")), kBfloat, km::Element::bfloat16, 2);
    EXPECT_EQ(km::input_element(dir.file("b.npy")), km::Element::bfloat16);
  }
  EXPECT_EQ(km::input_element(dir.file("h.npy")), km::Element::float16);
}

TEST(Half, NpyLongFileCrossesTheReadChunks) {
  TempDir dir;
  const std::size_t n = 50000, d = 3;  // 150,000 values: three of the reader's 65,536-value chunks
  std::vector<std::uint16_t> bits(n * d);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>((i * 7919) % 0x7c00);  // finite
  kmtest::write_npy(dir.file("long.npy"), "<f2", "(50000, 3)", bits.data(), bits.size() * 2);
  const auto data = km::load<float>(dir.file("long.npy"));
  ASSERT_EQ(data.n, n);
  for (std::size_t i = 0; i < bits.size(); ++i) ASSERT_EQ(data.values[i], km::float16_to_float(bits[i])) << i;
}

TEST(Half, BadNpyFiles) {
  TempDir dir;
  kmtest::write_npy(dir.file("be.npy"), ">f2", "(4, 3)", kHalf.data(), kHalf.size() * 2);
  expect_error([&] { km::load<float>(dir.file("be.npy")); }, "dtype '>f2' is not little-endian");
  kmtest::write_npy(dir.file("bev.npy"), ">V2", "(4, 3)", kHalf.data(), kHalf.size() * 2);
  expect_error([&] { km::load<float>(dir.file("bev.npy")); }, "not little-endian");
  kmtest::write_npy(dir.file("v4.npy"), "<V4", "(2, 3)", kHalf.data(), kHalf.size() * 2);
  expect_error([&] { km::load<float>(dir.file("v4.npy")); }, "dtype '<V4' is not float16, bfloat16");
  kmtest::write_npy(dir.file("f1.npy"), "<f1", "(4, 3)", kHalf.data(), kHalf.size());
  expect_error([&] { km::load<float>(dir.file("f1.npy")); }, "dtype '<f1' is not float16");
  kmtest::write_npy(dir.file("short.npy"), "<f2", "(5, 3)", kHalf.data(), kHalf.size() * 2);
  expect_error([&] { km::load<float>(dir.file("short.npy")); }, "truncated: shape 5 x 3 of float16 needs");
  kmtest::write_npy(dir.file("shortb.npy"), "<V2", "(7, 2)", kBfloat.data(), kBfloat.size() * 2);
  expect_error([&] { km::load<double>(dir.file("shortb.npy")); }, "of bfloat16 needs");
  // NaN and infinity reach the loaders' range check, which names them and where.
  const std::uint16_t inf[4] = {0x3c00, 0x7c00, 0, 0};
  kmtest::write_npy(dir.file("inf.npy"), "<f2", "(2, 2)", inf, sizeof inf);
  expect_error([&] { km::load<float>(dir.file("inf.npy")); }, "value Inf at object 0, coordinate 1");
  const std::uint16_t nan[4] = {0, 0, 0, 0x7fc1};
  kmtest::write_npy(dir.file("nan.npy"), "bfloat16", "(2, 2)", nan, sizeof nan);
  expect_error([&] { km::load<double>(dir.file("nan.npy")); }, "value NaN at object 1, coordinate 1");
}

// A 16-bit float type as h5py makes one: float32's type narrowed to these fields and bias.
hid_t float_type16(std::size_t exponent_at, std::size_t exponent_bits, std::size_t mantissa_bits, std::size_t bias,
                   bool big_endian = false) {
  const hid_t t = H5Tcopy(big_endian ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, exponent_at, exponent_bits, 0, mantissa_bits);
  H5Tset_precision(t, 16);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, bias);
  return t;
}

// One dataset "x" of the 16-bit type (its raw bits from `bits`, in the file's byte order),
// chunked when chunk_rows > 0, and compressed when that is odd.
void write_h5_16bit(const std::string& path, hid_t type, hsize_t n, hsize_t d, const std::uint16_t* bits,
                    hsize_t chunk_rows = 0) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {n, d};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunk_rows) {
    const hsize_t chunk[2] = {chunk_rows, d};
    H5Pset_chunk(dcpl, 2, chunk);
    if (chunk_rows % 2) H5Pset_deflate(dcpl, 1);  // odd chunks compressed, even ones not
  }
  const hid_t ds = H5Dcreate2(file, "x", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  const hid_t memory = H5Tcopy(type);  // the same type, little-endian: the bits go in unconverted
  if (H5Tget_class(type) == H5T_FLOAT) H5Tset_order(memory, H5T_ORDER_LE);
  EXPECT_GE(H5Dwrite(ds, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits), 0);
  H5Tclose(memory);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(file);
}

TEST(Half, Hdf5HalfAndBfloat16BothByteOrders) {
  TempDir dir;
  for (const bool big : {false, true}) {
    SCOPED_TRACE(big ? "big-endian" : "little-endian");
    const hid_t half = float_type16(10, 5, 10, 15, big), bfloat = float_type16(7, 8, 7, 127, big);
    write_h5_16bit(dir.file("h.h5"), half, 4, 3, kHalf.data());
    write_h5_16bit(dir.file("b.h5"), bfloat, 6, 2, kBfloat.data());
    H5Tclose(half);
    H5Tclose(bfloat);
    expect_converted(km::load<float>(dir.file("h.h5")), kHalf, km::Element::float16, 3);
    expect_converted(km::load<double>(dir.file("h.h5")), kHalf, km::Element::float16, 3);
    expect_converted(km::load<float>(dir.file("b.h5")), kBfloat, km::Element::bfloat16, 2);
    expect_converted(km::load<double>(dir.file("b.h5")), kBfloat, km::Element::bfloat16, 2);
    EXPECT_EQ(km::input_element(dir.file("h.h5")), km::Element::float16);
    EXPECT_EQ(km::input_element(dir.file("b.h5"), "/x"), km::Element::bfloat16);
  }
}

// Strips end on whole chunks: 9 rows of 2^20 values read as strips of 4 rows (the reader's
// 8 MiB), or of 5 when a chunk holds 5 rows (compressed); every value arrives.
TEST(Half, Hdf5StripsAndChunks) {
  TempDir dir;
  const hsize_t n = 9, d = hsize_t{1} << 20;
  std::vector<std::uint16_t> bits(n * d);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>((i * 40503u) % 0x7c00u);
  const hid_t half = float_type16(10, 5, 10, 15);
  for (const hsize_t chunk_rows : {hsize_t{0}, hsize_t{2}, hsize_t{5}}) {
    SCOPED_TRACE(chunk_rows);
    write_h5_16bit(dir.file("big.h5"), half, n, d, bits.data(), chunk_rows);
    const auto data = km::load<float>(dir.file("big.h5"));
    ASSERT_EQ(data.n, n);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < bits.size(); ++i) wrong += data.values[i] != km::float16_to_float(bits[i]);
    EXPECT_EQ(wrong, 0u);
  }
  H5Tclose(half);
}

// An MPI rank's rows of a 16-bit .npy (by byte offset) and HDF5 dataset (a hyperslab).
TEST(Half, RankSharesMakeTheWholeFile) {
  TempDir dir;
  const std::size_t n = 40000, d = 3;
  std::vector<std::uint16_t> bits(n * d);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>((i * 31) % 0x7c00);
  kmtest::write_npy(dir.file("a.npy"), "<f2", "(40000, 3)", bits.data(), bits.size() * 2);
  const hid_t half = float_type16(10, 5, 10, 15);
  write_h5_16bit(dir.file("a.h5"), half, n, d, bits.data(), 1000);
  H5Tclose(half);
  for (const char* name : {"a.npy", "a.h5"}) {
    SCOPED_TRACE(name);
    std::vector<float> joined;
    for (int r = 0; r < 3; ++r) {
      km::LoadOptions o;
      o.rank = r;
      o.ranks = 3;
      const auto part = km::load<float>(dir.file(name), o);
      joined.insert(joined.end(), part.values.data(), part.values.data() + part.n * d);
    }
    ASSERT_EQ(joined.size(), bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) ASSERT_EQ(joined[i], km::float16_to_float(bits[i])) << i;
  }
}

TEST(Half, BadHdf5Types) {
  TempDir dir;
  const std::uint16_t v[4] = {0x3c00, 0x7c00, 0, 0};
  const hid_t odd = float_type16(9, 6, 9, 31);  // 6 exponent bits: neither format
  write_h5_16bit(dir.file("odd.h5"), odd, 2, 2, v);
  H5Tclose(odd);
  expect_error([&] { km::load<float>(dir.file("odd.h5")); }, "neither IEEE half");
  const hid_t opaque = H5Tcreate(H5T_OPAQUE, 2);  // what h5py makes of an ml_dtypes bfloat16 array
  write_h5_16bit(dir.file("opaque.h5"), opaque, 2, 2, v);
  H5Tclose(opaque);
  expect_error([&] { km::load<float>(dir.file("opaque.h5")); }, "opaque 2-byte type");
  const hid_t half = float_type16(10, 5, 10, 15);
  write_h5_16bit(dir.file("inf.h5"), half, 2, 2, v);
  H5Tclose(half);
  expect_error([&] { km::load<double>(dir.file("inf.h5")); }, "value Inf at object 0, coordinate 1");
}

TEST(Half, InputElementOfEveryFormat) {
  TempDir dir;
  kmtest::write_text(dir.file("a.csv"), "1,2\n");
  kmtest::write_text(dir.file("a.txt"), "1 2\n");
  kmtest::write_bin(dir.file("a.bin"), 1, 2, {1, 2});
  const double v[2] = {1, 2};
  kmtest::write_npy(dir.file("d.npy"), "<f8", "(1, 2)", v, sizeof v);
  kmtest::write_h5(dir.file("d.h5"), "x", {1, 2}, H5T_NATIVE_DOUBLE, v);
  EXPECT_EQ(km::input_element(dir.file("a.csv")), km::Element::text);
  EXPECT_EQ(km::input_element(dir.file("a.txt")), km::Element::text);
  EXPECT_EQ(km::input_element(dir.file("a.bin")), km::Element::float32);
  EXPECT_EQ(km::input_element(dir.file("d.npy")), km::Element::float64);
  EXPECT_EQ(km::input_element(dir.file("d.h5")), km::Element::float64);
  EXPECT_EQ(km::load<double>(dir.file("a.csv")).element, "text");
  EXPECT_EQ(km::load<double>(dir.file("d.h5")).element, "float64");
  expect_error([&] { km::input_element(dir.file("missing.npy")); }, "cannot open");
}

}  // namespace
