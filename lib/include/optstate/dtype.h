// Tensor element types as they appear in checkpoints, without LibTorch.
//
// A checkpoint names a dtype in three ways: a legacy storage class
// (`torch.FloatStorage`, zip and legacy formats alike), a dtype global
// (`torch.float32`, in _rebuild_tensor_v3 and DCP metadata), or a Python name
// ("float32" in our JSON). All three map to one DType.
#ifndef OPTSTATE_DTYPE_H_
#define OPTSTATE_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace optstate {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,
  kComplex64,
  kComplex128,
  kQInt8,
  kQUInt8,
  kQInt32,
  // No legacy storage class: saved as UntypedStorage + _rebuild_tensor_v3 (torch >= 2.2).
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat8E4M3FNUZ,
  kFloat8E5M2FNUZ,
  kUInt16,
  kUInt32,
  kUInt64,
  kLast = kUInt64,
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;           // torch's str(dtype) without "torch.": "float32"
  std::string_view storage_class;  // legacy class in module `torch`: "FloatStorage"; "" if none
  uint8_t element_size;            // bytes
};

const DTypeInfo& GetDTypeInfo(DType dtype);
std::optional<DType> DTypeFromName(std::string_view name);  // "float32", also "float", "half"
std::optional<DType> DTypeFromStorageClass(std::string_view storage_class);  // "FloatStorage"

}  // namespace optstate

#endif  // OPTSTATE_DTYPE_H_
