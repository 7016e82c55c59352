// float32 / bfloat16 / float16 element conversions, rounding exactly as c10
// does (bfloat16: round to nearest even, NaN to the canonical quiet NaN;
// float16: IEEE round to nearest even via _Float16). The one copy the AdamW
// kernels, their reference, regenerate and the tensor reader all use.
// Internal to lib/.
#ifndef OPTSTATE_HALF_FLOAT_H_
#define OPTSTATE_HALF_FLOAT_H_

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "optstate/dtype.h"

namespace optstate {

inline float Bf16ToFloat(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t FloatToBf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return std::isnan(f) ? uint16_t{0x7FC0} : static_cast<uint16_t>(rounded);
}

// float16 in integer arithmetic, round to nearest even: for compilers without
// _Float16 on x86 (clang 14, the libFuzzer build). A unit test holds it equal
// to _Float16 for every half and many floats.
inline float PortableHalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant ? 0x400000u | (mant << 13) : 0));  // NaN quieted
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}
inline uint16_t PortableFloatToHalf(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7FFFFFFFu;
  if (u > 0x7F800000u) return sign | 0x7E00 | static_cast<uint16_t>((u >> 13) & 0x3FFu);  // NaN, payload kept
  if (u >= 0x477FF000u) return sign | 0x7C00;  // infinity, and 65520 and up, which round to it
  if (u < 0x38800000u) {  // below 2^-14: a subnormal half, exactly f * 2^24 rounded
    return sign | static_cast<uint16_t>(std::nearbyint(std::bit_cast<float>(u) * 16777216.0f));
  }
  uint32_t h = (((u >> 23) - 112) << 10) | ((u & 0x7FFFFFu) >> 13), rest = u & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;  // a carry into the exponent is correct
  return sign | static_cast<uint16_t>(h);
}

#if defined(__FLT16_MAX__)
inline float HalfToFloat(uint16_t bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }
inline uint16_t FloatToHalf(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
#else
inline float HalfToFloat(uint16_t bits) { return PortableHalfToFloat(bits); }
inline uint16_t FloatToHalf(float f) { return PortableFloatToHalf(f); }
#endif

// Element i of a float32, bfloat16 or float16 array (any other dtype reads as float32).
inline float LoadAsFloat(const void* base, DType dtype, size_t i) {
  const auto* bytes = static_cast<const std::byte*>(base);
  if (dtype == DType::kBFloat16) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    return Bf16ToFloat(h);
  }
  if (dtype == DType::kFloat16) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    return HalfToFloat(h);
  }
  float f;
  std::memcpy(&f, bytes + 4 * i, 4);
  return f;
}

// Element i of any floating array (float64 included) as double, exactly.
inline double LoadAsDouble(const void* base, DType dtype, size_t i) {
  if (dtype == DType::kFloat64) {
    double d;
    std::memcpy(&d, static_cast<const std::byte*>(base) + 8 * i, 8);
    return d;
  }
  return LoadAsFloat(base, dtype, i);
}

inline void StoreFromFloat(void* base, DType dtype, size_t i, float value) {
  auto* bytes = static_cast<std::byte*>(base);
  if (dtype == DType::kBFloat16) {
    uint16_t h = FloatToBf16(value);
    std::memcpy(bytes + 2 * i, &h, 2);
  } else if (dtype == DType::kFloat16) {
    uint16_t h = FloatToHalf(value);
    std::memcpy(bytes + 2 * i, &h, 2);
  } else {
    std::memcpy(bytes + 4 * i, &value, 4);
  }
}

}  // namespace optstate

#endif  // OPTSTATE_HALF_FLOAT_H_
