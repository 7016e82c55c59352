#include "optstate/torch_objects.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>

#include "torch/half_float.h"

namespace optstate {
namespace {

TEST(DTypeTest, StorageClassesMapToDtypesAndSizes) {
  EXPECT_EQ(DTypeFromStorageClass("FloatStorage"), DType::kFloat32);
  EXPECT_EQ(DTypeFromStorageClass("BFloat16Storage"), DType::kBFloat16);
  EXPECT_EQ(DTypeFromStorageClass("HalfStorage"), DType::kFloat16);
  EXPECT_EQ(DTypeFromStorageClass("LongStorage"), DType::kInt64);
  EXPECT_EQ(DTypeFromStorageClass("BoolStorage"), DType::kBool);
  EXPECT_EQ(DTypeFromStorageClass("UntypedStorage"), std::nullopt);
  EXPECT_EQ(GetDTypeInfo(DType::kBFloat16).element_size, 2);
  EXPECT_EQ(GetDTypeInfo(DType::kComplex128).element_size, 16);
  EXPECT_EQ(GetDTypeInfo(DType::kInt64).name, "int64");
}

TEST(DTypeTest, NamesAndAliases) {
  EXPECT_EQ(DTypeFromName("float32"), DType::kFloat32);
  EXPECT_EQ(DTypeFromName("float"), DType::kFloat32);
  EXPECT_EQ(DTypeFromName("half"), DType::kFloat16);
  EXPECT_EQ(DTypeFromName("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(DTypeFromName("long"), DType::kInt64);
  EXPECT_EQ(DTypeFromName("complex32"), std::nullopt);
  EXPECT_EQ(DTypeFromName(""), std::nullopt);
}

TEST(DTypeTest, EveryDtypeRoundTripsThroughItsNames) {
  for (int i = 0; i <= static_cast<int>(DType::kLast); ++i) {
    const DTypeInfo& info = GetDTypeInfo(static_cast<DType>(i));
    EXPECT_EQ(static_cast<int>(info.dtype), i);
    EXPECT_EQ(DTypeFromName(info.name), info.dtype);
    if (!info.storage_class.empty()) {
      EXPECT_EQ(DTypeFromStorageClass(info.storage_class), info.dtype);
    }
  }
  EXPECT_EQ(DTypeFromStorageClass(""), std::nullopt);
  EXPECT_EQ(DTypeFromName("float8_e4m3fn"), DType::kFloat8E4M3FN);
  EXPECT_EQ(GetDTypeInfo(DType::kUInt16).element_size, 2);
}

}  // namespace
}  // namespace optstate

namespace optstate {
namespace {

// The integer float16 conversions (used where the compiler has no _Float16)
// against _Float16: every half, and floats around every rounding case.
TEST(HalfFloatTest, PortableConversionsEqualFloat16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(h)));
    ASSERT_EQ(std::bit_cast<uint32_t>(PortableHalfToFloat(static_cast<uint16_t>(h))), std::bit_cast<uint32_t>(want))
        << std::hex << h;
  }
  std::mt19937 rng(5);
  auto check = [](uint32_t bits) {
    float f = std::bit_cast<float>(bits);
    ASSERT_EQ(PortableFloatToHalf(f), std::bit_cast<uint16_t>(static_cast<_Float16>(f))) << std::hex << bits;
  };
  for (int i = 0; i < 2000000; ++i) check(static_cast<uint32_t>(rng()));
  // Every float32 exponent, with mantissas at and around the half-way points.
  for (uint32_t e = 0; e < 256; ++e) {
    for (uint32_t low : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu, 0x2000u, 0x3000u, 0x7FFFFFu, 0x7FF000u}) {
      check((e << 23) | low);
      check(0x80000000u | (e << 23) | low);
    }
  }
}

}  // namespace
}  // namespace optstate
