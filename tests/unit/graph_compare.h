// Compares an object graph with a description written by testdata/gen/describe.py
// (what Python saw), reporting the first difference with its path.
#ifndef OPTSTATE_TESTS_UNIT_GRAPH_COMPARE_H_
#define OPTSTATE_TESTS_UNIT_GRAPH_COMPARE_H_

#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/crc32.h"
#include "optstate/checkpoint.h"
#include "pickle/graph_walk.h"

namespace optstate::testing {

using nlohmann::json;

class GraphComparer {
 public:
  // `file` may be null for a plain pickle (then `graph` has no tensors).
  GraphComparer(const ObjectGraph& graph, const CheckpointFile* file) : g_(graph), file_(file) {}

  // The description's storages, when given before Compare: a storage of no
  // bytes has no identity torch shows (data_ptr 0; torch.load may give each
  // tensor of a shared empty storage its own, as FSDP1's empty local shards
  // load), so sharing is compared among storages that hold bytes only.
  void SetExpectedStorages(const json& storages) {
    int64_t n = 0;
    for (const json& st : storages) want_index_.push_back(st["nbytes"].get<uint64_t>() == 0 ? -1 : n++);
  }

  // "" when equal, else the path and what differs.
  std::string Compare(NodeId id, const json& want, const std::string& path) {
    const Node& n = g_.at(id);
    std::string type = want["type"].get<std::string>();
    auto fail = [&](const std::string& what) { return path + ": " + what; };
    if (type == "none") return n.kind == NodeKind::kNone ? "" : fail("expected None, got " + TypeName(g_, id));
    if (type == "bool") {
      if (n.kind != NodeKind::kBool || n.bool_value != want["value"].get<bool>()) return fail("bool differs");
      return "";
    }
    if (type == "int") {
      if (want["value"].is_string()) {
        return n.kind == NodeKind::kBigInt && n.text == want["value"].get<std::string>() ? "" : fail("big int differs");
      }
      if (n.kind != NodeKind::kInt || n.int_value != want["value"].get<int64_t>()) {
        return fail("expected int " + want["value"].dump() + ", got " + TypeName(g_, id) + " " +
                    std::to_string(n.int_value));
      }
      return "";
    }
    if (type == "float") {
      if (n.kind != NodeKind::kFloat) return fail("expected float, got " + TypeName(g_, id));
      return FloatEquals(n.float_value, want["value"]) ? "" : fail("float differs: " + want["value"].dump());
    }
    if (type == "str") {
      return n.kind == NodeKind::kStr && n.text == want["value"].get<std::string>()
                 ? "" : fail("expected str " + want["value"].dump() + ", got " + TypeName(g_, id) + " '" + n.text + "'");
    }
    if (type == "bytes") {
      if (n.kind != NodeKind::kBytes || n.text.size() != want["len"].get<size_t>() ||
          Crc32(AsBytes(n.text)) != want["crc32"].get<uint32_t>()) {
        return fail("bytes differ");
      }
      return "";
    }
    if (type == "tuple" || type == "list" || type == "torch.Size" || type == "set" || type == "frozenset") {
      NodeKind kind = type == "list" ? NodeKind::kList : type == "set" ? NodeKind::kSet
                    : type == "frozenset" ? NodeKind::kFrozenSet : NodeKind::kTuple;
      if (n.kind != kind || (type == "torch.Size") != (n.class_name() == "torch.Size")) {
        return fail("expected " + type + ", got " + TypeName(g_, id));
      }
      const json& items = want["items"];
      if (items.size() != n.items.size()) return fail("length " + std::to_string(n.items.size()) + " != " + std::to_string(items.size()));
      for (size_t i = 0; i < items.size(); ++i) {
        std::string d = Compare(n.items[i], items[i], path + "[" + std::to_string(i) + "]");
        if (!d.empty()) return d;
      }
      return "";
    }
    if (type == "dict") {
      std::string cls = n.class_name().empty() ? "dict" : n.class_name();
      if (n.kind != NodeKind::kDict || cls != want["class"].get<std::string>()) {
        return fail("expected " + want["class"].get<std::string>() + ", got " + TypeName(g_, id));
      }
      const json& items = want["items"];
      if (items.size() != n.entries.size()) return fail(std::to_string(n.entries.size()) + " entries != " + std::to_string(items.size()));
      for (size_t i = 0; i < items.size(); ++i) {
        std::string d = Compare(n.entries[i].first, items[i]["key"], path + "{key " + std::to_string(i) + "}");
        if (!d.empty()) return d;
        d = Compare(n.entries[i].second, items[i]["value"], path + "[" + std::to_string(i) + "]");
        if (!d.empty()) return d;
      }
      return "";
    }
    if (type == "tensor") return CompareTensor(id, want, path);
    if (type == "dtensor") {
      if (n.kind != NodeKind::kTensor) return fail("expected DTensor, got " + TypeName(g_, id));
      const TensorRef& t = file_->checkpoint().tensors[n.tensor];
      if (!t.is_dtensor) return fail("not recognised as a DTensor");
      if (t.global_sizes() != want["shape"].get<std::vector<int64_t>>()) return fail("DTensor global shape differs");
      if (t.placements() != want["placements"].get<std::vector<std::string>>()) return fail("placements differ");
      if (t.mesh_shape() != want["mesh_shape"].get<std::vector<int64_t>>()) return fail("mesh shape differs");
      return CompareTensor(id, want["local"], path + ".local");
    }
    if (type == "sharded_tensor") {  // FSDP1: one local shard, or none on a rank past the rows
      if (n.kind != NodeKind::kTensor) return fail("expected ShardedTensor, got " + TypeName(g_, id));
      const TensorRef& t = file_->checkpoint().tensors[n.tensor];
      if (!t.explicit_block()) return fail("not recognised as a ShardedTensor");
      if (t.global_sizes() != want["shape"].get<std::vector<int64_t>>()) return fail("global shape differs");
      std::vector<int64_t> world = {want["world_size"].get<int64_t>()}, rank = {want["rank"].get<int64_t>()};
      if (t.mesh_shape() != world || t.mesh_coordinate() != rank) return fail("world size or rank differs");
      const json& shards = want["local_shards"];
      if (shards.empty()) return t.holds_no_block() ? "" : fail("holds a block, torch found no local shard");
      if (shards.size() != 1 || t.holds_no_block()) return fail("local shards differ in number");
      if (t.block_offsets() != shards[0]["offsets"].get<std::vector<int64_t>>()) return fail("block offsets differ");
      return CompareTensor(id, shards[0]["local"], path + ".local");
    }
    if (type == "object") {
      std::string have = TypeName(g_, id);
      // A bound method (or a function nested in a class) is pickled as the
      // call getattr(instance or class, name) that makes it.
      if ((want["class"] == "builtins.method" || want["class"] == "builtins.function") &&
          (have == "builtins.getattr" || have == "__builtin__.getattr")) {
        return "";
      }
      return have == want["class"].get<std::string>() ? "" : fail("expected object " + want["class"].dump() + ", got " + have);
    }
    return fail("unhandled expected type " + type);
  }

  std::string CompareStorages(const json& want_all) {
    const Checkpoint& cp = file_->checkpoint();
    json want = json::array();
    for (size_t i = 0; i < want_all.size(); ++i) {
      if (want_index_.empty() || want_index_[i] >= 0) want.push_back(want_all[i]);
    }
    if (want.size() != order_.size()) {
      return "storages: " + std::to_string(order_.size()) + " seen, expected " + std::to_string(want.size());
    }
    for (size_t i = 0; i < order_.size(); ++i) {
      const StorageRef& s = cp.storages[order_[i]];
      const json& w = want[i];
      if (s.nbytes != w["nbytes"].get<uint64_t>()) return "storage " + std::to_string(i) + ": nbytes differ";
      if (GetDTypeInfo(s.dtype).name != w["dtype"].get<std::string>()) return "storage " + std::to_string(i) + ": dtype differs";
      StatusOr<ByteSpan> data = StorageBytes(file_->bytes(), cp, s);
      if (!data.ok()) return "storage " + std::to_string(i) + ": " + data.status().ToString();
      uint32_t crc = Crc32(*data);
      if (crc != w["crc32"].get<uint32_t>()) return "storage " + std::to_string(i) + ": CRC differs";
    }
    return "";
  }

 private:
  static bool FloatEquals(double have, const json& want) {
    if (want.is_string()) {
      std::string s = want.get<std::string>();
      if (s == "nan") return std::isnan(have);
      return have == (s == "inf" ? INFINITY : -INFINITY);
    }
    return have == want.get<double>();
  }

  std::string CompareTensor(NodeId id, const json& want, const std::string& path) {
    const Node& n = g_.at(id);
    if (file_ == nullptr) return path + ": tensor in a plain pickle";
    const Checkpoint& cp = file_->checkpoint();
    if (n.kind != NodeKind::kTensor) return path + ": expected tensor, got " + TypeName(g_, id);
    const TensorRef& t = cp.tensors[n.tensor];
    auto fail = [&](const std::string& what) { return path + ": tensor " + what; };
    bool param = want["class"].get<std::string>() == "torch.nn.parameter.Parameter";
    if (t.is_parameter != param) return fail("class differs");
    if (GetDTypeInfo(t.dtype).name != want["dtype"].get<std::string>()) return fail("dtype differs");
    if (t.sizes != want["shape"].get<std::vector<int64_t>>()) return fail("shape differs");
    if (t.strides != want["stride"].get<std::vector<int64_t>>()) return fail("stride differs");
    if (t.storage_offset != want["storage_offset"].get<uint64_t>()) return fail("storage offset differs");
    if (t.requires_grad != want["requires_grad"].get<bool>()) return fail("requires_grad differs");
    if (want["storage"].is_null()) {  // a meta tensor: no data at all
      return t.storage < 0 ? "" : fail("expected a meta tensor");
    }
    if (t.storage < 0) return fail("is a meta tensor, expected data");
    // Storages are numbered by first appearance in this walk, as describe.py does.
    size_t s = static_cast<size_t>(t.storage);
    size_t want_storage = want["storage"].get<size_t>();
    if (!want_index_.empty()) {
      if (want_storage >= want_index_.size()) return fail("names a storage the description lacks");
      if (want_index_[want_storage] < 0) {  // empty: no identity to compare
        if (cp.storages[s].nbytes != 0) return fail("storage should be empty");
        return "";
      }
      want_storage = static_cast<size_t>(want_index_[want_storage]);
    }
    auto [it, added] = number_.emplace(s, order_.size());
    if (added) order_.push_back(s);
    if (it->second != want_storage) return fail("storage sharing differs");
    StatusOr<std::vector<std::byte>> bytes = ReadTensorBytes(file_->bytes(), cp, t);
    if (!bytes.ok()) return fail(bytes.status().ToString());
    if (Crc32(*bytes) != want["crc32"].get<uint32_t>()) return fail("values differ (CRC-32)");
    if (t.dtype == DType::kFloat32 && !want["head"].empty()) {
      float first;
      std::memcpy(&first, bytes->data(), 4);
      if (!FloatEquals(first, want["head"][0])) return fail("first value differs");
    }
    return "";
  }

  const ObjectGraph& g_;
  const CheckpointFile* file_;
  std::unordered_map<size_t, size_t> number_;
  std::vector<int64_t> want_index_;  // description's storage -> index among non-empty ones, -1 if empty
  std::vector<size_t> order_;
};

// Every value of a file as (path, type + shape + bytes or value text), in tree
// order: two files with equal lists hold the same object, key order included.
inline std::vector<std::pair<std::string, std::string>> FlattenValues(const CheckpointFile& f) {
  std::vector<std::pair<std::string, std::string>> out;
  const Checkpoint& cp = f.checkpoint();
  WalkTree(cp.graph, cp.graph.root, 16, [&](const WalkStep& s) {
    const Node& n = cp.graph.at(s.id);
    std::string value = TypeName(cp.graph, s.id);
    if (n.kind == NodeKind::kTensor) {
      auto bytes = ReadTensorBytes(f.bytes(), cp, cp.tensors[n.tensor]);
      value += " " + ShapeText(cp.tensors[n.tensor].sizes) + " ";
      if (bytes.ok()) value.append(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    } else if (n.items.empty() && n.entries.empty()) {
      value += " " + ValueText(cp.graph, s.id);
    }
    out.emplace_back(s.path, value);
    return true;
  });
  return out;
}

}  // namespace optstate::testing

#endif  // OPTSTATE_TESTS_UNIT_GRAPH_COMPARE_H_
