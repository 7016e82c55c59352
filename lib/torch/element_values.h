// Element i of a tensor's floating array, read or written by dtype: the
// dispatch over half_float.h's conversions that the tensor reader, the value
// scan, regenerate and the scalar references share. Internal to lib/.
#ifndef OPTSTATE_TORCH_ELEMENT_VALUES_H_
#define OPTSTATE_TORCH_ELEMENT_VALUES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "optstate/torch_objects.h"
#include "torch/half_float.h"

namespace optstate {

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

#endif  // OPTSTATE_TORCH_ELEMENT_VALUES_H_
