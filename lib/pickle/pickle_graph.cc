#include "optstate/pickle_graph.h"

#include <cstring>

namespace optstate {

void Node::set_global(std::string_view module, std::string_view global_name) {
  const auto module_size = static_cast<uint32_t>(module.size());  // a pickle's str is at most 4 GiB
  std::string joined(sizeof module_size, '\0');
  std::memcpy(joined.data(), &module_size, sizeof module_size);
  joined.append(module).append(global_name);
  extra().text = joined;
}

std::string_view Node::GlobalPart(bool module) const {
  if (kind != NodeKind::kGlobal || !more_) return {};
  const std::string_view joined = more_->text.view();
  uint32_t module_size = 0;
  if (joined.size() < sizeof module_size) return {};
  std::memcpy(&module_size, joined.data(), sizeof module_size);
  const std::string_view rest = joined.substr(sizeof module_size);
  return module ? rest.substr(0, module_size) : rest.substr(module_size);
}

size_t CompactGraph(ObjectGraph& graph, const std::vector<bool>& keep) {
  const size_t size = graph.nodes.size();
  std::vector<NodeId> renamed(size, kNoNode);
  NodeId next = 0;
  for (NodeId id = 0; id < size; ++id) {
    if (id < keep.size() && keep[id]) renamed[id] = next++;
  }
  auto fix = [&](NodeId& ref) {
    if (ref != kNoNode) ref = renamed[ref];
  };
  // New ids are never above old ones, so nodes move down in one pass; what a
  // move swaps out is an unkept node, destroyed with the tail below.
  for (NodeId id = 0; id < size; ++id) {
    if (renamed[id] == kNoNode) continue;
    Node& n = graph.nodes[renamed[id]];
    if (renamed[id] != id) n = std::move(graph.nodes[id]);
    ForEachChildRef(n, fix);
  }
  fix(graph.root);
  graph.nodes.Truncate(next);
  return next;
}

std::string GlobalName(const Node& node) {
  if (node.kind != NodeKind::kGlobal) return "";
  std::string out(node.module());
  return out.append(".").append(node.name());
}

std::string TypeName(const ObjectGraph& graph, NodeId id) {
  if (id == kNoNode || id >= graph.nodes.size()) return "nothing";
  const Node& n = graph.at(id);
  if (!n.class_name().empty()) return n.class_name();
  switch (n.kind) {
    case NodeKind::kNone: return "None";
    case NodeKind::kBool: return "bool";
    case NodeKind::kInt:
    case NodeKind::kBigInt: return "int";
    case NodeKind::kFloat: return "float";
    case NodeKind::kStr: return "str";
    case NodeKind::kBytes: return "bytes";
    case NodeKind::kTuple: return "tuple";
    case NodeKind::kList: return "list";
    case NodeKind::kDict: return "dict";
    case NodeKind::kSet: return "set";
    case NodeKind::kFrozenSet: return "frozenset";
    case NodeKind::kGlobal: return "global " + GlobalName(n);
    case NodeKind::kObject: {
      if (n.callable() != kNoNode && n.callable() < graph.nodes.size() &&
          graph.at(n.callable()).kind == NodeKind::kGlobal) {
        return GlobalName(graph.at(n.callable()));
      }
      return "object";
    }
    case NodeKind::kPersistentId: return "persistent id";
    case NodeKind::kTensor: return "tensor";
    case NodeKind::kStorage: return "storage";
  }
  return "object";
}

NodeId DictLookup(const ObjectGraph& g, NodeId dict, std::string_view key) {
  if (dict == kNoNode || g.at(dict).kind != NodeKind::kDict) return kNoNode;
  for (auto [k, v] : g.at(dict).entries) {
    if (g.at(k).kind == NodeKind::kStr && g.at(k).text == key) return v;
  }
  return kNoNode;
}

}  // namespace optstate
