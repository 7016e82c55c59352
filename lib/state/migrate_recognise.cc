// Which HeavyBall era and algorithm a legacy optimizer state is: its state
// field names, group fields and layout, checked against what each era saves.
#include "state/migrator.h"

#include <set>

namespace optstate::migrate_internal {
namespace {

// What HeavyBall 3.2 calls each era's state fields (hb3 names them); SOAP
// marks transforms 0, 2 and 3 initialised. 2.x nested per view like 3.x:
// AdamW's names were 3.x's already, SOAP's transforms were numbered 0 and 1.
using hb3::kAdamExpAvg;
using hb3::kAdamExpAvgSq;
using hb3::kSoapExpAvg;
using hb3::kSoapExpAvgSq;
using hb3::kSoapGG;
using hb3::kSoapQ;
constexpr FieldName kAdamFields0[] = {{"exp_avg", kAdamExpAvg}, {"exp_avg_sq", kAdamExpAvgSq}};
constexpr FieldName kAdamFields1[] = {{"update_by_adam_exp_avg", kAdamExpAvg},
                                      {"update_by_adam_exp_avg_sq", kAdamExpAvgSq}};
constexpr FieldName kAdamFields2[] = {{kAdamExpAvg, kAdamExpAvg}, {kAdamExpAvgSq, kAdamExpAvgSq}};
constexpr FieldName kSoapFields0[] = {
    {"exp_avg", kSoapExpAvg}, {"exp_avg_sq", kSoapExpAvgSq}, {"Q", kSoapQ}, {"GG", kSoapGG}};
constexpr FieldName kSoapFields1[] = {{"scale_by_soap_exp_avg", kSoapExpAvg},
                                      {"scale_by_soap_exp_avg_sq", kSoapExpAvgSq},
                                      {"Q", kSoapQ},
                                      {"GG", kSoapGG}};
constexpr FieldName kSoapFields2[] = {{"scale_by_soap_exp_avg_0", kSoapExpAvg},
                                      {"scale_by_soap_exp_avg_sq_0", kSoapExpAvgSq},
                                      {"scale_by_soap_Q_1", kSoapQ},
                                      {"scale_by_soap_GG_1", kSoapGG}};
constexpr int64_t kAdamInitialized[] = {0};
constexpr int64_t kSoapInitialized[] = {0, 2, 3};

// Group fields of algorithms not migrated, with what to call them.
constexpr FieldNote kOtherAlgorithms[] = {
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

}  // namespace

Status Migrator::Recognise() {
  NodeId groups = DictLookup(in(), st_.node, "param_groups");
  bool soap = false;
  for (NodeId group : in().at(groups).items) {
    for (const FieldNote& a : kOtherAlgorithms) {
      if (DictLookup(in(), group, a.field) != kNoNode) {
        return UnsupportedError(std::string("param_groups have '") + a.field + "': a " + a.note +
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
Status Migrator::RecogniseEra2(bool soap) {
  std::span<const FieldName> fields = soap ? std::span<const FieldName>(kSoapFields2) : kAdamFields2;
  for (const StateKey& k : st_.keys) {
    if (!k.nested_views) return UnsupportedError("state mixes per-view and flat entries (" + k.text + ")");
    for (auto [name, value] : in().at(FieldsOf(in(), k)).entries) {
      std::string field = StrValue(in(), name);
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
        std::string name = StrValue(in(), k);
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
Status Migrator::RecogniseAdamW() {
  bool era0 = false, era1 = false;
  for (const StateKey& k : st_.keys) {
    for (auto [name, value] : in().at(k.value).entries) {
      std::string field = StrValue(in(), name);
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
Status Migrator::RecogniseSoap(NodeId groups) {
  bool era1 = false;
  for (const StateKey& k : st_.keys) {
    era1 |= DictLookup(in(), k.value, "scale_by_soap_exp_avg") != kNoNode;
  }
  std::optional<double> frequency;
  for (NodeId group : in().at(groups).items) {
    for (auto [k, v] : in().at(group).entries) {
      std::string name = StrValue(in(), k);
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
      std::string field = StrValue(in(), name);
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
Status Migrator::Soap16Schedule(NodeId group, std::optional<double>& frequency) {
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

}  // namespace optstate::migrate_internal
