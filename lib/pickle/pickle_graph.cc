#include "optstate/pickle_graph.h"

namespace optstate {

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
  return node.module() + "." + node.name();
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
