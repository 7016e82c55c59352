#include "libtorch/dtype_convert.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace optstate {
namespace {

template <typename T>
T LoadUnaligned(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // tensor data in a zip is 64-byte aligned, views need not be
  return v;
}

template <typename T>
void Widen(ByteSpan src, std::span<float> dst) {
  for (size_t i = 0; i < dst.size(); ++i) {
    dst[i] = static_cast<float>(LoadUnaligned<T>(src.data() + i * sizeof(T)));
  }
}

}  // namespace

Status ConvertToFloat32(ByteSpan src, DType src_dtype, std::span<float> dst) {
  const DTypeInfo& info = GetDTypeInfo(src_dtype);
  if (src.size() % info.element_size != 0 || dst.size() != src.size() / info.element_size) {
    return InvalidArgumentError("convert " + std::string(info.name) + " to float32: " +
                                std::to_string(src.size()) + " source bytes for " +
                                std::to_string(dst.size()) + " elements");
  }
  switch (src_dtype) {
    case DType::kFloat32: Widen<float>(src, dst); return Status();
    case DType::kFloat64: Widen<double>(src, dst); return Status();
    case DType::kFloat16: Widen<c10::Half>(src, dst); return Status();
    case DType::kBFloat16: Widen<c10::BFloat16>(src, dst); return Status();
    case DType::kInt64: Widen<int64_t>(src, dst); return Status();
    case DType::kInt32: Widen<int32_t>(src, dst); return Status();
    case DType::kInt16: Widen<int16_t>(src, dst); return Status();
    case DType::kInt8: Widen<int8_t>(src, dst); return Status();
    case DType::kUInt8: Widen<uint8_t>(src, dst); return Status();
    case DType::kBool: Widen<uint8_t>(src, dst); return Status();
    default:
      return UnsupportedError("convert " + std::string(info.name) + " to float32");
  }
}

Status ConvertFromFloat32(std::span<const float> src, DType dst_dtype, std::span<std::byte> dst) {
  if (dst_dtype != DType::kFloat16 && dst_dtype != DType::kBFloat16) {
    return UnsupportedError("convert float32 to " + std::string(GetDTypeInfo(dst_dtype).name));
  }
  if (dst.size() != src.size() * 2) {
    return InvalidArgumentError("convert float32 to " +
                                std::string(GetDTypeInfo(dst_dtype).name) + ": " +
                                std::to_string(dst.size()) + " destination bytes for " +
                                std::to_string(src.size()) + " elements");
  }
  for (size_t i = 0; i < src.size(); ++i) {
    uint16_t bits = dst_dtype == DType::kFloat16 ? c10::Half(src[i]).x : c10::BFloat16(src[i]).x;
    std::memcpy(dst.data() + 2 * i, &bits, 2);
  }
  return Status();
}

}  // namespace optstate
