#include "optstate/dtype.h"

#include <gtest/gtest.h>

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
