#include "optstate/pickle_graph.h"

#include <bit>
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

namespace {

// A kept node's new id is the number of kept nodes before it: a bit per node
// and a running count per 64 of them, 4.5 bits a node, where a table of new
// ids took 32 (120 MB at the 3 * 10^7 nodes of 10^6 parameters, the last
// thing ReleaseTensorCalls allocates and so the peak of inspect and validate).
class KeptRank {
 public:
  explicit KeptRank(const std::vector<bool>& keep, size_t size)
      : bits_((size + 63) / 64, 0), before_(bits_.size() + 1, 0) {
    for (size_t id = 0; id < size && id < keep.size(); ++id) {
      if (keep[id]) bits_[id / 64] |= uint64_t{1} << (id % 64);
    }
    for (size_t w = 0; w < bits_.size(); ++w) {
      before_[w + 1] = before_[w] + static_cast<NodeId>(std::popcount(bits_[w]));
    }
  }
  bool kept(NodeId id) const { return (bits_[id / 64] >> (id % 64)) & 1; }
  // The new id of a kept node; kNoNode for one not kept.
  NodeId NewId(NodeId id) const {
    if (!kept(id)) return kNoNode;
    const uint64_t below = bits_[id / 64] & ((uint64_t{1} << (id % 64)) - 1);
    return before_[id / 64] + static_cast<NodeId>(std::popcount(below));
  }

 private:
  std::vector<uint64_t> bits_;
  std::vector<NodeId> before_;  // kept nodes in the words before each
};

}  // namespace

size_t CompactGraph(ObjectGraph& graph, const std::vector<bool>& keep) {
  const size_t size = graph.nodes.size();
  const KeptRank rank(keep, size);
  auto fix = [&](NodeId& ref) {
    if (ref != kNoNode) ref = rank.NewId(ref);
  };
  // New ids are never above old ones, so nodes move down in one pass; what a
  // move swaps out is an unkept node, destroyed with the tail below.
  NodeId next = 0;
  for (NodeId id = 0; id < size; ++id) {
    if (!rank.kept(id)) continue;
    Node& n = graph.nodes[next];
    if (next != id) n = std::move(graph.nodes[id]);
    ForEachChildRef(n, fix);
    ++next;
  }
  fix(graph.root);
  std::erase_if(graph.tensor_callables, [&](NodeId c) { return !rank.kept(c); });
  for (NodeId& c : graph.tensor_callables) fix(c);
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
