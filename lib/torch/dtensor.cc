#include "torch/dtensor.h"

#include <string_view>

namespace optstate {
namespace {

// The value of `key` in a dict, or in the dict of a (slots, dict) state pair,
// or in an object's BUILD state. Torch nests these two or three levels; the
// bound matters because BUILD can give an object a state made after it,
// itself included, which the reader's depth bookkeeping never sees (a
// crafted file made this loop forever).
NodeId StateValue(const ObjectGraph& g, NodeId state, std::string_view key, int depth = 0) {
  static constexpr int kMaxStateDepth = 8;
  if (state == kNoNode || depth > kMaxStateDepth) return kNoNode;
  const Node& s = g.at(state);
  if (s.kind == NodeKind::kTuple) {
    for (NodeId part : s.items) {
      NodeId v = StateValue(g, part, key, depth + 1);
      if (v != kNoNode) return v;
    }
    return kNoNode;
  }
  if (s.kind == NodeKind::kObject) return StateValue(g, s.state(), key, depth + 1);
  if (s.kind != NodeKind::kDict) return kNoNode;
  for (auto [k, v] : s.entries) {
    if (g.at(k).kind == NodeKind::kStr && g.at(k).text == key) return v;
  }
  return kNoNode;
}

// Shard(dim=0), Replicate(), Partial(sum): as str() of the placement prints.
std::string PlacementText(const ObjectGraph& g, NodeId id) {
  const Node& n = g.at(id);
  std::string cls = TypeName(g, id);
  std::string base = cls.substr(cls.rfind('.') + 1);
  auto int_text = [&](NodeId v) {
    return v != kNoNode && g.at(v).kind == NodeKind::kInt ? std::to_string(g.at(v).int_value) : std::string("?");
  };
  if (base == "Shard") return "Shard(dim=" + int_text(StateValue(g, id, "dim")) + ")";
  if (base == "_StridedShard") {  // repr(), not str() ("_S(0, 2)"), which says less
    return "_StridedShard(dim=" + int_text(StateValue(g, id, "dim")) +
           ", sf=" + int_text(StateValue(g, id, "split_factor")) + ")";
  }
  if (base == "Partial") {
    NodeId op = StateValue(g, id, "reduce_op");
    return "Partial(" + (op != kNoNode && g.at(op).kind == NodeKind::kStr ? g.at(op).text.str() : std::string("?")) + ")";
  }
  if (base == "Replicate") return "Replicate()";
  return n.kind == NodeKind::kObject ? base : "?";
}

}  // namespace

bool IsDTensorClass(const ObjectGraph& g, NodeId id) {
  const Node& n = g.at(id);
  return n.kind == NodeKind::kGlobal && n.name() == "DTensor" &&
         (n.module() == "torch.distributed.tensor" || n.module() == "torch.distributed._tensor.api" ||
          n.module() == "torch.distributed.tensor._api");
}

DTensorParts FindDTensorParts(const ObjectGraph& g, const std::vector<NodeId>& a) {
  DTensorParts parts;
  parts.local_tensor = StateValue(g, a[3], "_local_tensor");
  const std::vector<NodeId>& wrapper_args = g.at(a[2]).items;
  if (wrapper_args.size() >= 3) {
    parts.has_global_size = true;
    parts.global_size = wrapper_args[2];
  }
  NodeId spec = StateValue(g, a[3], "_spec");
  NodeId placements = StateValue(g, spec, "placements");
  if (placements != kNoNode &&
      (g.at(placements).kind == NodeKind::kTuple || g.at(placements).kind == NodeKind::kList)) {
    for (NodeId p : g.at(placements).items) parts.placements.push_back(PlacementText(g, p));
  }
  NodeId mesh = StateValue(g, spec, "mesh");
  parts.mesh = StateValue(g, mesh, "mesh");
  parts.coordinate = StateValue(g, mesh, "_coordinate_on_dim");
  return parts;
}

bool IsShardedTensorClass(const ObjectGraph& g, NodeId id) {
  const Node& n = g.at(id);
  return n.kind == NodeKind::kGlobal && n.name() == "ShardedTensor" &&
         n.module() == "torch.distributed._shard.sharded_tensor.api";
}

ShardedTensorParts FindShardedTensorParts(const ObjectGraph& g, const std::vector<NodeId>& a) {
  ShardedTensorParts parts;
  const std::vector<NodeId>& wrapper_args = g.at(a[2]).items;
  if (wrapper_args.size() >= 3) {
    parts.has_global_size = true;
    parts.global_size = wrapper_args[2];
  }
  const Node& state = g.at(a[3]);
  if (state.kind != NodeKind::kTuple || state.items.size() < 3) return parts;
  const Node& shards = g.at(state.items[0]);
  if (shards.kind == NodeKind::kList) {
    parts.local_shards = shards.items.size();
    if (!shards.items.empty()) {
      NodeId first = shards.items[0];
      parts.local_tensor = StateValue(g, first, "tensor");
      NodeId metadata = StateValue(g, first, "metadata");
      parts.shard_offsets = StateValue(g, metadata, "shard_offsets");
      parts.shard_sizes = StateValue(g, metadata, "shard_sizes");
    }
  }
  parts.rank = StateValue(g, state.items[2], "global_rank");
  parts.world_size = StateValue(g, state.items[2], "global_world_size");
  return parts;
}

}  // namespace optstate
