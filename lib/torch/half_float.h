// float32 / bfloat16 / float16 element conversions, rounding exactly as c10
// does (bfloat16: round to nearest even, NaN to the canonical quiet NaN;
// float16: IEEE round to nearest even via _Float16). The one copy the AdamW
// kernels, their reference, regenerate and the tensor reader all use. Free of
// the object model: the kernels, compiled once per instruction set, must
// share no inline symbol with the rest (tests/build/check_kernel_variants.sh).
// Internal to lib/.
#ifndef OPTSTATE_HALF_FLOAT_H_
#define OPTSTATE_HALF_FLOAT_H_

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

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

}  // namespace optstate

#endif  // OPTSTATE_HALF_FLOAT_H_
