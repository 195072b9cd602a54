// The element types an input file can hold, and the exact conversions of the two 16-bit
// floating-point formats to float. Both are subsets of float: IEEE half (float16: 1 sign,
// 5 exponent and 10 fraction bits, bias 15) and bfloat16 (1, 8 and 7 bits, bias 127, float's
// upper half). Every value, subnormals, signed zeros and infinities included, becomes the float
// of the same value; a NaN stays a NaN (its payload kept), which the loaders' range check then
// refuses like any other.
#pragma once

#include <cstdint>
#include <cstring>

namespace km {

enum class Element { float16, bfloat16, float32, float64, text };

// The NumPy name of each ("float16", "bfloat16", "float32", "float64"), "text" for .csv/.txt.
inline const char* element_name(Element e) {
  switch (e) {
    case Element::float16: return "float16";
    case Element::bfloat16: return "bfloat16";
    case Element::float32: return "float32";
    case Element::float64: return "float64";
    case Element::text: break;
  }
  return "text";
}

inline bool is_16bit(Element e) { return e == Element::float16 || e == Element::bfloat16; }

inline float float_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE half bits to the float of the same value.
inline float float16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t fraction = h & 0x3ffu;
  if (exponent == 0x1f)  // infinity (fraction 0) or NaN: float's all-ones exponent, the fraction on top
    return float_from_bits(sign | 0x7f800000u | (fraction << 13));
  if (exponent != 0)  // normal: rebias 15 -> 127
    return float_from_bits(sign | ((exponent + 112) << 23) | (fraction << 13));
  if (fraction == 0) return float_from_bits(sign);  // +-0
  // Subnormal, fraction * 2^-24: normal in float. Shift the leading 1 up to bit 10 (the implied
  // bit's place), lowering the exponent once per shift from that of 2^-14.
  std::uint32_t float_exponent = 127 - 14;
  while (!(fraction & 0x400u)) {
    fraction <<= 1;
    --float_exponent;
  }
  return float_from_bits(sign | (float_exponent << 23) | ((fraction & 0x3ffu) << 13));
}

// bfloat16 bits to the float of the same value: they are float's upper 16 bits.
inline float bfloat16_to_float(std::uint16_t b) { return float_from_bits(static_cast<std::uint32_t>(b) << 16); }

inline float bits16_to_float(std::uint16_t bits, Element e) {
  return e == Element::float16 ? float16_to_float(bits) : bfloat16_to_float(bits);
}

}  // namespace km
