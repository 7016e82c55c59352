#include "torch/safetensors_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string_view>

#include "io/byte_cursor.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

struct DTypeName {
  std::string_view name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {
    {"F64", DType::kFloat64},   {"F32", DType::kFloat32},          {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16}, {"I64", DType::kInt64},            {"I32", DType::kInt32},
    {"I16", DType::kInt16},     {"I8", DType::kInt8},              {"U8", DType::kUInt8},
    {"BOOL", DType::kBool},     {"F8_E4M3", DType::kFloat8E4M3FN}, {"F8_E5M2", DType::kFloat8E5M2},
    {"U16", DType::kUInt16},    {"U32", DType::kUInt32},           {"U64", DType::kUInt64},
};

uint64_t HeaderLength(ByteSpan data) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(data[static_cast<size_t>(i)]);
  return n;
}

}  // namespace

bool LooksLikeSafetensors(ByteSpan data) {
  if (data.size() < 10) return false;
  const uint64_t n = HeaderLength(data);
  return n >= 2 && n <= kMaxSafetensorsHeaderBytes && n <= data.size() - 8 && static_cast<char>(data[8]) == '{';
}

Status ParseSafetensorsCheckpoint(const ByteCursor& whole, const ReadOptions& options, Checkpoint& out) {
  ByteSpan data = whole.data();
  if (!LooksLikeSafetensors(data)) return CorruptError("not a safetensors header at offset 0");
  const uint64_t header_bytes = HeaderLength(data);
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_size = data.size() - data_start;
  std::string_view text(reinterpret_cast<const char*>(data.data()) + 8, static_cast<size_t>(header_bytes));
  nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return CorruptError("safetensors header (bytes 8-" + std::to_string(data_start) + ") is not a JSON object");
  }
  out.pickle_record = "safetensors header";
  out.pickle_bytes = header_bytes;
  GraphBuilder b(out);
  NodeId root = b.Dict();
  out.graph.root = root;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;  // free-form strings about the file
    const std::string where = "safetensors tensor '" + name + "'";
    const nlohmann::json& t = it.value();
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets") ||
        !t["dtype"].is_string() || !t["shape"].is_array() || !t["data_offsets"].is_array() ||
        t["data_offsets"].size() != 2) {
      return CorruptError(where + ": its header entry lacks dtype, shape or data_offsets [begin, end]");
    }
    const std::string dtype_name = t["dtype"].get<std::string>();
    auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                              [&](const DTypeName& d) { return d.name == dtype_name; });
    if (known == std::end(kDTypes)) return UnsupportedError(where + ": dtype '" + dtype_name + "' is not read");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const nlohmann::json& d : t["shape"]) {
      if (!d.is_number_unsigned()) return CorruptError(where + ": a dimension is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t{1} << 40) || (v != 0 && numel > (uint64_t{1} << 50) / v)) {
        return CorruptError(where + ": its shape is too large");
      }
      numel *= v;
      shape.push_back(static_cast<int64_t>(v));
    }
    const nlohmann::json& offsets = t["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return CorruptError(where + ": data_offsets are not non-negative integers");
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    const uint64_t nbytes = numel * GetDTypeInfo(known->dtype).element_size;
    if (begin > end || end > data_size) {
      return CorruptError(where + ": bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                          ") of the data lie outside its " + std::to_string(data_size) + " bytes (file offset " +
                          std::to_string(data_start) + ")");
    }
    if (end - begin != nbytes) {
      return CorruptError(where + ": " + std::to_string(end - begin) + " bytes at file offset " +
                          std::to_string(data_start + begin) + " for " + std::to_string(numel) + " " +
                          std::string(GetDTypeInfo(known->dtype).name) + " elements");
    }
    if (nbytes > options.max_storage_bytes) {
      return LimitExceededError(where + ": " + std::to_string(nbytes) + " bytes (limit max_storage_bytes)");
    }
    NodeId tensor = b.Tensor(known->dtype, shape);
    StorageRef& s = out.storages[static_cast<size_t>(out.tensors[out.graph.at(tensor).tensor].storage)];
    s.data_offset = data_start + begin;
    b.Set(root, name, tensor);
  }
  return Status();
}

}  // namespace optstate
