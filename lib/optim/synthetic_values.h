// Deterministic synthetic values: regenerate's parameters and gradients, and
// verify's probe gradient. Internal to lib/.
#ifndef OPTSTATE_SYNTHETIC_VALUES_H_
#define OPTSTATE_SYNTHETIC_VALUES_H_

#include <cstddef>
#include <cstdint>

namespace optstate {

inline uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// n values in about [-scale, scale], peaked at 0 (the sum of two uniforms),
// a pure function of (seed, param, step, block): cheap, the same on every
// machine, and independent of how blocks are spread over threads.
inline void FillSynthetic(float* out, int64_t n, uint64_t seed, size_t param, int step, int64_t block, float scale) {
  uint64_t x = SplitMix(seed ^ SplitMix(param * 0x100000001B3ull + static_cast<uint64_t>(step) + 1) ^
                        SplitMix(static_cast<uint64_t>(block) + 0x51ED27u));
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    float a = static_cast<float>(x & 0xFFFFFF) * (1.0f / 16777216.0f);
    float b = static_cast<float>((x >> 24) & 0xFFFFFF) * (1.0f / 16777216.0f);
    out[i] = scale * (a + b - 1.0f);
  }
}

}  // namespace optstate

#endif  // OPTSTATE_SYNTHETIC_VALUES_H_
