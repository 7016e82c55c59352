#include "libtorch/dtype_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace optstate {
namespace {

std::vector<std::byte> Bits16(std::initializer_list<uint16_t> values) {
  std::vector<std::byte> out(values.size() * 2);
  size_t i = 0;
  for (uint16_t v : values) {
    std::memcpy(out.data() + 2 * i++, &v, 2);
  }
  return out;
}

TEST(DtypeConvertTest, BFloat16Specials) {
  // 1.0, -2.0, +inf, NaN, smallest subnormal (2^-133), 3.140625
  auto src = Bits16({0x3F80, 0xC000, 0x7F80, 0x7FC0, 0x0001, 0x4049});
  std::vector<float> dst(6);
  ASSERT_TRUE(ConvertToFloat32(src, DType::kBFloat16, dst).ok());
  EXPECT_EQ(dst[0], 1.0f);
  EXPECT_EQ(dst[1], -2.0f);
  EXPECT_EQ(dst[2], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(dst[3]));
  EXPECT_EQ(dst[4], std::ldexp(1.0f, -133));
  EXPECT_EQ(dst[5], 3.140625f);
}

TEST(DtypeConvertTest, Float16Specials) {
  // 1.0, -0.0, 65504 (max), -inf, smallest subnormal 2^-24
  auto src = Bits16({0x3C00, 0x8000, 0x7BFF, 0xFC00, 0x0001});
  std::vector<float> dst(5);
  ASSERT_TRUE(ConvertToFloat32(src, DType::kFloat16, dst).ok());
  EXPECT_EQ(dst[0], 1.0f);
  EXPECT_TRUE(std::signbit(dst[1]) && dst[1] == 0.0f);
  EXPECT_EQ(dst[2], 65504.0f);
  EXPECT_EQ(dst[3], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(dst[4], std::ldexp(1.0f, -24));
}

TEST(DtypeConvertTest, RoundsToNearestEvenLikeTorch) {
  // 1 + 2^-8 lies halfway between bf16 1.0 (0x3F80) and 1.0078125 (0x3F81): even wins.
  // 1 + 3*2^-8 lies halfway between 0x3F81 and 0x3F82: even (0x3F82) wins.
  std::vector<float> src = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), 70000.0f};
  std::vector<std::byte> bf(6), half(6);
  ASSERT_TRUE(ConvertFromFloat32(src, DType::kBFloat16, bf).ok());
  EXPECT_EQ(bf, Bits16({0x3F80, 0x3F82, 0x4789}));
  ASSERT_TRUE(ConvertFromFloat32(src, DType::kFloat16, half).ok());
  // Half has 10 mantissa bits, so both are exact there; 70000 overflows to +inf.
  // All six values are what torch 1.13's .to(bfloat16/float16) gives.
  EXPECT_EQ(half, Bits16({0x3C04, 0x3C0C, 0x7C00}));
}

TEST(DtypeConvertTest, IntegersAndBool) {
  int64_t ints[] = {-3, 1LL << 40};
  std::vector<float> dst(2);
  ASSERT_TRUE(ConvertToFloat32({reinterpret_cast<const std::byte*>(ints), 16}, DType::kInt64, dst).ok());
  EXPECT_EQ(dst[0], -3.0f);
  EXPECT_EQ(dst[1], 1099511627776.0f);
}

TEST(DtypeConvertTest, SizeMismatchAndUnsupported) {
  auto src = Bits16({0x3F80, 0x3F80});
  std::vector<float> dst(3);
  Status s = ConvertToFloat32(src, DType::kBFloat16, dst);
  EXPECT_EQ(s.ToString(), "invalid argument: convert bfloat16 to float32: 4 source bytes for 3 elements");
  std::vector<float> one(1);
  std::vector<std::byte> c64(8);
  EXPECT_EQ(ConvertToFloat32(c64, DType::kComplex64, one).code(), StatusCode::kUnsupported);
  std::vector<std::byte> out(4);
  EXPECT_EQ(ConvertFromFloat32(one, DType::kInt32, out).code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace optstate
