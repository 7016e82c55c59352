// CRC-32 by folding: the message is a polynomial over GF(2), and a 128-bit
// block B followed by D more bits has the same CRC as (B * x^D mod P) placed
// D bits later, so four 128-bit accumulators absorb 64 bytes per step with
// carry-less multiplies, and only the last 16 bytes go through the table.
// (The method is Intel's "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ"; the constants below are computed, not copied.)
#include <immintrin.h>

#include <cstring>

#include "io/crc32_kernels.h"

namespace optstate::internal {
namespace {

// x^n mod P for the CRC-32 polynomial in normal bit order (x^32 + x^26 + ...).
constexpr uint64_t XPowModP(int n) {
  uint64_t r = 1;
  for (int i = 0; i < n; ++i) {
    r <<= 1;
    if (r >> 32) r ^= 0x104C11DB7u;
  }
  return r;
}

constexpr uint64_t Reflect32(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1) << (31 - i);
  return r;
}

// In the reflected domain a 64-bit half multiplied by a 32-bit constant lands
// one bit off, hence the shift; the low half of a block is D + 32 bits from
// its destination, the high half D - 32 (D = fold distance in bits).
constexpr uint64_t FoldConstant(int bits) { return Reflect32(XPowModP(bits)) << 1; }

static_assert(FoldConstant(544) == 0x154442bd4u);  // published values of the same constants
static_assert(FoldConstant(96) == 0x0ccaa009eu);

__attribute__((target("pclmul,sse4.1"))) inline __m128i Fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("pclmul,sse4.1"))) inline __m128i Load(const std::byte* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}


__attribute__((target("vpclmulqdq,avx2,pclmul,sse4.1"))) inline __m256i Fold256(__m256i x, __m256i k) {
  return _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11));
}

__attribute__((target("vpclmulqdq,avx2,pclmul,sse4.1"))) inline __m256i Load256(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Both loops end here: their 128-bit lanes (in message order) fold into one,
// remaining 16-byte blocks fold in, and the table finishes the last 16 bytes
// (which stand for the running CRC from a zero register) and the tail.
__attribute__((target("pclmul,sse4.1"))) uint32_t FoldLanesAndFinish(const __m128i* lanes, int count,
                                                                      const std::byte* p, size_t n) {
  const __m128i by128 = _mm_set_epi64x(static_cast<int64_t>(FoldConstant(128 - 32)),
                                       static_cast<int64_t>(FoldConstant(128 + 32)));
  __m128i x = lanes[0];
  for (int i = 1; i < count; ++i) x = _mm_xor_si128(Fold(x, by128), lanes[i]);
  while (n >= 16) {
    x = _mm_xor_si128(Fold(x, by128), Load(p));
    p += 16;
    n -= 16;
  }
  std::byte last[16];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(last), x);
  return Crc32UpdateTable(Crc32UpdateTable(0, last, 16), p, n);
}

}  // namespace

bool Crc32WideClmulSupported() {
  static const bool supported = __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx2") &&
                                Crc32ClmulSupported();
  return supported;
}

// The same folding with 256-bit multiplies: eight 128-bit lanes in four
// registers absorb 128 bytes a step, then fold into one lane.
__attribute__((target("vpclmulqdq,avx2,pclmul,sse4.1"))) uint32_t Crc32UpdateWideClmul(uint32_t reg,
                                                                                      const std::byte* p,
                                                                                      size_t n) {
  const __m256i by1024 = _mm256_set_epi64x(
      static_cast<int64_t>(FoldConstant(1024 - 32)), static_cast<int64_t>(FoldConstant(1024 + 32)),
      static_cast<int64_t>(FoldConstant(1024 - 32)), static_cast<int64_t>(FoldConstant(1024 + 32)));
  __m256i y[4];
  // Unrolled (here and below) so that each lane stays in a register.
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) y[i] = Load256(p + 32 * i);
  y[0] = _mm256_xor_si256(y[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(reg))));
  for (p += 128, n -= 128; n >= 128; p += 128, n -= 128) {
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) y[i] = _mm256_xor_si256(Fold256(y[i], by1024), Load256(p + 32 * i));
  }
  // Lanes in message order: y[0] low, y[0] high, y[1] low, ...
  __m128i lanes[8];
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    lanes[2 * i] = _mm256_castsi256_si128(y[i]);
    lanes[2 * i + 1] = _mm256_extracti128_si256(y[i], 1);
  }
  return FoldLanesAndFinish(lanes, 8, p, n);
}

bool Crc32ClmulSupported() {
  static const bool supported = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return supported;
}

__attribute__((target("pclmul,sse4.1"))) uint32_t Crc32UpdateClmul(uint32_t reg, const std::byte* p, size_t n) {
  const __m128i by512 = _mm_set_epi64x(static_cast<int64_t>(FoldConstant(512 - 32)),
                                       static_cast<int64_t>(FoldConstant(512 + 32)));
  __m128i x[4];
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) x[i] = Load(p + 16 * i);
  // The register enters as the first four bytes' xor (CRC linearity).
  x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128(static_cast<int>(reg)));
  for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) x[i] = _mm_xor_si128(Fold(x[i], by512), Load(p + 16 * i));
  }
  return FoldLanesAndFinish(x, 4, p, n);
}

}  // namespace optstate::internal
