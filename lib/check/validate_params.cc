// The validate rules that need the model's parameter list: counts and group
// sizes against the model, then collisions, orphans and shapes from the match.
#include "check/validate_params.h"

#include <algorithm>
#include <map>
#include <set>

#include "check/finding_sink.h"
#include "optstate/collisions.h"
#include "optstate/params.h"
#include "pickle/graph_walk.h"
#include "state/optimizer_family.h"

namespace optstate {
namespace {

// These compare counts and names only, so they run even when the parameter
// order cannot be decided (e.g. two param groups and no manifest).
bool ComparesCounts(std::string_view rule) {
  return rule == "param-count-mismatch" || rule == "model-params-not-in-optimizer" ||
         rule == "model-entries-not-optimized";
}

// Lists every needs_params rule as checked, or as skipped with `why` (when
// `counts_ran`, the count rules are checked whatever `why` says).
// DeepSpeed's per-rank optimizer file: {"optimizer_state_dict": {"zero_stage": ...}}.
bool IsZeroPartitionFile(const Checkpoint& cp) {
  const ObjectGraph& g = cp.graph;
  if (g.root == kNoNode || g.at(g.root).kind != NodeKind::kDict) return false;
  NodeId osd = DictLookup(g, g.root, "optimizer_state_dict");
  return osd != kNoNode && g.at(osd).kind == NodeKind::kDict && DictLookup(g, osd, "zero_stage") != kNoNode;
}

void NoteParamRules(ValidationReport& r, bool counts_ran, const std::string& why) {
  for (const RuleInfo& rule : ValidationRules()) {
    if (!rule.needs_params) continue;
    if (why.empty() || (counts_ran && ComparesCounts(rule.id))) {
      r.checked.emplace_back(rule.id);
    } else {
      r.skipped.emplace_back(rule.id, why);
    }
  }
}

std::string NameList(const std::vector<std::string>& names, size_t most = 6) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

std::string GroupSizes(const std::vector<size_t>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

class ParamChecks {
 public:
  ParamChecks(const Checkpoint& cp, const OptimizerState& st, FindingSink& sink)
      : cp_(cp), st_(st), sink_(sink), groups_at_(st.path.empty() ? "param_groups" : st.path + ".param_groups"),
        state_at_(st.path.empty() ? "state" : st.path + ".state") {
    for (const std::vector<NodeId>& g : st.group_params) group_sizes_.push_back(g.size());
  }

  // A manifest is written from the optimizer itself: any difference in count
  // (or, when it records groups, in group sizes) means it is not this state's.
  bool ManifestFits(const std::vector<ParamInfo>& params, const std::string& from) {
    if (params.size() != st_.param_count) {
      sink_.Add("param-count-mismatch", groups_at_,
                "param_groups list " + std::to_string(st_.param_count) + " parameters (group sizes " +
                    GroupSizes(group_sizes_) + "), the " + from + " lists " + std::to_string(params.size()) +
                    ": this state was saved for another model (or the manifest "
                    "for another run).");
      return false;
    }
    std::vector<size_t> manifest_sizes;
    for (const ParamInfo& p : params) {
      if (!p.group) return true;  // the manifest does not say
      if (manifest_sizes.size() <= static_cast<size_t>(*p.group)) manifest_sizes.resize(*p.group + 1);
      ++manifest_sizes[*p.group];
    }
    if (manifest_sizes != group_sizes_) {
      sink_.Add("param-count-mismatch", groups_at_,
                "group sizes " + GroupSizes(group_sizes_) + " but the " + from + " has " +
                    GroupSizes(manifest_sizes) + ": parameters moved between groups, so each gets another group's "
                    "lr and weight_decay on resume.");
      return false;
    }
    return true;
  }

  // A model state_dict also holds frozen parameters, so fewer in the optimizer
  // is only a warning; more (or names the model lacks) cannot be right.
  bool ModelFits(const Checkpoint& model, NodeId dict, const std::string& from) {
    ModelParams module = ParamsOfModel(model, dict);
    std::set<std::string> optimizer_names;
    size_t named = 0;
    for (const std::vector<NodeId>& g : st_.group_params) {
      for (NodeId id : g) {
        if (cp_.graph.at(id).kind != NodeKind::kStr) continue;
        ++named;
        optimizer_names.insert(cp_.graph.at(id).text);
      }
    }
    std::vector<std::string> unlisted;  // by name, when param_groups name parameters
    size_t unlisted_count = 0;
    if (named > 0 && named == st_.param_count) {  // DSD: param_groups name the parameters
      std::set<std::string> model_names;
      for (const ParamInfo& p : module.params) model_names.insert(p.name);
      std::vector<std::string> unknown;
      for (const std::string& n : optimizer_names) {
        if (!model_names.count(n)) unknown.push_back("'" + n + "'");
      }
      if (!unknown.empty()) {
        sink_.Add("param-count-mismatch", groups_at_,
                  "param_groups name " + std::to_string(unknown.size()) + " parameters the " + from +
                      " does not have (" + NameList(unknown) + "): this state was saved for another model.");
        return false;
      }
      for (const ParamInfo& p : module.params) {
        if (!optimizer_names.count(p.name)) unlisted.push_back(p.name);
      }
      unlisted_count = unlisted.size();
    } else {
      size_t have = module.params.size();
      if (st_.param_count > have) {
        sink_.Add("param-count-mismatch", groups_at_,
                  "param_groups list " + std::to_string(st_.param_count) + " parameters, but the " + from + " has " +
                      std::to_string(have) + " (tied duplicates and buffers not counted): this state was saved for "
                      "another model.");
        return false;
      }
      unlisted_count = have - st_.param_count;
      // The model's own file may hold other optimizers over the rest of it
      // (SparseAdam on the embedding beside an Adam for the rest).
      if (&model == &cp_) {
        size_t others = 0;
        for (const std::string& path : FindOptimizerStates(cp_)) {
          if (path == st_.path) continue;
          StatusOr<OptimizerState> other = ReadOptimizerState(cp_, path);
          if (other.ok()) others += other->param_count;
        }
        unlisted_count -= std::min(unlisted_count, others);
      }
    }
    if (!unlisted.empty()) {
      // Every name the optimizer lists is the model's: a missing one cannot be
      // another model's state, only a buffer or a frozen parameter.
      sink_.Add("model-entries-not-optimized", groups_at_,
                "the " + from + " has " + std::to_string(module.params.size()) + " floating-point tensors, " +
                    std::to_string(unlisted.size()) + " of them named in no param group (" + NameList(unlisted) +
                    "): buffers (a rotary table, a mask) or frozen parameters; every name the optimizer lists is the "
                    "model's.");
    } else if (unlisted_count > 0) {
      std::string which = unlisted.empty() ? "" : " (" + NameList(unlisted) + ")";
      sink_.Add("model-params-not-in-optimizer", groups_at_,
                "the " + from + " has " + std::to_string(module.params.size()) + " parameters, " +
                    std::to_string(unlisted_count) + " of them in no param group" + which +
                    ": frozen parameters (fine-tuning) are fine; otherwise this state belongs to another model.");
    }
    return true;
  }

  // Without parameters, state-collision still fires where the file alone
  // proves merged state (collisions.h, FindCollisionEvidence); it counts as checked only then.
  void FromStateAlone() {
    CollisionEvidence e = FindCollisionEvidence(cp_, ByteSpan(), st_);
    if (!e.merged) return;
    ValidationReport& r = sink_.report();
    std::erase_if(r.skipped, [](const auto& s) { return s.first == "state-collision"; });
    r.checked.emplace_back("state-collision");
    sink_.Add("state-collision", state_at_,
              e.reason + ". Which parameters share which entry: `optstate collisions --model` or --manifest.");
  }

  void FromMatch(const std::vector<ParamInfo>& params, const MatchReport& match) {
    for (const CollisionGroup& c : match.collisions) {
      std::vector<std::string> names;
      for (size_t p : c.params) names.push_back(params[p].name);
      sink_.Add("state-collision", state_at_,
                std::to_string(c.params.size()) + " parameters (" + NameList(names) + ") share " +
                    std::to_string(c.keys.size()) + " state entr" + (c.keys.size() == 1 ? "y" : "ies") + ": " +
                    c.reason + ". Their moments are mixed; `optstate remap --on-collision drop|share|reset` makes it "
                    "loadable.");
    }
    for (size_t k : match.orphans) {
      sink_.Add("state-orphan", state_at_ + "[" + st_.keys[k].text + "]",
                "belongs to no parameter: " + match.keys[k].reason + ". remap drops it and says so.");
    }
    // Each field is held to what its algorithm keeps in it (optimizer_family.h):
    // a per-element moment has the parameter's shape, Adafactor's factors the
    // shape with one dimension 1, LBFGS's flat vectors every parameter's numel.
    const OptimizerFamily family = RecogniseOptimizer(cp_, st_);
    uint64_t all_numel = 0;
    for (const ParamInfo& p : params) all_numel += ShapeNumel(p.shape);
    std::set<std::string> unchecked;
    for (size_t k = 0; k < st_.keys.size(); ++k) {
      const KeyMatch& km = match.keys[k];
      if (km.fate != KeyFate::kAssigned || km.params.size() != 1) continue;
      const StateKey& key = st_.keys[k];
      // Canonical keys only: a view key's state has the view's shape, and such keys are reported anyway.
      if (key.kind != KeyKind::kIndex && key.kind != KeyKind::kFqn) continue;
      if (key.nested_views || cp_.graph.at(key.value).kind != NodeKind::kDict) continue;
      const ParamInfo& p = params[km.params[0]];
      for (auto [name, value] : cp_.graph.at(key.value).entries) {
        const Node& n = cp_.graph.at(value);
        if (n.kind != NodeKind::kTensor) continue;
        const TensorRef& t = cp_.tensors[n.tensor];
        const std::vector<int64_t> shape = t.whole_sizes();
        const std::string field = cp_.graph.at(name).kind == NodeKind::kStr ? cp_.graph.at(name).text : "";
        const FieldLayout layout = LayoutOfField(family.name, field);
        if (layout == FieldLayout::kUnknown) {
          if (t.numel() > 1 || shape.size() > 1) unchecked.insert(field.empty() ? KeyText(cp_.graph, name) : field);
          continue;
        }
        std::string want;
        if (layout == FieldLayout::kPerElement) {
          // HeavyBall's merged view of the parameter ([64, 27] of [64, 3, 3, 3]) is its own state's shape.
          if (shape != p.shape && !IsDimMerge(p.shape, shape)) want = "parameter " + p.name + " is " + ShapeText(p.shape);
        } else if (layout == FieldLayout::kFactoredRow || layout == FieldLayout::kFactoredCol) {
          std::vector<int64_t> factored = p.shape;
          size_t dim = layout == FieldLayout::kFactoredRow ? 1 : 2;
          if (factored.size() >= 2) factored[factored.size() - dim] = 1;
          if (shape != factored) want = "factored from " + p.name + " " + ShapeText(p.shape) + " it is " + ShapeText(factored);
        } else if (layout == FieldLayout::kFlatOverAll) {
          if (shape.size() != 1 || static_cast<uint64_t>(shape[0]) != all_numel) {
            want = "flattened over all parameters it has " + std::to_string(all_numel) + " elements";
          }
        }
        if (!want.empty()) {
          sink_.Add("state-shape-mismatch", state_at_ + "[" + key.text + "]." + KeyText(cp_.graph, name),
                    "shape " + ShapeText(shape) + " but " + want + ": this entry belongs to another parameter (a key "
                    "mapped wrongly).");
        }
      }
    }
    if (!unchecked.empty()) {
      std::string list;
      for (const std::string& f : unchecked) list += (list.empty() ? "" : ", ") + f;
      sink_.Add("state-schema-unknown", state_at_,
                std::string(family.known() ? "the " + family.name + " state's fields " : "state of an optimizer "
                            "optstate does not know (" + family.evidence + "): fields ") +
                    list + " were not checked against their parameters' shapes, since what they hold is not known.");
    }
  }

 private:
  const Checkpoint& cp_;
  const OptimizerState& st_;
  FindingSink& sink_;
  std::string groups_at_, state_at_;
  std::vector<size_t> group_sizes_;
};

}  // namespace

Status CheckAgainstParams(const Checkpoint& cp, ByteSpan bytes, const std::string& path, FindingSink& sink) {
  ValidationReport& r = sink.report();
  const ValidateOptions& o = sink.options();
  if (IsZeroPartitionFile(cp)) {
    // Held against a parameter list, one flat entry per group would read as
    // "saved for another model": the directory's layout check maps it instead.
    NoteParamRules(r, false,
                   "a DeepSpeed ZeRO partition file: its optimizer state is one flat tensor per param group, not "
                   "one entry per parameter; validate its directory to check it against the model states");
    return Status();
  }
  StatusOr<OptimizerState> st = LocateOptimizerState(cp, o.state_key);
  if (!st.ok()) {
    NoteParamRules(r, false, "no single optimizer state to check: " + std::string(st.status().message()));
    return Status();
  }
  ParamChecks checks(cp, *st, sink);
  std::vector<ParamInfo> params;
  MatchOptions match_options;
  const ParamSource source = o.params.value_or(ParamSource{});
  if (!source.manifest.empty()) {
    OPTSTATE_ASSIGN_OR_RETURN(params, ReadParamManifest(source.manifest));
    if (!checks.ManifestFits(params, "manifest " + source.manifest)) {
      NoteParamRules(r, true, "the manifest does not fit this state (param-count-mismatch)");
      return Status();
    }
  } else {
    std::unique_ptr<CheckpointFile> own;
    const Checkpoint* model = &cp;
    if (!source.model.empty()) {
      OPTSTATE_ASSIGN_OR_RETURN(own, OpenCheckpoint(source.model, o.read));
      model = &own->checkpoint();
    }
    const std::string& model_path = source.model.empty() ? path : source.model;
    std::string found_at;
    StatusOr<NodeId> dict = LocateModelStateDict(*model, source.model_key, &found_at, &*st);
    if (!dict.ok()) {
      // Asked for explicitly, a model that is not there is an input error.
      if (o.params) return std::move(dict).status().WithContext(model_path);
      NoteParamRules(r, false, "no parameter list (give --model or --manifest): " + std::string(dict.status().message()));
      checks.FromStateAlone();
      return Status();
    }
    std::string from = found_at.empty() ? "model " + model_path : "model '" + found_at + "' in " + model_path;
    if (!checks.ModelFits(*model, *dict, from)) {
      NoteParamRules(r, true, "the model does not fit this state (param-count-mismatch)");
      return Status();
    }
    StatusOr<ModelParams> ordered = ParamsFromModel(*model, *dict, cp, *st);
    if (!ordered.ok()) {
      NoteParamRules(r, true, "parameter order undecidable: " + std::string(ordered.status().message()));
      return Status();
    }
    params = std::move(ordered->params);
    if (own) {  // an optimizer saved alone: (Parameter, i) copies match by bytes
      OPTSTATE_RETURN_IF_ERROR(PrepareContentMatch(bytes, cp, *st, *own, *dict, params, match_options));
    }
  }
  StatusOr<MatchReport> match = MatchState(cp, *st, params, match_options);
  if (!match.ok()) {
    NoteParamRules(r, true, std::string(match.status().message()));
    return Status();
  }
  NoteParamRules(r, true, "");
  checks.FromMatch(params, *match);
  return Status();
}

}  // namespace optstate
