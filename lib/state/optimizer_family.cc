#include "state/optimizer_family.h"

#include <algorithm>
#include <initializer_list>
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

struct FieldEntry {
  std::string_view family, field;
  FieldLayout layout;
};

// Each known family's state fields, as torch 1.13 and 2.6 save them.
constexpr FieldLayout E = FieldLayout::kPerElement, S = FieldLayout::kScalar, N = FieldLayout::kNotATensor;
constexpr FieldEntry kFields[] = {
    {"adam", "step", S}, {"adam", "exp_avg", E}, {"adam", "exp_avg_sq", E}, {"adam", "max_exp_avg_sq", E},
    {"adamw", "step", S}, {"adamw", "exp_avg", E}, {"adamw", "exp_avg_sq", E}, {"adamw", "max_exp_avg_sq", E},
    {"adam-or-adamw", "step", S}, {"adam-or-adamw", "exp_avg", E}, {"adam-or-adamw", "exp_avg_sq", E},
    {"adam-or-adamw", "max_exp_avg_sq", E},
    {"nadam", "step", S}, {"nadam", "mu_product", S}, {"nadam", "exp_avg", E}, {"nadam", "exp_avg_sq", E},
    {"radam", "step", S}, {"radam", "exp_avg", E}, {"radam", "exp_avg_sq", E},
    {"sparseadam", "step", S}, {"sparseadam", "exp_avg", E}, {"sparseadam", "exp_avg_sq", E},
    {"adamax", "step", S}, {"adamax", "exp_avg", E}, {"adamax", "exp_inf", E},
    {"adadelta", "step", S}, {"adadelta", "square_avg", E}, {"adadelta", "acc_delta", E},
    {"adagrad", "step", S}, {"adagrad", "sum", E},
    {"rmsprop", "step", S}, {"rmsprop", "square_avg", E}, {"rmsprop", "momentum_buffer", E},
    {"rmsprop", "grad_avg", E},
    {"sgd", "momentum_buffer", E},
    {"asgd", "step", S}, {"asgd", "eta", S}, {"asgd", "mu", S}, {"asgd", "ax", E},
    {"rprop", "step", S}, {"rprop", "prev", E}, {"rprop", "step_size", E},
    {"adafactor", "step", S}, {"adafactor", "row_var", FieldLayout::kFactoredRow},
    {"adafactor", "col_var", FieldLayout::kFactoredCol}, {"adafactor", "variance", E},
    {"lbfgs", "d", FieldLayout::kFlatOverAll}, {"lbfgs", "prev_flat_grad", FieldLayout::kFlatOverAll},
    {"lbfgs", "H_diag", S}, {"lbfgs", "t", N}, {"lbfgs", "func_evals", N}, {"lbfgs", "n_iter", N},
    {"lbfgs", "old_dirs", N}, {"lbfgs", "old_stps", N}, {"lbfgs", "ro", N}, {"lbfgs", "al", N},
    {"lbfgs", "prev_loss", N},
    {"heavyball3-adamw", "update_by_adam_exp_avg_0", E}, {"heavyball3-adamw", "update_by_adam_exp_avg_sq_0", E},
};

// The group's keys are `allowed` (betas among them) plus what any group may
// carry: params, a scheduler's initial_lr, torch 2.6's param_names.
bool KeysWithin(const std::set<std::string>& groups, std::initializer_list<std::string_view> allowed) {
  if (!groups.count("betas")) return false;
  for (const std::string& k : groups) {
    if (k == "params" || k == "initial_lr" || k == "param_names") continue;
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) return false;
  }
  return true;
}

}  // namespace

FieldLayout LayoutOfField(std::string_view family, std::string_view field) {
  for (const FieldEntry& e : kFields) {
    if (e.family == family && e.field == field) return e.layout;
  }
  return FieldLayout::kUnknown;
}

bool KeepsOneEntryForAllParams(std::string_view family) { return family == "lbfgs"; }

bool CreatesStateUpFront(std::string_view family) { return family == "adagrad"; }

OptimizerFamily RecogniseOptimizer(const Checkpoint& checkpoint, const OptimizerState& state) {
  const ObjectGraph& g = checkpoint.graph;
  const std::set<std::string> fields = StateFields(g, state);
  const std::set<std::string> groups = GroupKeys(g, state);
  auto has = [](const std::set<std::string>& s, const char* name) { return s.count(name) > 0; };
  if (has(fields, "update_by_adam_exp_avg_0")) return {"heavyball3-adamw", "state fields update_by_adam_*"};
  // The classes whose group keys are theirs alone come first: they decide
  // even when no parameter has state yet.
  if (has(groups, "history_size") && has(groups, "max_iter")) return {"lbfgs", "group keys history_size, max_iter"};
  if (has(groups, "beta2_decay") || has(fields, "row_var")) {
    return {"adafactor", "group key beta2_decay; state fields row_var/col_var or variance"};
  }
  if (has(groups, "momentum_decay") || has(fields, "mu_product")) {
    return {"nadam", "group key momentum_decay; state field mu_product"};
  }
  if ((has(groups, "lambd") && has(groups, "t0")) || (has(fields, "eta") && has(fields, "ax"))) {
    return {"asgd", "group keys lambd, t0; state fields eta, mu, ax"};
  }
  if ((has(groups, "etas") && has(groups, "step_sizes")) || has(fields, "step_size")) {
    return {"rprop", "group keys etas, step_sizes; state fields prev, step_size"};
  }
  if (has(fields, "acc_delta") || (has(groups, "rho") && !has(groups, "alpha"))) {
    return {"adadelta", "state fields square_avg, acc_delta; group key rho"};
  }
  if (has(fields, "exp_inf")) return {"adamax", "state fields exp_avg, exp_inf"};
  // Before the first step there are no fields; Adam's and AdamW's group keys
  // (betas with amsgrad) are theirs alone. (RAdam's, Adamax's and SparseAdam's
  // can be told apart only by their state.)
  const bool adam_groups_before_any_step = fields.empty() && has(groups, "betas") && has(groups, "amsgrad");
  if ((has(fields, "exp_avg") && has(fields, "exp_avg_sq")) || adam_groups_before_any_step) {
    // SparseAdam and RAdam save Adam's fields; their group keys, and nothing
    // else's (HeavyBall's AdamW groups lack amsgrad too), tell them apart.
    if (KeysWithin(groups, {"lr", "betas", "eps", "maximize"})) {
      return {"sparseadam", "exp_avg, exp_avg_sq; SparseAdam's group keys (no weight_decay)"};
    }
    if (KeysWithin(groups, {"lr", "betas", "eps", "weight_decay", "foreach", "capturable", "differentiable",
                            "maximize", "decoupled_weight_decay"})) {
      return {"radam", "exp_avg, exp_avg_sq; RAdam's group keys (no amsgrad)"};
    }
    // torch 1.13 is the one version whose Adam and AdamW save different group
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
