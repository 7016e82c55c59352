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

// Element i of a float32, bfloat16 or float16 array (any other dtype reads as float32).
inline float LoadAsFloat(const void* base, DType dtype, size_t i) {
  const auto* bytes = static_cast<const std::byte*>(base);
  if (dtype == DType::kBFloat16) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    return Bf16ToFloat(h);
  }
  if (dtype == DType::kFloat16) {
    _Float16 h;
    std::memcpy(&h, bytes + 2 * i, 2);
    return static_cast<float>(h);
  }
  float f;
  std::memcpy(&f, bytes + 4 * i, 4);
  return f;
}

inline void StoreFromFloat(void* base, DType dtype, size_t i, float value) {
  auto* bytes = static_cast<std::byte*>(base);
  if (dtype == DType::kBFloat16) {
    uint16_t h = FloatToBf16(value);
    std::memcpy(bytes + 2 * i, &h, 2);
  } else if (dtype == DType::kFloat16) {
    auto h = static_cast<_Float16>(value);
    std::memcpy(bytes + 2 * i, &h, 2);
  } else {
    std::memcpy(bytes + 4 * i, &value, 4);
  }
}

}  // namespace optstate

#endif  // OPTSTATE_HALF_FLOAT_H_
