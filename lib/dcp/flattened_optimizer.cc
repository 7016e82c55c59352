#include "dcp/flattened_optimizer.h"

#include <cmath>
#include <map>
#include <optional>
#include <utility>

namespace optstate {
namespace {

constexpr std::string_view kStatePrefix = "state.";
constexpr std::string_view kGroupPrefix = "param_groups.";

// "<fqn>.<leaf>": fields and hyperparameter names hold no dot, FQNs may.
std::optional<std::pair<std::string, std::string>> SplitLast(std::string_view rest) {
  size_t dot = rest.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == rest.size()) return std::nullopt;
  return std::make_pair(std::string(rest.substr(0, dot)), std::string(rest.substr(dot + 1)));
}

// Hyperparameter values as saved: numbers, strings, None, bools and tuples of them.
bool SameValue(const ObjectGraph& g, NodeId a, NodeId b, int depth = 0) {
  if (a == b) return true;
  const Node& x = g.at(a);
  const Node& y = g.at(b);
  if (x.kind != y.kind || depth > 8) return false;
  switch (x.kind) {
    case NodeKind::kNone: return true;
    case NodeKind::kBool: return x.bool_value == y.bool_value;
    case NodeKind::kInt: return x.int_value == y.int_value;
    case NodeKind::kFloat:
      return x.float_value == y.float_value || (std::isnan(x.float_value) && std::isnan(y.float_value));
    case NodeKind::kStr:
    case NodeKind::kBytes: return x.text == y.text;
    case NodeKind::kTuple:
    case NodeKind::kList:
      if (x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!SameValue(g, x.items[i], y.items[i], depth + 1)) return false;
      }
      return true;
    default: return false;  // tensors and objects: never merged into one group
  }
}

struct FlatParam {
  std::string fqn;
  std::vector<std::pair<std::string, NodeId>> hypers;
};

bool SameHypers(const ObjectGraph& g, const FlatParam& a, const FlatParam& b) {
  if (a.hypers.size() != b.hypers.size()) return false;
  for (size_t i = 0; i < a.hypers.size(); ++i) {
    if (a.hypers[i].first != b.hypers[i].first || !SameValue(g, a.hypers[i].second, b.hypers[i].second)) return false;
  }
  return true;
}

// Whether `dict` is a flattened optimizer: str keys only, each under one of
// the two prefixes with an FQN and a leaf, both prefixes present.
bool IsFlattened(const ObjectGraph& g, NodeId dict) {
  const Node& n = g.at(dict);
  if (n.kind != NodeKind::kDict || n.entries.empty()) return false;
  bool state = false, groups = false;
  for (auto [k, v] : n.entries) {
    if (g.at(k).kind != NodeKind::kStr) return false;
    std::string_view key = g.at(k).text;
    if (key.starts_with(kStatePrefix) && SplitLast(key.substr(kStatePrefix.size()))) {
      state = true;
    } else if (key.starts_with(kGroupPrefix) && SplitLast(key.substr(kGroupPrefix.size()))) {
      groups = true;
    } else {
      return false;
    }
  }
  return state && groups;
}

void Rebuild(ObjectGraph& g, GraphBuilder& b, NodeId dict) {
  std::vector<std::pair<NodeId, NodeId>> flat = g.at(dict).entries;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, NodeId>>>> state;
  std::map<std::string, size_t> state_at;
  std::vector<FlatParam> params;
  std::map<std::string, size_t> param_at;
  for (auto [k, v] : flat) {
    const std::string key = g.at(k).text;
    const bool is_state = key.starts_with(kStatePrefix);
    auto [fqn, leaf] = *SplitLast(std::string_view(key).substr(is_state ? kStatePrefix.size() : kGroupPrefix.size()));
    if (is_state) {
      auto [it, fresh] = state_at.emplace(fqn, state.size());
      if (fresh) state.push_back({fqn, {}});
      state[it->second].second.emplace_back(leaf, v);
    } else {
      auto [it, fresh] = param_at.emplace(fqn, params.size());
      if (fresh) params.push_back(FlatParam{fqn, {}});
      params[it->second].hypers.emplace_back(leaf, v);
    }
  }
  // New nodes first, then the dict's entries: New() may move the arena.
  NodeId state_dict = b.Dict();
  for (auto& [fqn, fields] : state) {
    NodeId entry = b.Dict();
    for (auto& [field, value] : fields) b.Set(entry, field, value);
    b.Set(state_dict, fqn, entry);
  }
  std::vector<NodeId> groups;
  for (size_t i = 0; i < params.size();) {
    size_t end = i + 1;
    while (end < params.size() && SameHypers(g, params[i], params[end])) ++end;
    NodeId group = b.Dict();
    for (auto& [name, value] : params[i].hypers) b.Set(group, name, value);
    std::vector<NodeId> names;
    for (size_t p = i; p < end; ++p) names.push_back(b.Str(params[p].fqn));
    b.Set(group, "params", b.List(std::move(names)));
    groups.push_back(group);
    i = end;
  }
  NodeId group_list = b.List(std::move(groups));
  NodeId state_key = b.Str("state");
  NodeId groups_key = b.Str("param_groups");
  g.at(dict).entries = CompactList<Entry>{Entry(state_key, state_dict), Entry(groups_key, group_list)};
}

}  // namespace

std::vector<std::string> UnflattenOptimizers(Checkpoint& checkpoint, GraphBuilder& builder) {
  ObjectGraph& g = checkpoint.graph;
  std::vector<std::string> rebuilt;
  if (g.root == kNoNode || g.at(g.root).kind != NodeKind::kDict) return rebuilt;
  if (IsFlattened(g, g.root)) {
    Rebuild(g, builder, g.root);
    rebuilt.push_back("");
    return rebuilt;
  }
  std::vector<std::pair<NodeId, NodeId>> children = g.at(g.root).entries;
  for (auto [k, v] : children) {
    if (g.at(k).kind != NodeKind::kStr || !IsFlattened(g, v)) continue;
    Rebuild(g, builder, v);
    rebuilt.push_back(g.at(k).text);
  }
  return rebuilt;
}

}  // namespace optstate
