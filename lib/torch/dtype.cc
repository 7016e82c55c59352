#include "optstate/torch_objects.h"

#include <array>

namespace optstate {
namespace {

// Order matches the enum. Storage class names: torch/storage.py
// _dtype_to_storage_type_map, identical in torch 1.13 and 2.6.
constexpr std::array<DTypeInfo, 22> kInfos = {{
    {DType::kFloat32, "float32", "FloatStorage", 4},
    {DType::kFloat64, "float64", "DoubleStorage", 8},
    {DType::kFloat16, "float16", "HalfStorage", 2},
    {DType::kBFloat16, "bfloat16", "BFloat16Storage", 2},
    {DType::kInt64, "int64", "LongStorage", 8},
    {DType::kInt32, "int32", "IntStorage", 4},
    {DType::kInt16, "int16", "ShortStorage", 2},
    {DType::kInt8, "int8", "CharStorage", 1},
    {DType::kUInt8, "uint8", "ByteStorage", 1},
    {DType::kBool, "bool", "BoolStorage", 1},
    {DType::kComplex64, "complex64", "ComplexFloatStorage", 8},
    {DType::kComplex128, "complex128", "ComplexDoubleStorage", 16},
    {DType::kQInt8, "qint8", "QInt8Storage", 1},
    {DType::kQUInt8, "quint8", "QUInt8Storage", 1},
    {DType::kQInt32, "qint32", "QInt32Storage", 4},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", "", 1},
    {DType::kFloat8E5M2, "float8_e5m2", "", 1},
    {DType::kFloat8E4M3FNUZ, "float8_e4m3fnuz", "", 1},
    {DType::kFloat8E5M2FNUZ, "float8_e5m2fnuz", "", 1},
    {DType::kUInt16, "uint16", "", 2},
    {DType::kUInt32, "uint32", "", 4},
    {DType::kUInt64, "uint64", "", 8},
}};
static_assert(kInfos.size() == static_cast<size_t>(DType::kLast) + 1);

// Aliases torch accepts for the same dtype objects (torch.float is torch.float32).
struct Alias {
  std::string_view name;
  DType dtype;
};
constexpr std::array<Alias, 8> kAliases = {{
    {"float", DType::kFloat32},
    {"double", DType::kFloat64},
    {"half", DType::kFloat16},
    {"long", DType::kInt64},
    {"int", DType::kInt32},
    {"short", DType::kInt16},
    {"cfloat", DType::kComplex64},
    {"cdouble", DType::kComplex128},
}};

}  // namespace

const DTypeInfo& GetDTypeInfo(DType dtype) { return kInfos[static_cast<size_t>(dtype)]; }

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kInfos) {
    if (info.name == name) return info.dtype;
  }
  for (const Alias& alias : kAliases) {
    if (alias.name == name) return alias.dtype;
  }
  return std::nullopt;
}

std::optional<DType> DTypeFromStorageClass(std::string_view storage_class) {
  for (const DTypeInfo& info : kInfos) {
    if (!info.storage_class.empty() && info.storage_class == storage_class) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace optstate
