// The .metadata pickle, built as an object graph of unperformed calls and
// written by our pickle writer: each dataclass is NEWOBJ(cls, ()) + BUILD of
// its fields, TensorProperties BUILD takes the 5-tuple its __setstate__
// expects, torch.Size is a REDUCE. torch 2.6's plain pickle.load rebuilds
// exactly the objects DCP's own writer would have saved.
//
// Globals, field names, file names, FQNs and the empty argument tuple are one
// node each, referenced from every chunk (the pickle writer memoizes a node
// used twice, as Python's pickler memoizes interned names): 320 k chunks were
// ~10^7 nodes and 2.8 * 10^6 strings in the pickle before.
#include "optstate/dcp_metadata.h"

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "torch/graph_builder.h"
#include "torch/pickle_writer.h"

namespace optstate {
namespace {

constexpr const char* kMeta = "torch.distributed.checkpoint.metadata";

class MetadataGraph {
 public:
  explicit MetadataGraph(Checkpoint& cp) : b_(cp), g_(cp.graph) {}

  NodeId Global(const std::string& module, const std::string& name) {
    auto [it, fresh] = globals_.try_emplace(module + "." + name, kNoNode);
    if (fresh) {
      it->second = b_.New(NodeKind::kGlobal);
      g_.at(it->second).set_global(module, name);
    }
    return it->second;
  }

  // One str node per distinct text: field names, relative paths, FQNs.
  NodeId Text(const std::string& text) {
    auto [it, fresh] = strings_.try_emplace(text, kNoNode);
    if (fresh) it->second = b_.Str(text);
    return it->second;
  }

  void Field(NodeId fields, const std::string& name, NodeId value) { b_.Set(fields, Text(name), value); }

  NodeId EmptyTuple() {
    if (empty_tuple_ == kNoNode) empty_tuple_ = b_.Tuple({});
    return empty_tuple_;
  }

  // cls.__new__(cls) then BUILD(fields): how pickle saves a dataclass.
  NodeId Dataclass(const std::string& module, const std::string& cls, NodeId fields) {
    NodeId callable = Global(module, cls);
    NodeId args = EmptyTuple();
    NodeId id = b_.New(NodeKind::kObject);
    Node& n = g_.at(id);
    n.set_callable(callable);
    n.set_args(args);
    n.call = CallOpcode::kNewObj;
    n.extra().state = fields;
    return id;
  }

  NodeId Call(NodeId callable, std::vector<NodeId> args) {
    NodeId tuple = b_.Tuple(std::move(args));
    NodeId id = b_.New(NodeKind::kObject);
    g_.at(id).set_callable(callable);
    g_.at(id).set_args(tuple);
    g_.at(id).call = CallOpcode::kReduce;
    return id;
  }

  // Ints below 2^16 and torch.Size values are one node each, marked shared:
  // the pickle writer writes a shared node afresh at every use, so the bytes
  // are those of a node per use, as DCP's pickler writes them, while a chunk
  // costs ~11 nodes rather than ~20 (250 k chunks: 180 MB less).
  NodeId Int(int64_t v) {
    if (v < 0 || v >= static_cast<int64_t>(kSmallInts)) return b_.Int(v);
    if (small_ints_.empty()) small_ints_.assign(kSmallInts, kNoNode);
    NodeId& id = small_ints_[static_cast<size_t>(v)];
    if (id == kNoNode) {
      id = b_.Int(v);
      g_.at(id).shared = true;
    }
    return id;
  }

  NodeId Size(const std::vector<int64_t>& dims) {
    auto [it, fresh] = sizes_.try_emplace(dims, kNoNode);
    if (!fresh) return it->second;
    std::vector<NodeId> items;
    for (int64_t d : dims) items.push_back(Int(d));
    NodeId id = b_.Tuple(std::move(items));
    g_.at(id).set_class_name(CompactText::Common("torch.Size"));
    g_.at(id).shared = true;
    it->second = id;
    return id;
  }

  NodeId Properties(DType dtype) {
    // One layout and one memory-format object, shared as DCP's pickle memoizes them.
    if (layout_ == kNoNode) {
      layout_ = Call(Global("torch.serialization", "_get_layout"), {b_.Str("torch.strided")});
      contiguous_ = Call(Global(kMeta, "_MEM_FORMAT_ENCODING"), {b_.Int(0)});
    }
    NodeId state = b_.Tuple({Global("torch", std::string(GetDTypeInfo(dtype).name)), layout_, b_.Bool(false),
                             contiguous_, b_.Bool(false)});
    NodeId callable = Global(kMeta, "TensorProperties");
    NodeId args = EmptyTuple();
    NodeId id = b_.New(NodeKind::kObject);
    g_.at(id).set_callable(callable);
    g_.at(id).set_args(args);
    g_.at(id).call = CallOpcode::kNewObj;
    g_.at(id).extra().state = state;
    return id;
  }

  NodeId Location(const DcpLocation& where) {
    NodeId fields = b_.Dict();
    Field(fields, "relative_path", Text(where.relative_path));
    Field(fields, "offset", Int(static_cast<int64_t>(where.offset)));
    Field(fields, "length", Int(static_cast<int64_t>(where.length)));
    return Dataclass("torch.distributed.checkpoint.filesystem", "_StorageInfo", fields);
  }

  NodeId Index(const std::string& fqn, const std::vector<int64_t>* offset, int64_t index) {
    NodeId fields = b_.Dict();
    Field(fields, "fqn", Text(fqn));
    if (offset) Field(fields, "offset", Size(*offset));
    Field(fields, "index", offset ? Int(index) : b_.New(NodeKind::kNone));
    return Dataclass(kMeta, "MetadataIndex", fields);
  }

  GraphBuilder& builder() { return b_; }

 private:
  GraphBuilder b_;
  ObjectGraph& g_;
  NodeId layout_ = kNoNode, contiguous_ = kNoNode, empty_tuple_ = kNoNode;
  std::unordered_map<std::string, NodeId> globals_;  // "module.name"
  std::unordered_map<std::string, NodeId> strings_;
  static constexpr size_t kSmallInts = 1u << 16;
  std::vector<NodeId> small_ints_;
  std::map<std::vector<int64_t>, NodeId> sizes_;
};

// The Metadata object's graph in `cp`; returns its root.
NodeId BuildMetadataGraph(const std::vector<DcpEntry>& entries, Checkpoint& cp) {
  MetadataGraph m(cp);
  GraphBuilder& b = m.builder();
  NodeId state_dict_metadata = b.Dict(), planner_data = b.Dict(), storage_data = b.Dict();
  for (const DcpEntry& e : entries) {
    std::vector<NodeId> path;
    for (const DcpPathPart& p : e.path) path.push_back(p.is_index ? b.Int(p.index) : b.Str(p.key));
    b.Set(planner_data, m.Text(e.fqn), b.Tuple(std::move(path)));
    if (!e.is_tensor) {
      b.Set(state_dict_metadata, m.Text(e.fqn), m.Dataclass(kMeta, "BytesStorageMetadata", kNoNode));
      b.Set(storage_data, m.Index(e.fqn, nullptr, 0), m.Location(e.bytes_where));
      continue;
    }
    std::vector<NodeId> chunks;
    for (size_t i = 0; i < e.chunks.size(); ++i) {
      const DcpChunk& c = e.chunks[i];
      NodeId fields = b.Dict();
      m.Field(fields, "offsets", m.Size(c.offsets));
      m.Field(fields, "sizes", m.Size(c.sizes));
      chunks.push_back(m.Dataclass(kMeta, "ChunkStorageMetadata", fields));
      b.Set(storage_data, m.Index(e.fqn, &c.offsets, static_cast<int64_t>(i)), m.Location(c.where));
    }
    NodeId fields = b.Dict();
    m.Field(fields, "properties", m.Properties(e.dtype));
    m.Field(fields, "size", m.Size(e.size));
    m.Field(fields, "chunks", b.List(std::move(chunks)));
    b.Set(state_dict_metadata, m.Text(e.fqn), m.Dataclass(kMeta, "TensorStorageMetadata", fields));
  }
  NodeId fields = b.Dict();
  m.Field(fields, "state_dict_metadata", state_dict_metadata);
  m.Field(fields, "planner_data", planner_data);
  m.Field(fields, "storage_data", storage_data);
  m.Field(fields, "storage_meta", b.New(NodeKind::kNone));
  return m.Dataclass(kMeta, "Metadata", fields);
}

}  // namespace

StatusOr<std::string> WriteDcpMetadata(const std::vector<DcpEntry>& entries) {
  Checkpoint cp;
  NodeId root = BuildMetadataGraph(entries, cp);
  OPTSTATE_ASSIGN_OR_RETURN(PickleOutput pickle, WriteTorchPickle(cp, root));
  return std::move(pickle.bytes);
}

StatusOr<uint64_t> WriteDcpMetadata(const std::vector<DcpEntry>& entries,
                                    const std::function<Status(std::string_view)>& sink) {
  Checkpoint cp;
  NodeId root = BuildMetadataGraph(entries, cp);
  uint64_t written = 0;
  OPTSTATE_RETURN_IF_ERROR(WriteTorchPickle(cp, root, [&](std::string_view piece) {
                             written += piece.size();
                             return sink(piece);
                           }).status());
  return written;
}

}  // namespace optstate
