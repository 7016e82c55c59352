// What torch's rebuild calls make of a tensor: _rebuild_tensor_v2 and its
// kin, meta tensors, DTensors and FSDP1's ShardedTensor, each checked against
// its storage before it becomes a kTensor node.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "torch/dtensor.h"
#include "torch/graph_builder.h"
#include "torch/object_resolver.h"

namespace optstate {

namespace torch_internal {

// The local shard from the DTensor's state, the global shape, placements
// and mesh from the rest of the call (dtensor.h).
Status Resolver::RebuildDTensor(NodeId id, const std::vector<NodeId>& a) {
  DTensorParts parts = FindDTensorParts(g_, a);
  NodeId local = parts.local_tensor;
  if (local == kNoNode || N(local).kind != NodeKind::kTensor) {
    return CorruptError(At(N(id)) + "DTensor without a _local_tensor");
  }
  out_.tensors[N(local).tensor].inside_dtensor = true;
  TensorRef t = out_.tensors[N(local).tensor];
  t.inside_dtensor = false;
  t.is_dtensor = true;
  if (parts.has_global_size) {
    OPTSTATE_ASSIGN_OR_RETURN(t.layout().global_sizes, IntTuple(N(id), parts.global_size, "DTensor size"));
  }
  for (std::string& p : parts.placements) t.layout().placements.push_back(std::move(p));
  if (parts.mesh != kNoNode && N(parts.mesh).kind == NodeKind::kTensor) {
    t.layout().mesh_shape = out_.tensors[N(parts.mesh).tensor].sizes;
  }
  if (parts.coordinate != kNoNode && N(parts.coordinate).kind != NodeKind::kNone) {
    // Only layouts read it; a malformed one leaves it unknown rather than the file unreadable.
    StatusOr<std::vector<int64_t>> c = IntTuple(N(id), parts.coordinate, "mesh coordinate");
    if (c.ok()) t.layout().mesh_coordinate = std::move(*c);
  }
  return BecomeTensor(id, std::move(t));
}

// FSDP1's ShardedTensor (dtensor.h) as this rank's one local shard with its
// block's offsets, or as no block at all on a rank past the tensor's rows.
// false, leaving it an object named as its class, when it holds several
// local shards or lacks what is needed to place one: what optstate cannot
// place it does not pretend to.
StatusOr<bool> Resolver::RebuildShardedTensor(NodeId id, const std::vector<NodeId>& a) {
  ShardedTensorParts parts = FindShardedTensorParts(g_, a);
  if (!parts.has_global_size || parts.local_shards > 1) return false;
  StatusOr<std::vector<int64_t>> global = IntTuple(N(id), parts.global_size, "ShardedTensor size");
  if (!global.ok() || std::any_of(global->begin(), global->end(), [](int64_t d) { return d < 0; })) return false;
  TensorRef t;
  if (parts.local_shards == 1) {
    if (parts.local_tensor == kNoNode || N(parts.local_tensor).kind != NodeKind::kTensor) return false;
    StatusOr<std::vector<int64_t>> offsets = IntTuple(N(id), parts.shard_offsets, "shard offsets");
    StatusOr<std::vector<int64_t>> sizes = IntTuple(N(id), parts.shard_sizes, "shard sizes");
    if (!offsets.ok() || !sizes.ok()) return false;
    TensorRef& local = out_.tensors[N(parts.local_tensor).tensor];
    // Metadata that disagrees with its shard is not placed (torch would build
    // the object all the same; where its data belongs is then unknown).
    if (*sizes != local.sizes || offsets->size() != global->size()) return false;
    local.inside_dtensor = true;
    t = local;
    t.inside_dtensor = false;
    t.layout().block_offsets = std::move(*offsets);
  } else {  // no rows here: an empty tensor of the global's trailing shape
    const Node& dt = a[2] == kNoNode || N(a[2]).items.size() < 2 ? N(id) : N(N(a[2]).items[1]);
    std::optional<DType> d = dt.kind == NodeKind::kGlobal ? DTypeFromName(dt.name()) : std::nullopt;
    if (!d || global->empty()) return false;
    t.dtype = *d;
    t.sizes = *global;
    t.sizes[0] = 0;
    t.strides = ContiguousStrides(t.sizes);
    t.layout().holds_no_block = true;
  }
  t.is_dtensor = true;
  t.layout().explicit_block = true;
  t.layout().global_sizes = std::move(*global);
  if (parts.world_size != kNoNode && N(parts.world_size).kind == NodeKind::kInt) {
    t.layout().mesh_shape = {N(parts.world_size).int_value};
  }
  if (parts.rank != kNoNode && N(parts.rank).kind == NodeKind::kInt) {
    t.layout().mesh_coordinate = {N(parts.rank).int_value};
  }
  OPTSTATE_RETURN_IF_ERROR(BecomeTensor(id, std::move(t)));
  return true;
}

// Python's str.encode(codec) for the codecs a pickle can name to make bytes;
// nullopt for another codec or a character the codec cannot encode.
std::optional<std::string> Resolver::EncodeText(const std::string& utf8, std::string codec) {
  for (char& c : codec) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::replace(codec.begin(), codec.end(), '_', '-');
  if (codec == "utf-8" || codec == "utf8") return utf8;
  const bool latin1 = codec == "latin1" || codec == "latin-1" || codec == "iso-8859-1" || codec == "l1";
  const bool cp1252 = codec == "cp1252" || codec == "windows-1252";
  const bool ascii = codec == "ascii" || codec == "us-ascii";
  if (!latin1 && !cp1252 && !ascii) return std::nullopt;
  // cp1252's 0x80..0x9F (0 where it defines no character).
  static constexpr uint16_t kCp1252High[32] = {
      0x20AC, 0,      0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
      0x2039, 0x0152, 0,      0x017D, 0,      0,      0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
      0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0,      0x017E, 0x0178};
  std::string out;
  for (size_t i = 0; i < utf8.size();) {
    uint32_t cp = 0;
    auto c = static_cast<uint8_t>(utf8[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > utf8.size()) return std::nullopt;
    cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(utf8[i + k]) & 0x3F);
    i += len;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (ascii) {
      return std::nullopt;
    } else if (latin1 ? cp <= 0xFF : (cp >= 0xA0 && cp <= 0xFF)) {
      out += static_cast<char>(cp);
    } else if (cp1252) {
      const uint16_t* hit = std::find(std::begin(kCp1252High), std::end(kCp1252High), cp);
      if (cp == 0 || hit == std::end(kCp1252High)) return std::nullopt;
      out += static_cast<char>(0x80 + (hit - std::begin(kCp1252High)));
    } else {
      return std::nullopt;
    }
  }
  return out;
}

Status Resolver::RebuildFromType(NodeId id, const std::vector<NodeId>& a) {
  // (func, type, args, state): the tensor is func(*args); type says what class.
  if (a.size() < 3 || !IsTuple(a[2])) return Status();
  if (a.size() >= 4 && IsDTensorClass(g_, a[1])) return RebuildDTensor(id, a);
  if (a.size() >= 4 && IsShardedTensorClass(g_, a[1])) {
    OPTSTATE_ASSIGN_OR_RETURN(bool read, RebuildShardedTensor(id, a));
    if (read) return Status();
  }
  Node inner;
  inner.kind = NodeKind::kObject;
  inner.set_callable(a[0]);
  inner.set_args(a[2]);
  inner.set_offset(N(id).offset);
  g_.nodes.push_back(inner);
  state_.push_back(kActive);
  NodeId inner_id = static_cast<NodeId>(g_.nodes.size() - 1);
  OPTSTATE_RETURN_IF_ERROR(ResolveCall(inner_id));
  state_[inner_id] = kDone;
  if (N(inner_id).kind != NodeKind::kTensor) {
    // A subclass not built from a plain tensor (a ShardedTensor of several
    // local shards, through _rebuild_wrapper_subclass) stays a call, named
    // as the class it makes.
    if (N(a[1]).kind == NodeKind::kGlobal) g_.at(id).set_class_name(GlobalName(N(a[1])));
    return Status();
  }
  TensorRef t = out_.tensors[N(inner_id).tensor];
  const Node& type = N(a[1]);
  t.is_parameter = type.kind == NodeKind::kGlobal && type.module() == "torch.nn.parameter" &&
                   type.name() == "Parameter";
  return BecomeTensor(id, std::move(t));
}

Status Resolver::RebuildTensor(NodeId id, const DottedName& name) {
  const Node& n = N(id);
  const auto& a = Args(n);
  size_t need = name.name.ends_with("_v3") ? 7 : name.name.ends_with("_v2") ? 6 : 4;
  if (a.size() < need) {
    return CorruptError(At(n) + name.str() + " needs " + std::to_string(need) + " arguments, found " +
                        std::to_string(a.size()));
  }
  if (N(a[0]).kind != NodeKind::kStorage) {
    return CorruptError(At(n) + name.str() + ": first argument is " + TypeName(g_, a[0]) +
                        ", not a storage");
  }
  TensorRef t;
  t.storage = N(a[0]).storage;
  StorageRef& s = out_.storages[static_cast<size_t>(t.storage)];
  t.dtype = s.dtype;
  if (need == 7) {
    const Node& dt = N(a[6]);
    std::optional<DType> d = dt.kind == NodeKind::kGlobal && dt.module() == "torch"
                                 ? DTypeFromName(dt.name()) : std::nullopt;
    if (!d) return UnsupportedError(At(n) + "tensor dtype " + TypeName(g_, a[6]));
    t.dtype = *d;
    if (s.untyped && s.dtype == DType::kUInt8 && s.nbytes % GetDTypeInfo(*d).element_size == 0) {
      // An UntypedStorage counts bytes; name it by the first tensor viewing it.
      s.dtype = *d;
      s.numel = s.nbytes / GetDTypeInfo(*d).element_size;
    }
  }
  OPTSTATE_ASSIGN_OR_RETURN(int64_t offset, IntArg(n, a[1], "storage offset"));
  OPTSTATE_ASSIGN_OR_RETURN(t.sizes, IntTuple(n, a[2], "size"));
  OPTSTATE_ASSIGN_OR_RETURN(t.strides, IntTuple(n, a[3], "stride"));
  t.requires_grad = need >= 6 && BoolArg(a[4]);
  if (offset < 0) return CorruptError(At(n) + "negative storage offset");
  t.storage_offset = static_cast<uint64_t>(offset);
  OPTSTATE_RETURN_IF_ERROR(CheckExtent(n, t, s));
  return BecomeTensor(id, std::move(t));
}

Status Resolver::RebuildMeta(NodeId id) {
  const Node& n = N(id);
  const auto& a = Args(n);
  if (a.size() < 4) return CorruptError(At(n) + "meta tensor needs 4 arguments");
  TensorRef t;
  const Node& dt = N(a[0]);
  std::optional<DType> d = dt.kind == NodeKind::kGlobal ? DTypeFromName(dt.name()) : std::nullopt;
  if (!d) return UnsupportedError(At(n) + "meta tensor dtype " + TypeName(g_, a[0]));
  t.dtype = *d;
  OPTSTATE_ASSIGN_OR_RETURN(t.sizes, IntTuple(n, a[1], "size"));
  OPTSTATE_ASSIGN_OR_RETURN(t.strides, IntTuple(n, a[2], "stride"));
  t.requires_grad = BoolArg(a[3]);
  return BecomeTensor(id, std::move(t));
}

// The view's last element must lie inside the storage.
Status Resolver::CheckExtent(const Node& n, const TensorRef& t, const StorageRef& s) const {
  if (t.sizes.size() != t.strides.size()) {
    return CorruptError(At(n) + "tensor has " + std::to_string(t.sizes.size()) + " sizes and " +
                        std::to_string(t.strides.size()) + " strides");
  }
  unsigned __int128 last = t.storage_offset;
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    if (t.sizes[i] < 0 || t.strides[i] < 0) {
      return UnsupportedError(At(n) + "negative size or stride in a tensor view");
    }
    if (t.sizes[i] == 0) return Status();  // empty: touches nothing
    last += static_cast<unsigned __int128>(t.sizes[i] - 1) * static_cast<uint64_t>(t.strides[i]);
  }
  uint64_t elem = GetDTypeInfo(t.dtype).element_size;
  unsigned __int128 end_byte = (last + 1) * elem;
  if (end_byte > s.nbytes) {
    return CorruptError(At(n) + "tensor view ends at byte " +
                        std::to_string(static_cast<uint64_t>(end_byte)) + " of storage '" + s.key +
                        "', which has " + std::to_string(s.nbytes) + " bytes");
  }
  return Status();
}

Status Resolver::BecomeTensor(NodeId id, TensorRef t) {
  // The tensor's index takes the bytes its callable was held in. A plain
  // tensor's callable is a torch global that uses its arguments (no data
  // class): the graph lists it for the scans, and the node needs no block out
  // of line. A DTensor is written back from its call, which it keeps whole.
  const bool plain = !t.is_dtensor;
  out_.tensors.push_back(std::move(t));
  Node& n = g_.at(id);
  const NodeId callable = n.callable(), args = n.args();
  // Nearly every tensor has the callable the one before had, already judged:
  // IsKnownDataClass builds a string and walks a table, 4 * 10^6 times else.
  const bool listed_last = !g_.tensor_callables.empty() && g_.tensor_callables.back() == callable;
  const bool listed = plain && callable != kNoNode &&
                      (listed_last || (N(callable).kind == NodeKind::kGlobal &&
                                       !IsKnownDataClass(N(callable).module(), N(callable).name())));
  n.kind = NodeKind::kTensor;
  n.tensor = static_cast<uint32_t>(out_.tensors.size() - 1);
  n.set_args(args);
  if (!listed) {
    n.set_callable(callable);
  } else if (!listed_last) {
    g_.tensor_callables.push_back(callable);
  }
  n.text = CompactText();
  // Its label comes later (LabelTensors), and the call that built it stays
  // until the security scans have read it (_rebuild_from_type_v2 calls the
  // class it is given); then ReleaseTensorCalls lets it go.
  return Status();
}

}  // namespace torch_internal

}  // namespace optstate
