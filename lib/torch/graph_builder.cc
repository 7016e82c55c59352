#include "torch/graph_builder.h"

#include <algorithm>

namespace optstate {

NodeId GraphBuilder::New(NodeKind kind) {
  cp_.graph.nodes.emplace_back();
  cp_.graph.nodes.back().kind = kind;
  return static_cast<NodeId>(cp_.graph.nodes.size() - 1);
}

NodeId GraphBuilder::Int(int64_t v) {
  NodeId id = New(NodeKind::kInt);
  cp_.graph.at(id).int_value = v;
  return id;
}

NodeId GraphBuilder::Float(double v) {
  NodeId id = New(NodeKind::kFloat);
  cp_.graph.at(id).float_value = v;
  return id;
}

NodeId GraphBuilder::Bool(bool v) {
  NodeId id = New(NodeKind::kBool);
  cp_.graph.at(id).bool_value = v;
  return id;
}

NodeId GraphBuilder::Str(const std::string& s) {
  NodeId id = New(NodeKind::kStr);
  cp_.graph.at(id).text = s;
  return id;
}

NodeId GraphBuilder::Tuple(std::vector<NodeId> items) {
  NodeId id = New(NodeKind::kTuple);
  cp_.graph.at(id).items = std::move(items);
  return id;
}

NodeId GraphBuilder::List(std::vector<NodeId> items) {
  NodeId id = New(NodeKind::kList);
  cp_.graph.at(id).items = std::move(items);
  return id;
}

NodeId GraphBuilder::Dict(const std::string& class_name) {
  NodeId id = New(NodeKind::kDict);
  if (!class_name.empty()) cp_.graph.at(id).set_class_name(CompactText::Common(class_name));
  return id;
}

void GraphBuilder::Set(NodeId dict, NodeId key, NodeId value) { cp_.graph.at(dict).entries.emplace_back(key, value); }

void GraphBuilder::Set(NodeId dict, const std::string& key, NodeId value) { Set(dict, Str(key), value); }

NodeId GraphBuilder::Tensor(DType dtype, const std::vector<int64_t>& shape) {
  StorageRef s;
  s.key = std::to_string(cp_.storages.size());
  s.dtype = dtype;
  s.location = "cpu";
  s.numel = 1;
  for (int64_t d : shape) s.numel *= static_cast<uint64_t>(d);
  s.nbytes = s.numel * GetDTypeInfo(dtype).element_size;
  s.located = true;
  cp_.storages.push_back(s);
  TensorRef t;
  t.storage = static_cast<int32_t>(cp_.storages.size() - 1);
  t.dtype = dtype;
  t.sizes = shape;
  t.strides = ContiguousStrides(shape);
  cp_.tensors.push_back(t);
  NodeId id = New(NodeKind::kTensor);
  cp_.graph.at(id).tensor = static_cast<uint32_t>(cp_.tensors.size() - 1);
  return id;
}

NodeId GraphBuilder::TensorOver(TensorRef base, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  base.sizes = std::move(sizes);
  base.strides = std::move(strides);
  cp_.tensors.push_back(std::move(base));
  NodeId id = New(NodeKind::kTensor);
  cp_.graph.at(id).tensor = static_cast<uint32_t>(cp_.tensors.size() - 1);
  return id;
}

StatusOr<NodeId> GraphBuilder::Import(const ObjectGraph& from, NodeId id) {
  std::unordered_map<NodeId, NodeId> copied;
  return ImportNode(from, id, copied);
}

StatusOr<NodeId> GraphBuilder::ImportNode(const ObjectGraph& from, NodeId id,
                                          std::unordered_map<NodeId, NodeId>& copied) {
  if (id == kNoNode) return kNoNode;
  if (auto it = copied.find(id); it != copied.end()) return it->second;
  const Node& src = from.at(id);
  if (src.kind == NodeKind::kTensor || src.kind == NodeKind::kStorage || src.kind == NodeKind::kPersistentId) {
    return UnsupportedError("offset " + std::to_string(src.offset) + ": a " + TypeName(from, id) +
                            " inside a non-tensor value cannot be carried over");
  }
  NodeId out = New(src.kind);
  copied.emplace(id, out);
  {
    Node& n = cp_.graph.at(out);  // copy the scalars now: later New() calls may move the arena
    Node copy = src;
    copy.items.clear();
    copy.entries.clear();
    copy.set_callable(kNoNode);  // the source graph's ids: set anew below
    copy.set_args(kNoNode);
    if (copy.has_extra()) copy.extra().kwargs = copy.extra().state = kNoNode;
    n = std::move(copy);
  }
  std::vector<NodeId> items;
  for (NodeId i : src.items) {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId c, ImportNode(from, i, copied));
    items.push_back(c);
  }
  std::vector<std::pair<NodeId, NodeId>> entries;
  for (auto [k, v] : src.entries) {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId ck, ImportNode(from, k, copied));
    OPTSTATE_ASSIGN_OR_RETURN(NodeId cv, ImportNode(from, v, copied));
    entries.emplace_back(ck, cv);
  }
  NodeId refs[4] = {src.callable(), src.args(), src.kwargs(), src.state()};
  for (NodeId& r : refs) {
    OPTSTATE_ASSIGN_OR_RETURN(r, ImportNode(from, r, copied));
  }
  Node& n = cp_.graph.at(out);
  n.items = std::move(items);
  n.entries = std::move(entries);
  n.set_callable(refs[0]);
  n.set_args(refs[1]);
  if (n.has_extra() || refs[2] != kNoNode || refs[3] != kNoNode) {
    n.extra().kwargs = refs[2];
    n.extra().state = refs[3];
  }
  return out;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

}  // namespace optstate
