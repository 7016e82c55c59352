#include "optstate/state_migrate.h"

#include <map>
#include <set>
#include <span>

#include "state/migrate_layout.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

// What HeavyBall 3.2 calls each era's state fields. Its names carry the index
// of the transform that owns them: AdamW's chain is one transform
// (update_by_adam, 0); SOAP's keeps the moments in transform 2 and the
// preconditioner in 3, and marks 0, 2 and 3 initialised.
constexpr FieldName kAdamFields0[] = {{"exp_avg", "update_by_adam_exp_avg_0"},
                                      {"exp_avg_sq", "update_by_adam_exp_avg_sq_0"}};
constexpr FieldName kAdamFields1[] = {{"update_by_adam_exp_avg", "update_by_adam_exp_avg_0"},
                                      {"update_by_adam_exp_avg_sq", "update_by_adam_exp_avg_sq_0"}};
constexpr FieldName kSoapFields0[] = {{"exp_avg", "scale_by_soap_exp_avg_2"},
                                      {"exp_avg_sq", "scale_by_soap_exp_avg_sq_2"},
                                      {"Q", "scale_by_soap_Q_3"},
                                      {"GG", "scale_by_soap_GG_3"}};
// 2.x: nested per view like 3.x; AdamW's names are 3.x's, SOAP's transforms
// were numbered 0 and 1.
constexpr FieldName kAdamFields2[] = {{"update_by_adam_exp_avg_0", "update_by_adam_exp_avg_0"},
                                      {"update_by_adam_exp_avg_sq_0", "update_by_adam_exp_avg_sq_0"}};
constexpr FieldName kSoapFields2[] = {{"scale_by_soap_exp_avg_0", "scale_by_soap_exp_avg_2"},
                                      {"scale_by_soap_exp_avg_sq_0", "scale_by_soap_exp_avg_sq_2"},
                                      {"scale_by_soap_Q_1", "scale_by_soap_Q_3"},
                                      {"scale_by_soap_GG_1", "scale_by_soap_GG_3"}};
constexpr FieldName kSoapFields1[] = {{"scale_by_soap_exp_avg", "scale_by_soap_exp_avg_2"},
                                      {"scale_by_soap_exp_avg_sq", "scale_by_soap_exp_avg_sq_2"},
                                      {"Q", "scale_by_soap_Q_3"},
                                      {"GG", "scale_by_soap_GG_3"}};
constexpr int64_t kAdamInitialized[] = {0};
constexpr int64_t kSoapInitialized[] = {0, 2, 3};

// Group fields of algorithms not migrated, with what to call them.
struct OtherAlgorithm {
  const char* field;
  const char* name;
};
constexpr OtherAlgorithm kOtherAlgorithms[] = {
    {"preconditioner_update_probability", "PSGD (Kron)"},
    {"precond_lr", "PSGD"},
    {"r", "schedule-free"},
    {"weight_lr_power", "schedule-free"},
};
// ForeachSOAP 0.x's own fields; a group with others is a variant (PaLM,
// precondition schedule, schedule-free) whose update differs.
constexpr const char* kSoap0GroupFields[] = {
    "lr", "betas", "shampoo_beta", "eps", "weight_decay", "precondition_frequency", "max_precond_dim",
    "merge_dims", "precondition_1d", "normalize_grads", "correct_bias", "warmup_steps", "split", "mars",
    "caution", "mars_gamma", "foreach", "params"};
// 1.x ForeachSOAP adds its chainable base's fields and sentinels.
constexpr const char* kSoap1ExtraGroupFields[] = {
    "data_format", "palm", "beta2_scale", "use_precond_schedule", "gradient_clipping", "update_clipping",
    "__class__", "base_lr", "step", "prev_lr"};
// 1.6 moved the precondition schedule out of the groups (precondition_frequency
// and precond_scheduler are popped into the optimizer; neither is saved) and
// added a storage dtype and the flag of the step just taken.
constexpr const char* kSoap16ExtraGroupFields[] = {"storage_dtype", "stochastic_schedule", "is_preconditioning"};
// ... and 2.x ForeachSOAP's, with the bookkeeping its chainable base adds.
constexpr const char* kSoap2GroupFields[] = {
    "caution", "lr", "warmup_steps", "weight_decay", "eps", "betas", "shampoo_beta", "max_precond_dim",
    "merge_dims", "precondition_1d", "normalize_grads", "correct_bias", "split", "foreach", "mars", "mars_gamma",
    "beta2_scale", "use_precond_schedule", "storage_dtype", "stochastic_schedule", "precond_grad_accum", "ecc",
    "param_ecc", "__class__", "param_count", "is_preconditioning", "base_lr", "step", "prev_lr", "params",
    "palm", "gradient_clipping", "update_clipping"};

// The dict of fields of a state entry: view 0 of a per-view nested entry.
NodeId FieldsOf(const ObjectGraph& g, const StateKey& k) {
  return k.nested_views ? g.at(k.value).entries.front().second : k.value;
}

std::string Str(const ObjectGraph& g, NodeId id) {
  return id != kNoNode && g.at(id).kind == NodeKind::kStr ? g.at(id).text.str() : std::string();
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
    if (already_3x_) {
      // Nothing to lay out: --to heavyball3 writes it as it is (the remap
      // only checked that every key is a parameter's), --to torch converts it.
      OPTSTATE_RETURN_IF_ERROR(StepsFromEntries());
      r_.notes.push_back("the input is HeavyBall 3.x's own layout: written unchanged as 3.x saves it");
      return std::move(r_);
    }
    OPTSTATE_RETURN_IF_ERROR(family_ == LegacyFamily::kAdamW0 ? StepsFromGroupCounter() : StepsFromEntries());
    GraphBuilder b(r_.checkpoint);
    OPTSTATE_RETURN_IF_ERROR(RelayoutState(b));
    ObjectGraph& g = r_.checkpoint.graph;
    RewriteGroupsAs3x(family_, st_, params_, st_.node, b, g, r_.notes);
    AddHeavyballEntry(family_, st_.node, Schedule(), b, g, r_.notes);
    if (!frequency_note_.empty()) r_.notes.push_back(frequency_note_);
    if (DictLookup(in(), DictLookup(in(), st_.node, "heavyball"), "precond_rng") != kNoNode) {
      r_.notes.push_back("heavyball entry: the file's precond_rng (a pickled random.Random, which 3.x ignores on "
                         "load) is not carried over");
    }
    for (const FieldName& f : fields_) {
      if (std::string(f.legacy) == f.heavyball3) continue;
      r_.renamed.push_back(std::string(f.legacy) + " -> " + f.heavyball3 +
                           (family_ == LegacyFamily::kSoap0 && std::string(f.legacy) == "exp_avg"
                                ? " (rotated into Q's eigenbasis, where 3.x keeps it)"
                                : ""));
    }
    return std::move(r_);
  }

 private:
  const ObjectGraph& in() const { return cp_.graph; }

  Status Recognise() {
    NodeId groups = DictLookup(in(), st_.node, "param_groups");
    bool soap = false;
    for (NodeId group : in().at(groups).items) {
      for (const OtherAlgorithm& a : kOtherAlgorithms) {
        if (DictLookup(in(), group, a.field) != kNoNode) {
          return UnsupportedError(std::string("param_groups have '") + a.field + "': a " + a.name +
                                  " optimizer, which migrate does not convert yet (it converts HeavyBall's AdamW "
                                  "family and 0.x ForeachSOAP); nothing was written");
        }
      }
      if (DictLookup(in(), group, "betas") == kNoNode) {
        return UnsupportedError("param_groups have no 'betas': not an AdamW- or SOAP-family optimizer");
      }
      soap |= DictLookup(in(), group, "shampoo_beta") != kNoNode;
    }
    bool nested = false;
    for (const StateKey& k : st_.keys) {
      if (in().at(k.value).kind != NodeKind::kDict) {
        return UnsupportedError("state entry " + k.text + " is not a dict");
      }
      nested |= k.nested_views;
    }
    if (nested) {
      for (NodeId group : in().at(groups).items) {
        if (DictLookup(in(), group, "multi_tensor") != kNoNode) {
          already_3x_ = true;
          family_ = soap ? LegacyFamily::kSoap2 : LegacyFamily::kAdamW2;
          r_.algorithm = soap ? "SOAP (HeavyBall 3.x: already this layout)" : "AdamW (HeavyBall 3.x: already this layout)";
          return Status();
        }
      }
      return RecogniseEra2(soap);
    }
    return soap ? RecogniseSoap(groups) : RecogniseAdamW();
  }

  // 2.x: {index: {0: {...}}} with transform-indexed names; the counter `step`
  // in the first parameter's view, counted as 3.x counts it.
  Status RecogniseEra2(bool soap) {
    std::span<const FieldName> fields = soap ? std::span<const FieldName>(kSoapFields2) : kAdamFields2;
    for (const StateKey& k : st_.keys) {
      if (!k.nested_views) return UnsupportedError("state mixes per-view and flat entries (" + k.text + ")");
      for (auto [name, value] : in().at(FieldsOf(in(), k)).entries) {
        std::string field = Str(in(), name);
        bool known = field == "step" || field == "is_initialized";
        for (const FieldName& f : fields) known |= field == f.legacy;
        if (!known) {
          return UnsupportedError("state entry " + k.text + " holds '" + (field.empty() ? "(a non-str key)" : field) +
                                  "', which HeavyBall 2.x's " + (soap ? "ForeachSOAP" : "ForeachAdamW") +
                                  " does not keep: another 2.x optimizer, not migrated yet; nothing was converted");
        }
      }
    }
    if (soap) {
      NodeId groups = DictLookup(in(), st_.node, "param_groups");
      for (NodeId group : in().at(groups).items) {
        for (auto [k, v] : in().at(group).entries) {
          std::string name = Str(in(), k);
          bool ok = false;
          for (const char* f : kSoap2GroupFields) ok |= name == f;
          if (!ok) {
            return UnsupportedError("param_groups have '" + name + "': a 2.x SOAP variant that migrate does not "
                                    "convert; nothing was written");
          }
        }
      }
    }
    family_ = soap ? LegacyFamily::kSoap2 : LegacyFamily::kAdamW2;
    fields_ = fields;
    initialized_ = soap ? std::span<const int64_t>(kSoapInitialized) : kAdamInitialized;
    r_.algorithm = soap ? "SOAP (HeavyBall 2.x ForeachSOAP: scale_by_soap_*_0/_1 per view, no batch dimension)"
                        : "AdamW (HeavyBall 2.x ForeachAdamW: 3.x's names per view, the class pickled in the groups)";
    return Status();
  }

  // AdamW family: every entry a dict of exp_avg / exp_avg_sq.
  Status RecogniseAdamW() {
    bool era0 = false, era1 = false;
    for (const StateKey& k : st_.keys) {
      for (auto [name, value] : in().at(k.value).entries) {
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
      }
    }
    if (era0 && era1) return UnsupportedError("state mixes HeavyBall 0.x and 1.x AdamW names");
    // 0.x kept no step in its entries: exp_avg beside a step is torch.optim's
    // own AdamW, which needs no migration. (1.x keeps one under both its key
    // schemes: (Parameter, i) in 1.0-1.5, indices from 1.6.)
    for (const StateKey& k : st_.keys) {
      if (era0 && DictLookup(in(), k.value, "step") != kNoNode) {
        return UnsupportedError("state entry " + k.text + " has a per-parameter 'step' beside exp_avg: "
                                "torch.optim's layout, not HeavyBall 0.x's; nothing was converted");
      }
    }
    family_ = era1 ? LegacyFamily::kAdamW1 : LegacyFamily::kAdamW0;
    fields_ = era1 ? std::span<const FieldName>(kAdamFields1) : std::span<const FieldName>(kAdamFields0);
    initialized_ = kAdamInitialized;
    r_.algorithm = era1 ? "AdamW (HeavyBall 1.x ForeachAdamW: update_by_adam_exp_avg(_sq), step in the entries)"
                        : "AdamW (HeavyBall 0.x ForeachAdamW: exp_avg, exp_avg_sq, group counter k)";
    return Status();
  }

  // 0.x and 1.x ForeachSOAP: their own group fields only, entries {step,
  // exp_avg, exp_avg_sq, Q, GG} (1.x: the moments named by transform), one
  // precondition frequency for the optimizer (3.x keeps one schedule).
  Status RecogniseSoap(NodeId groups) {
    bool era1 = false;
    for (const StateKey& k : st_.keys) {
      era1 |= DictLookup(in(), k.value, "scale_by_soap_exp_avg") != kNoNode;
    }
    std::optional<double> frequency;
    for (NodeId group : in().at(groups).items) {
      for (auto [k, v] : in().at(group).entries) {
        std::string name = Str(in(), k);
        bool known = false;
        for (const char* f : kSoap0GroupFields) known |= name == f;
        for (const char* f : kSoap1ExtraGroupFields) known |= era1 && name == f;
        for (const char* f : kSoap16ExtraGroupFields) known |= era1 && name == f;
        if (!known) {
          return UnsupportedError("param_groups have '" + name + "': a SOAP variant (PaLM, precondition schedule "
                                  "or a later HeavyBall's SOAP) that migrate does not convert; only ForeachSOAP is "
                                  "converted so far; nothing was written");
        }
      }
      if (era1 && DictLookup(in(), group, "storage_dtype") != kNoNode) {
        OPTSTATE_RETURN_IF_ERROR(Soap16Schedule(group, frequency));
        continue;
      }
      std::optional<double> f = NumberValue(cp_, ByteSpan(), DictLookup(in(), group, "precondition_frequency"));
      if (!f || *f < 1) return InvalidArgumentError("param_groups: precondition_frequency is missing or below 1");
      if (frequency && *frequency != *f) {
        return UnsupportedError("param_groups disagree on precondition_frequency, which HeavyBall 3.x keeps once "
                                "per optimizer; migrate the groups as separate optimizers");
      }
      frequency = f;
    }
    precondition_frequency_ = frequency.value_or(2);
    std::span<const FieldName> fields = era1 ? std::span<const FieldName>(kSoapFields1) : kSoapFields0;
    for (const StateKey& k : st_.keys) {
      for (auto [name, value] : in().at(k.value).entries) {
        std::string field = Str(in(), name);
        bool known = field == "step";
        for (const FieldName& f : fields) known |= field == f.legacy;
        if (!known) {
          return UnsupportedError("state entry " + k.text + " holds '" + (field.empty() ? "(a non-str key)" : field) +
                                  "', which HeavyBall " + (era1 ? "1.x" : "0.x") +
                                  "'s ForeachSOAP does not keep (or the file mixes eras); nothing was converted");
        }
      }
    }
    family_ = era1 ? LegacyFamily::kSoap1 : LegacyFamily::kSoap0;
    fields_ = fields;
    initialized_ = kSoapInitialized;
    r_.algorithm = era1 ? "SOAP (HeavyBall 1.x ForeachSOAP: scale_by_soap_exp_avg(_sq) in the eigenbasis, Q, GG; "
                          "step in the entries)"
                        : "SOAP (HeavyBall 0.x ForeachSOAP: step, exp_avg unprojected, exp_avg_sq, Q, GG per parameter)";
    return Status();
  }

  // 1.6's groups keep no precondition_frequency: HeavyBall popped it into the
  // optimizer (1/f per step, a sum whose integer part growing recomputes Q:
  // 3.x's own schedule). Without --precondition-frequency the constructor's
  // default 2 is taken, and said. A schedule function (use_precond_schedule)
  // or a random one (stochastic_schedule) has no position to carry.
  Status Soap16Schedule(NodeId group, std::optional<double>& frequency) {
    auto flag = [&](const char* name) {
      NodeId v = DictLookup(in(), group, name);
      return v != kNoNode && in().at(v).kind == NodeKind::kBool && in().at(v).bool_value;
    };
    if (flag("use_precond_schedule")) {
      schedule_unknown_ = "1.6 ran a precondition schedule function (use_precond_schedule=True), which it never "
                          "saved: 3.x keeps its constructor's schedule";
    } else if (flag("stochastic_schedule")) {
      schedule_unknown_ = "1.6 drew its precondition steps at random (stochastic_schedule=True) from a generator it "
                          "never saved: 3.x keeps its constructor's schedule";
    }
    const double f = o_.precondition_frequency ? static_cast<double>(*o_.precondition_frequency) : 2.0;
    if (!o_.precondition_frequency && schedule_unknown_.empty() && frequency_note_.empty()) {
      frequency_note_ = "HeavyBall 1.6 does not save precondition_frequency: its default 2 was taken (give "
                        "--precondition-frequency N if the run set another; only when Q is recomputed depends on it)";
    }
    frequency = f;
    return Status();
  }

  // SOAP's precondition schedule for 3.x. 0.x recomputed Q when its
  // per-parameter step (one behind the optimizer's) was a multiple of f; 3.x
  // does when floor(cumulative_prob) grows, adding 1/f per step, so starting
  // the sum at (steps - 1) / f keeps 0.x's steps. 2.x already kept 3.x's
  // schedule: its pickled number and accumulator carry over.
  PreconditionSchedule Schedule() const {
    PreconditionSchedule s;
    if (!schedule_unknown_.empty()) {
      s.note = schedule_unknown_;
      return s;
    }
    if (family_ == LegacyFamily::kSoap0 || family_ == LegacyFamily::kSoap1) {
      // 1.x recomputed Q when the optimizer's own step was a multiple of f:
      // 3.x's phase, a sum of steps / f.
      const double f = precondition_frequency_;
      const int64_t behind = family_ == LegacyFamily::kSoap0 ? 1 : 0;
      s.known = true;
      s.probability = 1.0 / f;
      s.prob_step = r_.steps;
      s.cumulative = static_cast<double>(r_.steps - behind) / f;
      s.note = "precond_schedule = 1/" + std::to_string(static_cast<int64_t>(f)) + " (" +
               (behind ? "0.x" : "1.x") + "'s precondition_frequency, pickled as 3.x pickles it) and the "
               "schedule's position after " + std::to_string(r_.steps) + " steps, so 3.x recomputes Q on the steps " +
               (behind ? "0.x" : "1.x") + " would have";
      return s;
    }
    if (family_ != LegacyFamily::kSoap2) return s;
    const ObjectGraph& g = in();
    NodeId hb = DictLookup(g, st_.node, "heavyball");
    NodeId bytes = DictLookup(g, hb, "precond_schedule");
    std::optional<std::optional<double>> p;
    if (bytes != kNoNode && g.at(bytes).kind == NodeKind::kBytes) p = PickledNumber(g.at(bytes).text);
    if (!p || !*p) {
      s.note = bytes == kNoNode ? "the file has none"
               : !p ? "the file's is a pickle of something other than a number (a schedule function, "
                      "use_precond_schedule=True), which migrate never copies: 3.x would unpickle it"
                    : "the file's is None";
      return s;
    }
    s.known = true;
    s.probability = **p;
    NodeId inner = DictLookup(g, hb, "inner_group");
    s.prob_step = static_cast<int64_t>(NumberValue(cp_, ByteSpan(), DictLookup(g, inner, "cumulative_prob_prob_step"))
                                           .value_or(static_cast<double>(r_.steps)));
    s.cumulative = NumberValue(cp_, ByteSpan(), DictLookup(g, inner, "cumulative_prob"))
                       .value_or(static_cast<double>(r_.steps) * s.probability);
    s.note = "precond_schedule and the schedule's position carried over from 2.x (" + std::to_string(s.probability) +
             " per step; cumulative_prob " + std::to_string(s.cumulative) + ")";
    return s;
  }

  void UseStepsOption(const std::optional<int64_t>& found, const std::string& what) {
    r_.steps = *o_.steps;
    r_.steps_from = "--steps " + std::to_string(*o_.steps);
    if (found && *found != *o_.steps) {
      r_.notes.push_back(what + " gives " + std::to_string(*found) + "; --steps " + std::to_string(*o_.steps) +
                         " was used");
    }
  }

  // 0.x AdamW counts steps in the group's `k`; with foreach=False the saved
  // groups keep k = 0 while per-parameter copies (not saved) held the count.
  Status StepsFromGroupCounter() {
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
    if (o_.steps) {
      UseStepsOption(k && *k > 0 ? k : std::nullopt, "the file's group counter k");
      return Status();
    }
    if (k && (*k > 0 || st_.keys.empty())) {
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

  // 1.x AdamW and 0.x SOAP keep `step` in the entries; every one that has it
  // must agree (1.x foreach=True keeps it on the first only). 0.x SOAP counts
  // from 0 on its first step, which only builds the preconditioner: 3.x counts
  // that step too, so it gets one more.
  Status StepsFromEntries() {
    std::optional<int64_t> found;
    std::string first;
    for (const StateKey& k : st_.keys) {
      NodeId sv = DictLookup(in(), FieldsOf(in(), k), "step");
      if (sv == kNoNode) continue;
      // 3.x keeps its counter as a 0-d int64 tensor: read from the input's bytes.
      std::optional<double> v = NumberValue(cp_, o_.input_bytes, sv);
      if (!v) return InvalidArgumentError("state entry " + k.text + ": its step is not a number");
      auto n = static_cast<int64_t>(*v);
      if (found && *found != n) {
        return InvalidArgumentError("state entries disagree on the step: " + std::to_string(*found) + " (" + first +
                                    ") and " + std::to_string(n) + " (" + k.text + ")");
      }
      if (!found) first = k.text;
      found = n;
    }
    const int64_t extra = family_ == LegacyFamily::kSoap0 ? 1 : 0;
    std::optional<int64_t> steps = found ? std::optional<int64_t>(*found + extra) : std::nullopt;
    if (o_.steps) {
      UseStepsOption(steps, "the entries' step");
      return Status();
    }
    if (!found && !st_.keys.empty()) {
      return InvalidArgumentError("no state entry has a step: give --steps N, the number of optimizer steps taken");
    }
    r_.steps = steps.value_or(0);
    r_.steps_from = "the state entries' step = " + std::to_string(found.value_or(0)) + " (first on " + first + ")" +
                    (extra ? " + 1: 0.x SOAP does not count its first step, which only builds the preconditioner"
                           : "");
    return Status();
  }

  // {index: {name: v}} -> {index: {0: {3.x name: v, is_initialized: {...}}}};
  // split views ({index: {view: {...}}}, made by the remap) keep their views.
  Status RelayoutState(GraphBuilder& b) {
    ObjectGraph& g = r_.checkpoint.graph;
    NodeId state = DictLookup(g, st_.node, "state");
    std::vector<std::pair<NodeId, NodeId>> entries = g.at(state).entries;
    std::vector<std::pair<NodeId, NodeId>> out;
    std::vector<std::string> fresh;
    for (auto [key, value] : entries) {
      NodeId per_view = b.Dict();
      std::vector<std::pair<NodeId, NodeId>> views;
      bool nested = !g.at(value).entries.empty() && g.at(g.at(value).entries[0].first).kind == NodeKind::kInt;
      if (nested) {
        views = g.at(value).entries;
      } else {
        views.emplace_back(b.Int(0), value);
      }
      // A reset SOAP entry (remap zero-fills it) would give 3.x a zero
      // eigenbasis, which projects every update to zero: such parameters get
      // no state instead, and 3.x builds their preconditioner on its next step.
      if (IsSoap(family_) && IsZeroFilled(DictLookup(g, views.front().second, fields_.front().legacy))) {
        fresh.push_back(std::to_string(g.at(key).int_value));
        continue;
      }
      for (auto [view, fields] : views) {
        NodeId d = b.Dict();
        NodeId initialized = b.New(NodeKind::kSet);
        for (int64_t i : initialized_) {
          NodeId n = b.Int(i);
          g.at(initialized).items.push_back(n);
        }
        b.Set(d, "is_initialized", initialized);
        std::string where = "state entry " + std::to_string(g.at(key).int_value) +
                            (nested ? " view " + std::to_string(g.at(view).int_value) : "");
        if (family_ == LegacyFamily::kSoap0 || family_ == LegacyFamily::kSoap1) {
          OPTSTATE_RETURN_IF_ERROR(tensors_.SoapView(b, fields, d, where, fields_, family_ == LegacyFamily::kSoap0));
        } else if (family_ == LegacyFamily::kSoap2) {
          OPTSTATE_RETURN_IF_ERROR(tensors_.Soap2View(b, fields, d, where, fields_));
        } else {
          std::vector<std::pair<NodeId, NodeId>> old = g.at(fields).entries;
          for (auto [name, v] : old) {
            for (const FieldName& f : fields_) {
              if (Str(g, name) == f.legacy) b.Set(d, f.heavyball3, v);
            }
          }
        }
        b.Set(per_view, view, d);
      }
      out.emplace_back(key, per_view);
    }
    AddStepCounters(b, out);
    g.at(state).entries = std::move(out);
    if (!fresh.empty()) {
      std::string list;
      for (const std::string& k : fresh) list += (list.empty() ? "" : ", ") + k;
      r_.notes.push_back("parameters " + list + " (reset) are written without state: a zero eigenbasis would "
                         "stop their updates, so 3.x builds their preconditioner afresh on its next step");
    }
    return Status();
  }

  bool IsZeroFilled(NodeId tensor) const {
    const Checkpoint& c = r_.checkpoint;
    if (tensor == kNoNode || c.graph.at(tensor).kind != NodeKind::kTensor) return false;
    int64_t storage = c.tensors[c.graph.at(tensor).tensor].storage;
    return storage >= 0 && c.storages[static_cast<size_t>(storage)].zero_fill;
  }

  // 3.x reads a group's counter from the first of its parameters whose view
  // dict has `step` (and writes it there after each step), as a 0-d int64.
  void AddStepCounters(GraphBuilder& b, std::vector<std::pair<NodeId, NodeId>>& out) {
    ObjectGraph& g = r_.checkpoint.graph;
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
    if (!firsts.empty()) {
      r_.notes.push_back("step " + std::to_string(r_.steps) + " written as a 0-d int64 tensor in view 0 of the first "
                         "parameter with state in each group, where 3.x reads and keeps its group's counter");
    }
    for (auto [key, per_view] : out) {
      if (!firsts.count(g.at(key).int_value)) continue;
      NodeId view0 = g.at(per_view).entries.front().second;
      NodeId steps = tensors_.ComputedTensor(b, DType::kInt64, {});
      r_.computed.back().int_value = r_.steps;
      NodeId name = b.Str("step");
      auto& entries = g.at(view0).entries;
      entries.insert(entries.begin(), {name, steps});
    }
  }

  const Checkpoint& cp_;
  const OptimizerState& st_;
  const std::vector<ParamInfo>& params_;
  const MatchReport& m_;
  const MigrateOptions& o_;
  MigrateResult r_;
  MigrateTensors tensors_{r_};
  LegacyFamily family_ = LegacyFamily::kAdamW0;
  bool already_3x_ = false;  // HeavyBall 3.x's own layout: carried over as it is
  std::span<const FieldName> fields_;
  std::span<const int64_t> initialized_;
  double precondition_frequency_ = 0;
  std::string schedule_unknown_;  // why a 1.6 file's schedule cannot be carried over
  std::string frequency_note_;    // a 1.6 frequency taken by default
};

}  // namespace

StatusOr<MigrateResult> MigrateState(const Checkpoint& checkpoint, const OptimizerState& state,
                                     const std::vector<ParamInfo>& params, const MatchReport& match,
                                     const MigrateOptions& options) {
  return Migrator(checkpoint, state, params, match, options).Run();
}

}  // namespace optstate
