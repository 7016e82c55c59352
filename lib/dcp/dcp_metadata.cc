#include "optstate/dcp_metadata.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "dcp/dcp_layout.h"
#include "dcp/metadata_calls.h"
#include "io/byte_cursor.h"
#include "optstate/pickle_graph.h"
#include "optstate/torch_objects.h"
#include "pickle/pickle_vm.h"

namespace optstate {
namespace {

std::string At(const Node& n) { return "offset " + std::to_string(n.offset) + ": "; }

// An object made by calling the global `class_name` (NEWOBJ or REDUCE).
bool IsCallOf(const ObjectGraph& g, NodeId id, std::string_view class_name) {
  if (id == kNoNode || g.at(id).kind != NodeKind::kObject) return false;
  NodeId c = g.at(id).callable();
  return c != kNoNode && g.at(c).kind == NodeKind::kGlobal && g.at(c).name() == class_name;
}

// A dataclass's field: BUILD's dict state.
NodeId Field(const ObjectGraph& g, NodeId obj, std::string_view field) {
  return DictLookup(g, g.at(obj).state(), field);
}

StatusOr<NodeId> RequiredField(const ObjectGraph& g, NodeId obj, std::string_view field, std::string_view cls) {
  NodeId v = Field(g, obj, field);
  if (v == kNoNode) {
    return CorruptError(At(g.at(obj)) + std::string(cls) + " has no field '" + std::string(field) + "'");
  }
  return v;
}

StatusOr<int64_t> IntOf(const ObjectGraph& g, NodeId id, std::string_view what) {
  if (id == kNoNode || g.at(id).kind != NodeKind::kInt) {
    uint64_t at = id == kNoNode ? 0 : g.at(id).offset;
    return CorruptError("offset " + std::to_string(at) + ": " + std::string(what) + " is not an int");
  }
  return g.at(id).int_value;
}

StatusOr<std::string> StrOf(const ObjectGraph& g, NodeId id, std::string_view what) {
  if (id == kNoNode || g.at(id).kind != NodeKind::kStr) {
    uint64_t at = id == kNoNode ? 0 : g.at(id).offset;
    return CorruptError("offset " + std::to_string(at) + ": " + std::string(what) + " is not a str");
  }
  return g.at(id).text;
}

// torch.Size((a, b)) as pickled (a REDUCE of torch.Size), or a plain tuple/list of ints.
StatusOr<std::vector<int64_t>> SizeOf(const ObjectGraph& g, NodeId id, std::string_view what, uint32_t max_dims) {
  NodeId items = id;
  if (IsCallOf(g, id, "Size")) {
    NodeId args = g.at(id).args();
    if (args == kNoNode || g.at(args).kind != NodeKind::kTuple || g.at(args).items.size() != 1) {
      return CorruptError(At(g.at(id)) + std::string(what) + ": torch.Size called without one argument");
    }
    items = g.at(args).items[0];
  }
  if (items == kNoNode || (g.at(items).kind != NodeKind::kTuple && g.at(items).kind != NodeKind::kList)) {
    return CorruptError(At(g.at(id)) + std::string(what) + " is not a torch.Size");
  }
  if (g.at(items).items.size() > max_dims) {
    return LimitExceededError(At(g.at(id)) + std::string(what) + " has " + std::to_string(g.at(items).items.size()) +
                              " dimensions, more than the limit of " + std::to_string(max_dims));
  }
  std::vector<int64_t> out;
  for (NodeId d : g.at(items).items) {
    OPTSTATE_ASSIGN_OR_RETURN(int64_t v, IntOf(g, d, what));
    if (v < 0) return CorruptError(At(g.at(d)) + std::string(what) + " holds a negative number");
    out.push_back(v);
  }
  return out;
}

// TensorProperties: BUILD state is a tuple (dtype, layout, requires_grad,
// memory_format, pin_memory[, strides]) in torch >= 2.0, a dict in older files.
Status ReadProperties(const ObjectGraph& g, NodeId props, DcpEntry& e) {
  if (!IsCallOf(g, props, "TensorProperties")) {
    return CorruptError(At(g.at(props)) + "'properties' is not a TensorProperties");
  }
  NodeId state = g.at(props).state();
  NodeId dtype = kNoNode, requires_grad = kNoNode;
  if (state != kNoNode && g.at(state).kind == NodeKind::kTuple && g.at(state).items.size() >= 3) {
    dtype = g.at(state).items[0];
    requires_grad = g.at(state).items[2];
  } else if (state != kNoNode && g.at(state).kind == NodeKind::kDict) {
    dtype = DictLookup(g, state, "dtype");
    requires_grad = DictLookup(g, state, "requires_grad");
  }
  if (dtype == kNoNode || g.at(dtype).kind != NodeKind::kGlobal || g.at(dtype).module() != "torch") {
    return CorruptError(At(g.at(props)) + "TensorProperties has no torch dtype");
  }
  std::optional<DType> dt = DTypeFromName(g.at(dtype).name());
  if (!dt) return UnsupportedError(At(g.at(dtype)) + "unknown dtype torch." + std::string(g.at(dtype).name()));
  e.dtype = *dt;
  e.requires_grad = requires_grad != kNoNode && g.at(requires_grad).kind == NodeKind::kBool &&
                    g.at(requires_grad).bool_value;
  return Status();
}

// storage_data, {MetadataIndex(fqn, offset, index): _StorageInfo(relative_path,
// offset, length)}, indexed in place: a sorted array of (hash of fqn and offset,
// the two nodes, dict position), 24 bytes a chunk. A map of copied keys and
// locations held ~220 bytes a chunk (70 MB at 320 k chunks) beside the graph
// they came from, at the parse's peak.
class StorageIndex {
 public:
  StorageIndex(const ObjectGraph& g, uint32_t max_dims) : g_(g), max_dims_(max_dims) {}

  Status Read(NodeId dict) {
    if (dict == kNoNode || g_.at(dict).kind != NodeKind::kDict) {
      return CorruptError("Metadata.storage_data is not a dict (a FileSystemWriter checkpoint has one)");
    }
    const auto& entries = g_.at(dict).entries;
    slots_.reserve(entries.size());
    for (uint32_t i = 0; i < entries.size(); ++i) {
      auto [k, v] = entries[i];
      if (!IsCallOf(g_, k, "MetadataIndex") || !IsCallOf(g_, v, "_StorageInfo")) {
        return CorruptError(At(g_.at(k)) + "storage_data maps something other than MetadataIndex to _StorageInfo");
      }
      OPTSTATE_ASSIGN_OR_RETURN(Key key, KeyOf(k));
      OPTSTATE_RETURN_IF_ERROR(LocationOf(v, key.fqn).status());  // every one checked, used or not
      slots_.push_back({Hash(key.fqn, key.offset ? &*key.offset : nullptr), k, v, i});
    }
    std::stable_sort(slots_.begin(), slots_.end(), [](const Slot& a, const Slot& b) { return a.hash < b.hash; });
    // A key listed twice: the error names its second listing, the first such in
    // the dict. Equal keys hash alike, so only a run of equal hashes (dict order
    // within it, by the stable sort) is looked at, through a set: n log n even
    // for a file that lists one key a million times.
    const Slot* twice = nullptr;
    for (size_t run = 0; run < slots_.size();) {
      size_t end = run + 1;
      while (end < slots_.size() && slots_[end].hash == slots_[run].hash) ++end;
      if (end - run > 1) {
        std::set<std::pair<std::string, std::optional<std::vector<int64_t>>>> seen;
        for (size_t i = run; i < end; ++i) {
          OPTSTATE_ASSIGN_OR_RETURN(Key key, KeyOf(slots_[i].index));
          const bool again = !seen.emplace(std::move(key.fqn), std::move(key.offset)).second;
          if (again && (twice == nullptr || slots_[i].order < twice->order)) twice = &slots_[i];
        }
      }
      run = end;
    }
    if (twice != nullptr) {
      OPTSTATE_ASSIGN_OR_RETURN(Key key, KeyOf(twice->index));
      return CorruptError(At(g_.at(twice->index)) + "storage_data lists '" + key.fqn + "' at the same offset twice");
    }
    return Status();
  }

  // The location stored under (fqn, offset); `offset` nullptr for a bytes item.
  StatusOr<std::optional<DcpLocation>> Find(const std::string& fqn, const std::vector<int64_t>* offset) const {
    const uint64_t h = Hash(fqn, offset);
    auto it = std::lower_bound(slots_.begin(), slots_.end(), h, [](const Slot& s, uint64_t v) { return s.hash < v; });
    for (; it != slots_.end() && it->hash == h; ++it) {
      OPTSTATE_ASSIGN_OR_RETURN(bool same, Matches(it->index, fqn, offset));
      if (!same) continue;
      OPTSTATE_ASSIGN_OR_RETURN(DcpLocation where, LocationOf(it->info, fqn));
      return std::optional<DcpLocation>(std::move(where));
    }
    return std::optional<DcpLocation>();
  }

 private:
  struct Key {
    std::string fqn;
    std::optional<std::vector<int64_t>> offset;
  };
  struct Slot {
    uint64_t hash;
    NodeId index;   // the MetadataIndex
    NodeId info;    // the _StorageInfo
    uint32_t order;  // position in the dict
  };

  static uint64_t Hash(std::string_view fqn, const std::vector<int64_t>* offset) {
    uint64_t h = std::hash<std::string_view>()(fqn);
    auto mix = [&h](uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    mix(offset == nullptr ? 0x6e6f6e65ull : offset->size() + 1);
    if (offset != nullptr) {
      for (int64_t d : *offset) mix(static_cast<uint64_t>(d));
    }
    return h;
  }

  StatusOr<Key> KeyOf(NodeId k) const {
    Key key;
    OPTSTATE_ASSIGN_OR_RETURN(NodeId fqn, RequiredField(g_, k, "fqn", "MetadataIndex"));
    OPTSTATE_ASSIGN_OR_RETURN(key.fqn, StrOf(g_, fqn, "MetadataIndex.fqn"));
    NodeId offset = Field(g_, k, "offset");
    if (offset != kNoNode && g_.at(offset).kind != NodeKind::kNone) {
      OPTSTATE_ASSIGN_OR_RETURN(key.offset, SizeOf(g_, offset, "MetadataIndex.offset", max_dims_));
    }
    return key;
  }

  StatusOr<bool> Matches(NodeId k, std::string_view fqn, const std::vector<int64_t>* offset) const {
    OPTSTATE_ASSIGN_OR_RETURN(Key key, KeyOf(k));
    if (key.fqn != fqn || key.offset.has_value() != (offset != nullptr)) return false;
    return offset == nullptr || *key.offset == *offset;
  }

  StatusOr<DcpLocation> LocationOf(NodeId v, const std::string& fqn) const {
    DcpLocation where;
    OPTSTATE_ASSIGN_OR_RETURN(NodeId rel, RequiredField(g_, v, "relative_path", "_StorageInfo"));
    OPTSTATE_ASSIGN_OR_RETURN(NodeId off, RequiredField(g_, v, "offset", "_StorageInfo"));
    OPTSTATE_ASSIGN_OR_RETURN(NodeId len, RequiredField(g_, v, "length", "_StorageInfo"));
    OPTSTATE_ASSIGN_OR_RETURN(where.relative_path, StrOf(g_, rel, "_StorageInfo.relative_path"));
    OPTSTATE_ASSIGN_OR_RETURN(int64_t o, IntOf(g_, off, "_StorageInfo.offset"));
    OPTSTATE_ASSIGN_OR_RETURN(int64_t l, IntOf(g_, len, "_StorageInfo.length"));
    if (o < 0 || l < 0) return CorruptError(At(g_.at(v)) + "negative offset or length for '" + fqn + "'");
    where.offset = static_cast<uint64_t>(o);
    where.length = static_cast<uint64_t>(l);
    return where;
  }

  const ObjectGraph& g_;
  uint32_t max_dims_;
  std::vector<Slot> slots_;
};

StatusOr<std::vector<DcpPathPart>> ReadPath(const ObjectGraph& g, NodeId tuple, const std::string& fqn) {
  if (g.at(tuple).kind != NodeKind::kTuple && g.at(tuple).kind != NodeKind::kList) {
    return CorruptError(At(g.at(tuple)) + "planner_data for '" + fqn + "' is not a tuple");
  }
  std::vector<DcpPathPart> path;
  for (NodeId p : g.at(tuple).items) {
    DcpPathPart part;
    if (g.at(p).kind == NodeKind::kStr) {
      part.key = g.at(p).text;
    } else if (g.at(p).kind == NodeKind::kInt && g.at(p).int_value >= 0) {
      part.is_index = true;
      part.index = g.at(p).int_value;
    } else {
      return CorruptError(At(g.at(p)) + "planner_data for '" + fqn + "' holds something other than a str or index");
    }
    path.push_back(std::move(part));
  }
  if (path.empty()) return CorruptError(At(g.at(tuple)) + "planner_data for '" + fqn + "' is empty");
  return path;
}

StatusOr<DcpEntry> ReadEntry(const ObjectGraph& g, const std::string& fqn, NodeId meta, const StorageIndex& storage,
                             const DcpMetadataLimits& limits) {
  DcpEntry e;
  e.fqn = fqn;
  if (IsCallOf(g, meta, "BytesStorageMetadata")) {
    OPTSTATE_ASSIGN_OR_RETURN(std::optional<DcpLocation> where, storage.Find(fqn, nullptr));
    if (!where) return CorruptError("bytes item '" + fqn + "' has no entry in storage_data");
    e.bytes_where = std::move(*where);
    OPTSTATE_RETURN_IF_ERROR(CheckDcpLocation(e.bytes_where, fqn));
    return e;
  }
  if (!IsCallOf(g, meta, "TensorStorageMetadata")) {
    return CorruptError(At(g.at(meta)) + "'" + fqn + "' is neither TensorStorageMetadata nor BytesStorageMetadata");
  }
  e.is_tensor = true;
  OPTSTATE_ASSIGN_OR_RETURN(NodeId props, RequiredField(g, meta, "properties", "TensorStorageMetadata"));
  OPTSTATE_RETURN_IF_ERROR_CTX(ReadProperties(g, props, e), "'" + fqn + "'");
  OPTSTATE_ASSIGN_OR_RETURN(NodeId size, RequiredField(g, meta, "size", "TensorStorageMetadata"));
  OPTSTATE_ASSIGN_OR_RETURN(e.size, SizeOf(g, size, "size of '" + fqn + "'", limits.max_dims));
  OPTSTATE_ASSIGN_OR_RETURN(NodeId chunks, RequiredField(g, meta, "chunks", "TensorStorageMetadata"));
  if (g.at(chunks).kind != NodeKind::kList) return CorruptError(At(g.at(chunks)) + "chunks of '" + fqn + "' is not a list");
  if (g.at(chunks).items.size() > limits.max_chunks_per_tensor) {
    return LimitExceededError(At(g.at(chunks)) + "'" + fqn + "' has " + std::to_string(g.at(chunks).items.size()) +
                              " chunks, more than the limit of " + std::to_string(limits.max_chunks_per_tensor));
  }
  for (NodeId c : g.at(chunks).items) {
    if (!IsCallOf(g, c, "ChunkStorageMetadata")) {
      return CorruptError(At(g.at(c)) + "a chunk of '" + fqn + "' is not a ChunkStorageMetadata");
    }
    DcpChunk chunk;
    OPTSTATE_ASSIGN_OR_RETURN(NodeId offsets, RequiredField(g, c, "offsets", "ChunkStorageMetadata"));
    OPTSTATE_ASSIGN_OR_RETURN(NodeId sizes, RequiredField(g, c, "sizes", "ChunkStorageMetadata"));
    OPTSTATE_ASSIGN_OR_RETURN(chunk.offsets, SizeOf(g, offsets, "chunk offsets of '" + fqn + "'", limits.max_dims));
    OPTSTATE_ASSIGN_OR_RETURN(chunk.sizes, SizeOf(g, sizes, "chunk sizes of '" + fqn + "'", limits.max_dims));
    OPTSTATE_ASSIGN_OR_RETURN(std::optional<DcpLocation> where, storage.Find(fqn, &chunk.offsets));
    if (!where) {
      return CorruptError("'" + fqn + "' chunk at offsets " + ShapeText(chunk.offsets) +
                          " has no entry in storage_data");
    }
    chunk.where = std::move(*where);
    OPTSTATE_RETURN_IF_ERROR(CheckDcpLocation(chunk.where, fqn));
    e.chunks.push_back(std::move(chunk));
  }
  if (limits.check_layout) OPTSTATE_RETURN_IF_ERROR(CheckDcpChunkLayout(e));
  return e;
}

Status ReadStorageMeta(const ObjectGraph& g, NodeId meta, DcpMetadata& out) {
  if (meta == kNoNode || g.at(meta).kind == NodeKind::kNone) return Status();
  if (!IsCallOf(g, meta, "StorageMeta")) return CorruptError(At(g.at(meta)) + "storage_meta is not a StorageMeta");
  NodeId id = Field(g, meta, "checkpoint_id");
  // A PosixPath('/mnt/dcp') is a call with the path's parts as arguments.
  if (IsCallOf(g, id, "PosixPath") && g.at(id).args() != kNoNode) {
    for (NodeId part : g.at(g.at(id).args()).items) {
      if (g.at(part).kind != NodeKind::kStr) continue;
      if (!out.checkpoint_id.empty() && out.checkpoint_id.back() != '/') out.checkpoint_id += '/';
      out.checkpoint_id += g.at(part).text;
    }
  } else if (id != kNoNode && g.at(id).kind == NodeKind::kStr) {
    out.checkpoint_id = g.at(id).text;
  }
  NodeId save = Field(g, meta, "save_id");
  if (save != kNoNode && g.at(save).kind == NodeKind::kStr) out.save_id = g.at(save).text;
  return Status();
}

}  // namespace

StatusOr<DcpMetadata> ParseDcpMetadata(ByteSpan bytes, const DcpMetadataLimits& limits) {
  ByteCursor cursor(bytes);
  OPTSTATE_ASSIGN_OR_RETURN(PickleResult pickle, ReadPickle(cursor, limits.pickle));
  for (const GlobalRef& ref : pickle.globals) {
    if (!IsMetadataGlobal(NormalizeModule(ref.module), ref.name)) {
      return UnsupportedError("offset " + std::to_string(ref.offset) + ": global " + ref.module + "." +
                              ref.name + " is not one of the classes a DCP .metadata uses; refused without loading");
    }
  }
  const ObjectGraph& g = pickle.graph;
  OPTSTATE_RETURN_IF_ERROR(CheckMetadataCalls(g));
  DcpMetadata out;
  out.pickle_protocol = pickle.protocol;
  out.globals = pickle.globals;
  if (!IsCallOf(g, g.root, "Metadata")) return CorruptError("the pickle's root is not a DCP Metadata object");
  NodeId root = g.root;
  OPTSTATE_ASSIGN_OR_RETURN(NodeId sdm, RequiredField(g, root, "state_dict_metadata", "Metadata"));
  if (g.at(sdm).kind != NodeKind::kDict) return CorruptError(At(g.at(sdm)) + "state_dict_metadata is not a dict");
  if (g.at(sdm).entries.size() > limits.max_entries) {
    return LimitExceededError(At(g.at(sdm)) + std::to_string(g.at(sdm).entries.size()) +
                              " entries, more than the limit of " + std::to_string(limits.max_entries));
  }
  StorageIndex storage(g, limits.max_dims);
  OPTSTATE_RETURN_IF_ERROR(storage.Read(Field(g, root, "storage_data")));
  NodeId planner = Field(g, root, "planner_data");
  out.has_planner_data = planner != kNoNode && g.at(planner).kind == NodeKind::kDict;
  // planner_data by key, once: a lookup per entry was a scan of every entry
  // (70% of inspect at 40 k tensors, 320 k chunks). The first of a repeated
  // key, as DictLookup gives.
  std::unordered_map<std::string_view, NodeId> paths;
  if (out.has_planner_data) {
    for (auto [k, v] : g.at(planner).entries) {
      if (g.at(k).kind == NodeKind::kStr) paths.emplace(g.at(k).text.view(), v);
    }
  }
  std::set<std::string> seen;
  for (auto [k, v] : g.at(sdm).entries) {
    OPTSTATE_ASSIGN_OR_RETURN(std::string fqn, StrOf(g, k, "a state_dict_metadata key"));
    // A pickled dict may repeat a key (Python keeps the last); found by fuzzing.
    if (!seen.insert(fqn).second) return CorruptError(At(g.at(k)) + "state_dict_metadata lists '" + fqn + "' twice");
    OPTSTATE_ASSIGN_OR_RETURN(DcpEntry e, ReadEntry(g, fqn, v, storage, limits));
    auto found = paths.find(fqn);
    NodeId path = found == paths.end() ? kNoNode : found->second;
    if (path != kNoNode) {
      OPTSTATE_ASSIGN_OR_RETURN(e.path, ReadPath(g, path, fqn));
    } else if (out.has_planner_data) {
      return CorruptError("'" + fqn + "' has no planner_data path; its nesting cannot be known");
    } else {
      e.path = {DcpPathPart{false, fqn, 0}};
    }
    out.entries.push_back(std::move(e));
  }
  OPTSTATE_RETURN_IF_ERROR(ReadStorageMeta(g, Field(g, root, "storage_meta"), out));
  NodeId version = Field(g, root, "version");
  if (version != kNoNode && g.at(version).kind == NodeKind::kStr) out.version = g.at(version).text;
  return out;
}

std::string DcpPathText(const std::vector<DcpPathPart>& path) {
  std::string out;
  for (const DcpPathPart& p : path) {
    if (!out.empty()) out += '/';
    out += p.is_index ? std::to_string(p.index) : p.key;
  }
  return out;
}

}  // namespace optstate
