// A model's parameters put in the optimizer's index order when the model file
// does not give it: by the state's shapes (safetensors sorts its header), or
// by the one assignment of groups and frozen parameters that fits.
#include "state/param_order.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "state/group_order.h"

namespace optstate {
namespace {

std::string Count(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// Numbers in names compare as numbers ("layers.2" before "layers.10"): a
// deterministic order among same-shape parameters, close to registration's.
bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      std::string_view x(a.data() + i, ie - i), y(b.data() + j, je - j);
      while (x.size() > 1 && x.front() == '0') x.remove_prefix(1);
      while (y.size() > 1 && y.front() == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = ie, j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i, ++j;
  }
  return a.size() - i < b.size() - j;
}

// Each index's state shape (its first tensor other than `step`); nullopt
// where the index has no state entry or no such tensor. One pass over the keys.
std::vector<std::optional<std::vector<int64_t>>> StateShapes(const Checkpoint& cp, const OptimizerState& state) {
  const ObjectGraph& g = cp.graph;
  std::vector<std::optional<std::vector<int64_t>>> out(state.param_count);
  for (const StateKey& k : state.keys) {
    if (k.kind != KeyKind::kIndex && k.kind != KeyKind::kStringIndex) continue;
    if (k.index < 0 || static_cast<size_t>(k.index) >= out.size() || g.at(k.value).kind != NodeKind::kDict) continue;
    for (auto [name, v] : g.at(k.value).entries) {
      if (g.at(v).kind != NodeKind::kTensor) continue;
      if (g.at(name).kind == NodeKind::kStr && g.at(name).text == "step") continue;
      out[static_cast<size_t>(k.index)] = cp.tensors[g.at(v).tensor].sizes;
      break;
    }
  }
  return out;
}

std::string NameList(const std::vector<ParamInfo>& candidates, const std::vector<size_t>& which) {
  std::string list;
  for (size_t i = 0; i < which.size() && i < 12; ++i) list += (i ? ", " : "") + candidates[which[i]].name;
  if (which.size() > 12) list += ", ... (" + std::to_string(which.size()) + " in all)";
  return list;
}

}  // namespace

// safetensors sorts its header, so a model read from one has lost its
// module order. The optimizer's index keys still carry their state's shapes:
// each index takes a parameter of its state's shape (same-shape ones in
// natural name order), and which could have been swapped is recorded.
StatusOr<ModelParams> OrderByStateShapes(std::vector<ParamInfo> candidates, const Checkpoint& checkpoint,
                                         const OptimizerState& state, ModelParams out) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const ParamInfo& a, const ParamInfo& b) { return NaturalLess(a.name, b.name); });
  // Per shape: its candidates in natural order, and how many are taken.
  std::map<std::vector<int64_t>, std::pair<std::vector<size_t>, size_t>> free_by_shape;
  for (size_t c = 0; c < candidates.size(); ++c) free_by_shape[candidates[c].shape].first.push_back(c);
  const std::vector<std::optional<std::vector<int64_t>>> shapes = StateShapes(checkpoint, state);
  std::vector<std::optional<size_t>> chosen(state.param_count);
  std::vector<bool> used(candidates.size(), false);
  for (size_t i = 0; i < state.param_count; ++i) {
    const std::optional<std::vector<int64_t>>& shape = shapes[i];
    if (!shape) continue;
    auto it = free_by_shape.find(*shape);
    if (it == free_by_shape.end() || it->second.second == it->second.first.size()) {
      std::string s;
      for (size_t d = 0; d < shape->size(); ++d) s += (d ? ", " : "") + std::to_string((*shape)[d]);
      return InvalidArgumentError("state[" + std::to_string(i) + "] has shape [" + s + "], but the model has no " +
                                  (it == free_by_shape.end() ? "" : "more ") +
                                  "parameters of that shape: this state was saved for another model");
    }
    const size_t c = it->second.first[it->second.second++];
    chosen[i] = c;
    used[c] = true;
  }
  std::vector<size_t> rest;  // indices without state take what is left, in natural order
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (!used[c]) rest.push_back(c);
  }
  size_t next = 0, stateless = 0;
  for (size_t i = 0; i < state.param_count; ++i) {
    if (!chosen[i]) chosen[i] = rest[next++], ++stateless;
  }
  for (size_t i = 0; i < state.param_count; ++i) {
    const ParamInfo& p = candidates[*chosen[i]];
    out.params.push_back(p);
    if (free_by_shape.at(p.shape).first.size() > 1 || (stateless > 1 && !shapes[i])) {
      out.order_ambiguous.push_back(p.name);
    }
  }
  out.order = "the order the state's shapes give (safetensors keeps no module order: its header is sorted); " +
              (out.order_ambiguous.empty()
                   ? std::string("every shape is a different parameter's, so the order is exact")
                   : Count(out.order_ambiguous.size(), "parameter") +
                         " share a shape with another and may be swapped, which no shape check depends on");
  return out;
}

// Several groups or frozen parameters (group_order.h): each group a
// subsequence of module order, every state shape its parameter's. Used only
// when exactly one assignment fits.
StatusOr<ModelParams> OrderByGroups(std::vector<ParamInfo> candidates, const Checkpoint& checkpoint,
                                    const OptimizerState& state, const std::string& dropped, ModelParams out) {
  const std::string manifest = "; write a manifest from the training script (README) and pass --manifest";
  GroupOrderInput in;
  size_t slot = 0;
  for (const std::vector<NodeId>& group : state.group_params) {
    for (NodeId id : group) {
      const Node& n = checkpoint.graph.at(id);
      if (n.kind != NodeKind::kInt || n.int_value != static_cast<int64_t>(slot)) {
        return InvalidArgumentError("param_groups does not number its parameters 0.." +
                                    std::to_string(state.param_count - 1) + " group by group as torch.optim does" +
                                    manifest);
      }
      ++slot;
    }
    in.group_sizes.push_back(group.size());
  }
  for (const ParamInfo& p : candidates) in.candidate_shapes.push_back(p.shape);
  in.index_shapes = StateShapes(checkpoint, state);
  const std::string setup = Count(state.group_params.size(), "param group") + " listing " +
                            std::to_string(state.param_count) + " of the model's " + dropped;
  GroupOrder found = AssignInGroupOrder(in);
  if (found.gave_up) {
    return InvalidArgumentError(setup + ": too many ways to place them to search" + manifest);
  }
  if (found.fits == 0) {
    return InvalidArgumentError(setup + ", but no assignment keeps each group in module order with every state "
                                "shape its parameter's: the groups were not built from model.parameters(), or this "
                                "state was saved for another model" + manifest);
  }
  if (found.fits > 1) {
    return InvalidArgumentError(setup + ": several assignments keep each group in module order with every state "
                                "shape its parameter's; these parameters could each be trained or frozen, or "
                                "swapped: " + NameList(candidates, found.ambiguous) + manifest);
  }
  std::vector<bool> used(candidates.size(), false);
  size_t index = 0;
  for (size_t g = 0; g < state.group_params.size(); ++g) {
    for (size_t k = 0; k < state.group_params[g].size(); ++k, ++index) {
      ParamInfo p = candidates[found.candidate_of[index]];
      used[found.candidate_of[index]] = true;
      p.group = static_cast<int64_t>(g);
      out.params.push_back(std::move(p));
    }
  }
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (!used[c]) out.frozen.push_back(candidates[c].name);
  }
  out.order = (state.group_params.size() == 1 ? std::string("module order")
                                               : "module order within each of " +
                                                     Count(state.group_params.size(), "param group")) +
              (out.frozen.empty() ? "" : ", " + Count(out.frozen.size(), "frozen parameter") + " in none") +
              ": the one assignment that fits every state shape (" + dropped + ")";
  return out;
}

}  // namespace optstate
