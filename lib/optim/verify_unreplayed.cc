#include "optim/verify_unreplayed.h"

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "pickle/graph_walk.h"

namespace optstate {
namespace {

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

double GroupNumber(const ObjectGraph& g, NodeId group, const char* key) {
  NodeId v = DictLookup(g, group, key);
  if (v == kNoNode) return 0;
  if (g.at(v).kind == NodeKind::kFloat) return g.at(v).float_value;
  if (g.at(v).kind == NodeKind::kInt) return static_cast<double>(g.at(v).int_value);
  return 0;
}

class UnreplayedChecks {
 public:
  UnreplayedChecks(const MatchedState& m, const OptimizerFamily& family, VerifyReport& r)
      : m_(m), family_(family), g_(m.file->checkpoint().graph), r_(r) {}

  Status Run() {
    NodeId groups = DictLookup(g_, m_.state.node, "param_groups");
    size_t p = 0;
    for (size_t gi = 0; gi < m_.state.group_params.size(); ++gi) {
      NodeId group = g_.at(groups).items[gi];
      // SGD without momentum keeps no state (torch 2.x: a None momentum_buffer).
      const bool stateless = family_.name == "sgd" && GroupNumber(g_, group, "momentum") == 0;
      std::map<double, std::string> steps;
      for (size_t i = 0; i < m_.state.group_params[gi].size() && p < m_.params.size(); ++i, ++p) {
        OPTSTATE_RETURN_IF_ERROR(Param(p, stateless, steps));
      }
      if (steps.size() > 1) {
        Add("", "step-mismatch", "param_groups[" + std::to_string(gi) + "] has different steps: " + StepList(steps));
      }
    }
    NoteParamsWithoutState(without_state_, r_);
    std::string unknown;
    for (const std::string& f : unknown_fields_) unknown += (unknown.empty() ? "" : ", ") + f;
    r_.notes.push_back(
        "not replayed: the state is " + (family_.known() ? family_.name : std::string("an unknown optimizer")) +
        "'s (" + family_.evidence + "), which verify does not replay (it replays SGD, Adam, AdamW, Adagrad, "
        "RMSprop and HeavyBall 3.x's AdamW); per-element fields' shapes, dtypes, finite values and steps were "
        "checked, warm vs cold was not" +
        (unknown.empty() ? "" : "; fields " + unknown + " were not checked, since what they hold is not known"));
    return Status();
  }

 private:
  void Add(const std::string& param, const std::string& check, const std::string& message) {
    r_.findings.push_back({param, check, message});
  }

  Status Param(size_t p, bool stateless, std::map<double, std::string>& steps) {
    const ParamInfo& info = m_.params[p];
    const ParamMatch& pm = m_.match.params[p];
    if (pm.collided) return Status();
    if (pm.keys.empty()) {
      if (!stateless && !KeepsOneEntryForAllParams(family_.name)) without_state_.push_back(info.name);
      return Status();
    }
    const StateKey& key = m_.state.keys[pm.keys.front()];
    if (pm.keys.size() > 1 || key.nested_views || g_.at(key.value).kind != NodeKind::kDict) return Status();
    const Checkpoint& cp = m_.file->checkpoint();
    for (auto [name, v] : g_.at(key.value).entries) {
      if (g_.at(name).kind != NodeKind::kStr) continue;
      const std::string& field = g_.at(name).text;
      if (field == "step") {
        std::optional<double> s = NumberValue(cp, m_.file->bytes(), v);
        if (s) steps.emplace(*s, info.name);
        continue;
      }
      if (g_.at(v).kind != NodeKind::kTensor) continue;  // SGD's None momentum_buffer
      const TensorRef& t = cp.tensors[g_.at(v).tensor];
      const std::vector<int64_t> shape = t.whole_sizes();
      // Each field as what its algorithm keeps in it (optimizer_family.h).
      const FieldLayout layout = LayoutOfField(family_.name, field);
      if (layout == FieldLayout::kUnknown) {
        unknown_fields_.insert(field);
        continue;
      }
      if (layout != FieldLayout::kPerElement) continue;  // scalars, factors, flat vectors: no per-element meaning
      if (!info.shape.empty() || info.nbytes > 0) {
        if (shape != info.shape) {
          Add(info.name, "shape", field + " has shape " + Shape(shape) + ", the parameter " + Shape(info.shape));
          continue;
        }
      }
      if (t.dtype != info.dtype && t.dtype != DType::kFloat32) {
        Add(info.name, "dtype", field + " is " + std::string(GetDTypeInfo(t.dtype).name) + ", the parameter " +
                                    std::string(GetDTypeInfo(info.dtype).name));
        continue;
      }
      StatusOr<std::vector<float>> values = ReadTensorAsFloat(m_.file->bytes(), cp, t);
      if (!values.ok()) {
        Add(info.name, "dtype", field + ": " + std::string(values.status().message()));
        continue;
      }
      for (size_t i = 0; i < values->size(); ++i) {
        if (!std::isfinite((*values)[i])) {
          Add(info.name, "non-finite", field + " is non-finite at element " + std::to_string(i));
          break;
        }
      }
    }
    return Status();
  }

  const MatchedState& m_;
  const OptimizerFamily& family_;
  const ObjectGraph& g_;
  VerifyReport& r_;
  std::vector<std::string> without_state_;
  std::set<std::string> unknown_fields_;
};

}  // namespace

void NoteParamsWithoutState(const std::vector<std::string>& names, VerifyReport& report) {
  if (names.empty()) return;
  std::string list;
  for (size_t i = 0; i < names.size() && i < 8; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 8) list += ", ...";
  report.notes.push_back(std::to_string(names.size()) + " parameter" + (names.size() == 1 ? " has" : "s have") +
                         " no state (" + list + "): frozen, never given a gradient, or their state went elsewhere; "
                         "the file cannot tell which, so they were not judged");
}

bool HoldsShardedTensors(const ObjectGraph& g, NodeId entry) {
  if (g.at(entry).kind != NodeKind::kDict) return false;
  for (auto [k, v] : g.at(entry).entries) {
    if (g.at(v).class_name().ends_with("sharded_tensor.api.ShardedTensor")) return true;
  }
  return false;
}

std::string StepList(const std::map<double, std::string>& steps) {
  std::string list;
  for (const auto& [s, name] : steps) {
    std::ostringstream text;
    text << s;  // 3, 12.5
    list += (list.empty() ? "" : ", ") + text.str() + " (" + name + ")";
  }
  return list;
}

Status RefuseSoapState(const MatchedState& m) {
  const ObjectGraph& g = m.file->checkpoint().graph;
  for (const StateKey& key : m.state.keys) {
    const Node& v = g.at(key.value);
    if (v.kind != NodeKind::kDict) continue;
    std::vector<NodeId> dicts{key.value};
    if (key.nested_views) {
      dicts.clear();
      for (auto [view, d] : v.entries) dicts.push_back(d);
    }
    for (NodeId d : dicts) {
      if (g.at(d).kind != NodeKind::kDict) continue;
      for (auto [name, value] : g.at(d).entries) {
        const Node& n = g.at(name);
        if (n.kind == NodeKind::kStr && (n.text.starts_with("scale_by_soap_") || n.text == "Q" || n.text == "GG")) {
          return UnsupportedError("state entry " + key.text + " holds '" + n.text +
                                  "': SOAP state; verify replays torch.optim's SGD, Adam, AdamW, Adagrad and "
                                  "RMSprop and HeavyBall 3.x's AdamW, so nothing was checked");
        }
      }
    }
  }
  return Status();
}

Status CheckWithoutReplay(const MatchedState& m, const OptimizerFamily& family, VerifyReport& report) {
  return UnreplayedChecks(m, family, report).Run();
}

}  // namespace optstate
