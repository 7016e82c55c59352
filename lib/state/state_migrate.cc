#include "optstate/state_migrate.h"

#include <set>
#include <span>

#include "torch/graph_builder.h"

namespace optstate {
namespace {

// What HeavyBall 3.2's AdamW chain (one transform, update_by_adam, index 0)
// calls each era's AdamW-family state fields.
struct FieldName {
  const char* legacy;
  const char* heavyball3;
};
// 0.x ForeachAdamW: plain names, the counter in the group (`k`).
constexpr FieldName kAdamFields0[] = {{"exp_avg", "update_by_adam_exp_avg_0"},
                                      {"exp_avg_sq", "update_by_adam_exp_avg_sq_0"}};
// 1.x (chainable, before transform indices): names by transform, the counter
// as `step` in the entries (the first only with foreach=True; all without).
constexpr FieldName kAdamFields1[] = {{"update_by_adam_exp_avg", "update_by_adam_exp_avg_0"},
                                      {"update_by_adam_exp_avg_sq", "update_by_adam_exp_avg_sq_0"}};

// Group fields that mark an algorithm other than AdamW (SOAP, PSGD, schedule-free).
constexpr const char* kOtherAlgorithmFields[] = {"shampoo_beta", "max_precond_dim", "precondition_frequency",
                                                 "preconditioner_update_probability", "r", "weight_lr_power"};

// 0.x AdamW group fields with no 3.x counterpart: schedule-free bookkeeping
// the AdamW step never read, and the counter, which moves into the state.
constexpr const char* kLegacyOnlyFields[] = {"k", "train_mode", "weight_sum", "lr_max", "foreach", "params"};

// 1.x group entries 3.x neither saves nor reads: the defaults' sentinel
// objects and the optimizer class itself (pickled: weights_only refuses them).
constexpr const char* kPickledSentinels[] = {"gradient_clipping", "update_clipping", "palm", "__class__"};

std::string Str(const ObjectGraph& g, NodeId id) {
  return id != kNoNode && g.at(id).kind == NodeKind::kStr ? g.at(id).text : std::string();
}

class Migrator {
 public:
  Migrator(const Checkpoint& cp, const OptimizerState& st, const std::vector<ParamInfo>& params,
           const MatchReport& m, const MigrateOptions& o)
      : cp_(cp), st_(st), params_(params), m_(m), o_(o) {}

  StatusOr<MigrateResult> Run() {
    OPTSTATE_RETURN_IF_ERROR(Recognise());
    RemapOptions ro;
    ro.to = KeyTarget::kIndex;
    ro.on_collision = o_.on_collision;
    OPTSTATE_ASSIGN_OR_RETURN(r_.remap, RemapState(cp_, st_, params_, m_, ro));
    r_.checkpoint = std::move(r_.remap.checkpoint);
    r_.remap.checkpoint = Checkpoint();
    OPTSTATE_RETURN_IF_ERROR(Steps());
    GraphBuilder b(r_.checkpoint);
    OPTSTATE_RETURN_IF_ERROR(RelayoutState(b));
    RewriteGroups(b);
    AddHeavyballEntry(b);
    for (const FieldName& f : fields_) r_.renamed.push_back(std::string(f.legacy) + " -> " + f.heavyball3);
    return std::move(r_);
  }

 private:
  const ObjectGraph& in() const { return cp_.graph; }

  // AdamW family: every entry a dict of exp_avg / exp_avg_sq, groups without
  // another algorithm's hyperparameters.
  Status Recognise() {
    NodeId groups = DictLookup(in(), st_.node, "param_groups");
    for (NodeId group : in().at(groups).items) {
      for (const char* f : kOtherAlgorithmFields) {
        if (DictLookup(in(), group, f) != kNoNode) {
          return UnsupportedError(std::string("param_groups have '") + f +
                                  "': not HeavyBall's AdamW; only the AdamW family (ForeachAdamW) is migrated so far");
        }
      }
      if (DictLookup(in(), group, "betas") == kNoNode) {
        return UnsupportedError("param_groups have no 'betas': not an AdamW-family optimizer");
      }
    }
    bool era0 = false, era1 = false;
    for (const StateKey& k : st_.keys) {
      if (k.nested_views) {
        return UnsupportedError("state entry " + k.text + " is nested per view, as HeavyBall 2.x and 3.x save it: "
                                "a 3.x file needs no migration, and 2.x names are not migrated yet");
      }
      const Node& v = in().at(k.value);
      if (v.kind != NodeKind::kDict) return UnsupportedError("state entry " + k.text + " is not a dict");
      for (auto [name, value] : v.entries) {
        std::string field = Str(in(), name);
        bool in0 = false, in1 = field == "step";
        for (const FieldName& f : kAdamFields0) in0 |= field == f.legacy;
        for (const FieldName& f : kAdamFields1) in1 |= field == f.legacy;
        era0 |= in0;
        era1 |= in1 && field != "step";
        if (!in0 && !in1) {
          return UnsupportedError("state entry " + k.text + " holds '" + (field.empty() ? "(a non-str key)" : field) +
                                  "', which HeavyBall's AdamW (0.x or 1.x) does not keep; nothing was converted");
        }
        if (field == "step" && st_.scheme != KeyKind::kParamView) {
          return UnsupportedError("state entry " + k.text + " has a per-parameter 'step' beside exp_avg: "
                                  "torch.optim's layout, not HeavyBall 0.x's; nothing was converted");
        }
      }
    }
    if (era0 && era1) return UnsupportedError("state mixes HeavyBall 0.x and 1.x AdamW names");
    fields_ = era1 ? std::span<const FieldName>(kAdamFields1) : std::span<const FieldName>(kAdamFields0);
    counter_in_entries_ = era1;
    r_.algorithm = era1 ? "AdamW (HeavyBall 1.x ForeachAdamW: update_by_adam_exp_avg(_sq), step in the entries)"
                        : "AdamW (HeavyBall 0.x ForeachAdamW: exp_avg, exp_avg_sq, group counter k)";
    return Status();
  }

  // 0.x AdamW counts steps in the group's `k`; with foreach=False the saved
  // groups keep k = 0 while per-parameter copies (not saved) held the count.
  Status Steps() {
    if (counter_in_entries_) return StepsFromEntries();
    NodeId groups = DictLookup(in(), st_.node, "param_groups");
    std::optional<int64_t> k;
    for (NodeId group : in().at(groups).items) {
      NodeId kv = DictLookup(in(), group, "k");
      if (kv == kNoNode || in().at(kv).kind != NodeKind::kInt) continue;
      if (k && *k != in().at(kv).int_value) {
        return InvalidArgumentError("param_groups disagree on the step counter k (" + std::to_string(*k) + " and " +
                                    std::to_string(in().at(kv).int_value) + ")");
      }
      k = in().at(kv).int_value;
    }
    bool has_state = !st_.keys.empty();
    if (o_.steps) {
      r_.steps = *o_.steps;
      r_.steps_from = "--steps " + std::to_string(*o_.steps);
      if (k && *k > 0 && *k != *o_.steps) {
        r_.notes.push_back("the file's group counter k is " + std::to_string(*k) + "; --steps " +
                           std::to_string(*o_.steps) + " was used");
      }
      return Status();
    }
    if (k && (*k > 0 || !has_state)) {
      r_.steps = *k;
      r_.steps_from = "the param_groups' counter k = " + std::to_string(*k);
      return Status();
    }
    return InvalidArgumentError(
        "the file has state but its param_groups' step counter k is " + (k ? std::to_string(*k) : "absent") +
        " (HeavyBall 0.x with foreach=False kept the count in per-parameter group copies it never saved): give "
        "--steps N, the number of optimizer steps taken (your training loop's global step); the bias correction "
        "of every later step depends on it");
  }

  // 1.x: every entry that has `step` must agree (foreach=False keeps one per
  // parameter, foreach=True only on the first).
  Status StepsFromEntries() {
    std::optional<int64_t> found;
    std::string first;
    for (const StateKey& k : st_.keys) {
      NodeId sv = DictLookup(in(), k.value, "step");
      if (sv == kNoNode) continue;
      std::optional<double> v = NumberValue(cp_, ByteSpan(), sv);
      if (!v) return InvalidArgumentError("state entry " + k.text + ": its step is not a number");
      auto n = static_cast<int64_t>(*v);
      if (found && *found != n) {
        return InvalidArgumentError("state entries disagree on the step: " + std::to_string(*found) + " (" + first +
                                    ") and " + std::to_string(n) + " (" + k.text + ")");
      }
      if (!found) first = k.text;
      found = n;
    }
    if (o_.steps) {
      r_.steps = *o_.steps;
      r_.steps_from = "--steps " + std::to_string(*o_.steps);
      if (found && *found != *o_.steps) {
        r_.notes.push_back("the entries' step is " + std::to_string(*found) + "; --steps " + std::to_string(*o_.steps) +
                           " was used");
      }
      return Status();
    }
    if (!found && !st_.keys.empty()) {
      return InvalidArgumentError("no state entry has a step: give --steps N, the number of optimizer steps taken");
    }
    r_.steps = found.value_or(0);
    r_.steps_from = "the state entries' step = " + std::to_string(r_.steps) + " (first on " + first + ")";
    return Status();
  }

  // {index: {name: v}} -> {index: {0: {heavyball3 name: v, is_initialized: {0}}}};
  // split views ({index: {view: {...}}}, made by the remap) keep their views.
  Status RelayoutState(GraphBuilder& b) {
    ObjectGraph& g = r_.checkpoint.graph;
    NodeId state = DictLookup(g, st_.node, "state");
    std::vector<std::pair<NodeId, NodeId>> entries = g.at(state).entries;
    std::vector<std::pair<NodeId, NodeId>> out;
    for (auto [key, value] : entries) {
      NodeId per_view = b.Dict();
      std::vector<std::pair<NodeId, NodeId>> views;
      bool nested = !g.at(value).entries.empty() && g.at(g.at(value).entries[0].first).kind == NodeKind::kInt;
      if (nested) {
        views = g.at(value).entries;
      } else {
        views.emplace_back(b.Int(0), value);
      }
      for (auto [view, fields] : views) {
        NodeId d = b.Dict();
        std::vector<std::pair<NodeId, NodeId>> old = g.at(fields).entries;
        for (auto [name, v] : old) {
          for (const FieldName& f : fields_) {
            if (Str(g, name) == f.legacy) b.Set(d, f.heavyball3, v);
          }
        }
        NodeId initialized = b.New(NodeKind::kSet);
        NodeId zero = b.Int(0);
        g.at(initialized).items.push_back(zero);
        b.Set(d, "is_initialized", initialized);
        b.Set(per_view, view, d);
      }
      out.emplace_back(key, per_view);
    }
    // 3.x reads a group's counter from the first of its parameters whose view
    // dict has `step` (and writes it there after each step).
    std::set<int64_t> present, firsts;
    for (auto [key, v] : out) present.insert(g.at(key).int_value);
    size_t next = 0;
    for (const std::vector<NodeId>& group : st_.group_params) {
      for (size_t i = 0; i < group.size(); ++i) {
        if (present.count(static_cast<int64_t>(next + i))) {
          firsts.insert(static_cast<int64_t>(next + i));
          break;
        }
      }
      next += group.size();
    }
    for (auto [key, per_view] : out) {
      if (!firsts.count(g.at(key).int_value)) continue;
      NodeId view0 = g.at(per_view).entries.front().second;
      NodeId steps = b.Int(r_.steps);
      b.Set(view0, "step", steps);
    }
    g.at(state).entries = std::move(out);
    return Status();
  }

  NodeId Copied(NodeId group, const char* legacy, NodeId fallback) {
    NodeId v = DictLookup(r_.checkpoint.graph, group, legacy);
    return v != kNoNode ? v : fallback;
  }

  // Each group as 3.2's AdamW saves it: its own hyperparameters carried over,
  // 3.2's defaults for the rest, params as the remap numbered them.
  void RewriteGroups(GraphBuilder& b) {
    ObjectGraph& g = r_.checkpoint.graph;
    NodeId groups = DictLookup(g, st_.node, "param_groups");
    std::vector<NodeId> items = g.at(groups).items;
    std::set<std::string> left_out, sentinels;
    size_t next = 0;
    for (size_t gi = 0; gi < items.size(); ++gi) {
      NodeId old = items[gi];
      NodeId lr = Copied(old, "lr", b.Float(0.0025));
      uint64_t numel = 0;
      size_t count = gi < st_.group_params.size() ? st_.group_params[gi].size() : 0;
      for (size_t p = next; p < next + count && p < params_.size(); ++p) {
        uint64_t n = 1;
        for (int64_t d : params_[p].shape) n *= static_cast<uint64_t>(d);
        numel += n;
      }
      next += count;
      NodeId foreach = DictLookup(g, old, "foreach");
      NodeId d = b.Dict();
      b.Set(d, "lr", lr);
      b.Set(d, "betas", Copied(old, "betas", kNoNode));
      b.Set(d, "eps", Copied(old, "eps", b.Float(1e-8)));
      b.Set(d, "weight_decay", Copied(old, "weight_decay", b.Int(0)));
      b.Set(d, "warmup_steps", Copied(old, "warmup_steps", b.Int(0)));
      b.Set(d, "storage_dtype", Copied(old, "storage_dtype", b.Str("float32")));
      b.Set(d, "mars", Copied(old, "mars", b.Bool(false)));
      b.Set(d, "caution", Copied(old, "caution", b.Bool(false)));
      b.Set(d, "mars_gamma", Copied(old, "mars_gamma", b.Float(0.0025)));
      b.Set(d, "cautious_weight_decay", b.Bool(false));
      b.Set(d, "ecc", b.New(NodeKind::kNone));
      b.Set(d, "param_ecc", b.New(NodeKind::kNone));
      b.Set(d, "beta2_scale", Copied(old, "beta2_scale", b.Float(0.8)));
      b.Set(d, "multi_tensor", foreach != kNoNode ? foreach : b.Bool(true));
      b.Set(d, "param_count", b.Int(static_cast<int64_t>(numel)));
      b.Set(d, "base_lr", lr);
      b.Set(d, "is_preconditioning", b.Bool(false));
      b.Set(d, "prev_lr", lr);
      b.Set(d, "step", b.New(NodeKind::kNone));
      b.Set(d, "params", DictLookup(g, old, "params"));
      std::vector<std::pair<NodeId, NodeId>> old_entries = g.at(old).entries;
      for (auto [k, v] : old_entries) {
        std::string name = Str(g, k);
        bool kept = DictLookup(g, d, name) != kNoNode;
        for (const char* f : kLegacyOnlyFields) kept |= name == f;
        bool sentinel = false;
        for (const char* f : kPickledSentinels) sentinel |= name == f;
        if (sentinel) sentinels.insert(name);
        if (!kept && !sentinel) left_out.insert(name);
      }
      g.at(groups).items[gi] = d;
    }
    r_.notes.push_back(std::string("param_groups: lr, betas, eps, weight_decay, warmup_steps, storage_dtype, mars, "
                                   "caution, mars_gamma") +
                       (counter_in_entries_ ? ", beta2_scale" : "") + " carried over, foreach as multi_tensor; " +
                       (counter_in_entries_ ? "the entries' step became the first parameter's (where 3.x reads it)"
                                            : "the counter k became the state's step; train_mode, weight_sum and "
                                              "lr_max (schedule-free bookkeeping AdamW never read) left out") +
                       "; the other fields are HeavyBall 3.2's defaults");
    if (!sentinels.empty()) {
      std::string list;
      for (const std::string& f : sentinels) list += (list.empty() ? "" : ", ") + f;
      r_.notes.push_back("param_groups: " + list + " (pickled default sentinels and the optimizer class, which "
                         "torch.load(weights_only=True) refuses and 3.x does not save) left out");
    }
    for (const std::string& f : left_out) {
      r_.notes.push_back("param_groups field '" + f + "' has no HeavyBall 3.2 AdamW counterpart and was left out");
    }
  }

  // What HeavyBall 3.x's StatefulOptimizer stores beside state and groups, for
  // an AdamW that never used its preconditioning machinery.
  void AddHeavyballEntry(GraphBuilder& b) {
    ObjectGraph& g = r_.checkpoint.graph;
    NodeId d = b.Dict();
    b.Set(d, "inner_group", b.Dict());
    b.Set(d, "use_ema", b.Bool(false));
    b.Set(d, "ema_decay", b.Float(0.001));
    b.Set(d, "compile_step", b.Bool(false));
    b.Set(d, "hessian_approx", b.Bool(false));
    b.Set(d, "fallback_to_finite_differences", b.Bool(true));
    b.Set(d, "_fallback_enabled", b.Bool(false));
    b.Set(d, "hvp_interval", b.Int(1));
    NodeId key = b.Str("heavyball");
    g.at(st_.node).entries.emplace_back(key, d);
    r_.notes.push_back("the top-level 'heavyball' entry is written without 'precond_schedule' (3.x pickles that "
                       "callable; without it 3.x keeps its constructor's)");
  }

  const Checkpoint& cp_;
  const OptimizerState& st_;
  const std::vector<ParamInfo>& params_;
  const MatchReport& m_;
  const MigrateOptions& o_;
  MigrateResult r_;
  std::span<const FieldName> fields_;
  bool counter_in_entries_ = false;
};

}  // namespace

StatusOr<MigrateResult> MigrateState(const Checkpoint& checkpoint, const OptimizerState& state,
                                     const std::vector<ParamInfo>& params, const MatchReport& match,
                                     const MigrateOptions& options) {
  return Migrator(checkpoint, state, params, match, options).Run();
}

}  // namespace optstate
