#include "optim/optimizer_family.h"

#include <set>

#include "pickle/graph_walk.h"

namespace optstate {
namespace {

// Every field name in the state's entries (per-view dicts included).
std::set<std::string> StateFields(const ObjectGraph& g, const OptimizerState& state) {
  std::set<std::string> out;
  auto add = [&](NodeId dict) {
    if (g.at(dict).kind != NodeKind::kDict) return;
    for (auto [k, v] : g.at(dict).entries) {
      if (g.at(k).kind == NodeKind::kStr) out.insert(g.at(k).text);
    }
  };
  for (const StateKey& key : state.keys) {
    if (g.at(key.value).kind != NodeKind::kDict) continue;
    if (!key.nested_views) {
      add(key.value);
      continue;
    }
    for (auto [view, d] : g.at(key.value).entries) add(d);
  }
  return out;
}

std::set<std::string> GroupKeys(const ObjectGraph& g, const OptimizerState& state) {
  std::set<std::string> out;
  NodeId groups = DictLookup(g, state.node, "param_groups");
  if (groups == kNoNode || g.at(groups).kind != NodeKind::kList || g.at(groups).items.empty()) return out;
  NodeId first = g.at(groups).items.front();
  if (g.at(first).kind != NodeKind::kDict) return out;
  for (auto [k, v] : g.at(first).entries) {
    if (g.at(k).kind == NodeKind::kStr) out.insert(g.at(k).text);
  }
  return out;
}

}  // namespace

OptimizerFamily RecogniseOptimizer(const Checkpoint& checkpoint, const OptimizerState& state) {
  const ObjectGraph& g = checkpoint.graph;
  const std::set<std::string> fields = StateFields(g, state);
  const std::set<std::string> groups = GroupKeys(g, state);
  auto has = [](const std::set<std::string>& s, const char* name) { return s.count(name) > 0; };
  if (has(fields, "update_by_adam_exp_avg_0")) return {"heavyball3-adamw", "state fields update_by_adam_*"};
  if (has(fields, "exp_avg") && has(fields, "exp_avg_sq")) {
    // torch 1.13 is the one version whose two classes save different group
    // keys; from 2.0 on they are the same, and only weight decay's coupling
    // differs, which the file does not record.
    if (has(groups, "betas") && !has(groups, "fused") && !has(groups, "differentiable")) {
      return {"adamw", "exp_avg, exp_avg_sq; group keys of torch 1.13's AdamW (no fused, no differentiable)"};
    }
    if (has(groups, "betas") && has(groups, "fused") && !has(groups, "decoupled_weight_decay") &&
        has(groups, "differentiable") && !has(groups, "initial_accumulator_value")) {
      return {"adam-or-adamw", "exp_avg, exp_avg_sq and the group keys Adam and AdamW share since torch 2.0"};
    }
    return {"adam-or-adamw", "exp_avg, exp_avg_sq"};
  }
  if (has(fields, "sum") && (has(groups, "lr_decay") || has(groups, "initial_accumulator_value") || groups.empty())) {
    return {"adagrad", "state field sum; group keys lr_decay, initial_accumulator_value"};
  }
  if (has(fields, "square_avg")) return {"rmsprop", "state field square_avg"};
  if (has(fields, "momentum_buffer") || (has(groups, "nesterov") && has(groups, "dampening"))) {
    return {"sgd", "state field momentum_buffer; group keys momentum, dampening, nesterov"};
  }
  std::string names;
  for (const std::string& f : fields) names += (names.empty() ? "" : ", ") + f;
  return {"unknown", fields.empty() ? "no state fields" : "state fields " + names};
}

}  // namespace optstate
