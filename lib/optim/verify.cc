#include "optstate/verify.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "optim/optimizer_family.h"
#include "optim/synthetic_values.h"
#include "optim/verify_unreplayed.h"
#include "optstate/adamw.h"
#include "optstate/optimizer_state.h"

namespace optstate {
namespace {

StatusOr<std::vector<float>> ReadFloats(const CheckpointFile& f, const TensorRef& t) {
  return ReadTensorAsFloat(f.bytes(), f.checkpoint(), t);
}

// Synthetic values for a parameter: its starting values without a model
// (step 0), and the probe gradient (step 1).
std::vector<float> Probe(size_t n, uint64_t seed, size_t param, int step, float scale) {
  std::vector<float> out(n);
  FillSynthetic(out.data(), static_cast<int64_t>(n), seed, param, step, 0, scale);
  return out;
}

double Number(const ObjectGraph& g, NodeId dict, const char* key, double fallback) {
  NodeId v = DictLookup(g, dict, key);
  if (v == kNoNode) return fallback;
  if (g.at(v).kind == NodeKind::kFloat) return g.at(v).float_value;
  if (g.at(v).kind == NodeKind::kInt) return static_cast<double>(g.at(v).int_value);
  return fallback;
}

constexpr double kProbeLr = 1e-3;

AdamWHyper GroupHyper(const ObjectGraph& g, NodeId group) {
  AdamWHyper h;
  h.lr = Number(g, group, "lr", h.lr);
  h.eps = Number(g, group, "eps", h.eps);
  h.weight_decay = Number(g, group, "weight_decay", h.weight_decay);
  NodeId betas = DictLookup(g, group, "betas");
  if (betas != kNoNode && g.at(betas).items.size() == 2) {
    for (int i = 0; i < 2; ++i) {
      const Node& b = g.at(g.at(betas).items[static_cast<size_t>(i)]);
      double v = b.kind == NodeKind::kFloat ? b.float_value : static_cast<double>(b.int_value);
      (i == 0 ? h.beta1 : h.beta2) = v;
    }
  }
  NodeId ams = DictLookup(g, group, "amsgrad");
  h.amsgrad = ams != kNoNode && g.at(ams).kind == NodeKind::kBool && g.at(ams).bool_value;
  NodeId max = DictLookup(g, group, "maximize");
  h.maximize = max != kNoNode && g.at(max).kind == NodeKind::kBool && g.at(max).bool_value;
  return h;
}

// One step of HeavyBall 3.x's AdamW (update_by_adam, utils.fused_adam_), scalar:
// both moments are lerped toward the gradient with beta_debias(beta, t) =
// 1 - (1 - beta) / (1 - beta^t), so they are bias-corrected in the state
// itself (torch's AdamW corrects on the fly), then p = p (1 - wd lr) - lr m /
// max(sqrt(v), eps). `step` is the counter before this step.
void HeavyBallAdamWStep(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
                        std::vector<float>& v, const AdamWHyper& h, double step) {
  double t = step + 1;
  double b1 = 1 - (1 - h.beta1) / (1 - std::pow(h.beta1, t));
  double b2 = 1 - (1 - h.beta2) / (1 - std::pow(h.beta2, t));
  for (size_t i = 0; i < p.size(); ++i) {
    m[i] = static_cast<float>(m[i] + (1 - b1) * (g[i] - m[i]));
    v[i] = static_cast<float>(v[i] + (1 - b2) * (static_cast<double>(g[i]) * g[i] - v[i]));
    double denom = std::max(std::sqrt(static_cast<double>(v[i])), h.eps);
    p[i] = static_cast<float>(p[i] * (1 - h.weight_decay * h.lr) - h.lr * m[i] / denom);
  }
}

// HeavyBall 3.x's AdamW names for one view's moments (transform index 0).
constexpr const char* kHb3ExpAvg = "update_by_adam_exp_avg_0";
constexpr const char* kHb3ExpAvgSq = "update_by_adam_exp_avg_sq_0";

class Verifier {
 public:
  Verifier(const MatchedState& m, const VerifyOptions& o) : m_(m), o_(o), g_(m.file->checkpoint().graph) {}

  StatusOr<VerifyReport> Run(const CheckpointFile* model, NodeId model_dict) {
    r_.params = m_.params.size();
    r_.values_from_model = model != nullptr;
    OptimizerFamily family = RecogniseOptimizer(m_.file->checkpoint(), m_.state);
    if (!o_.optimizer.empty() && o_.optimizer != family.name) {
      family = {o_.optimizer, "--optimizer " + o_.optimizer + " (the file's fields say " + family.name + ")"};
    }
    r_.algorithm = family.name;
    r_.replay_applicable = family.replayable();
    const KeyKind scheme = m_.state.scheme;
    if ((scheme != KeyKind::kIndex && scheme != KeyKind::kFqn) || m_.state.mixed) {
      Add("", "non-canonical-keys",
          std::string("state keys are ") + std::string(KeyKindName(scheme)) + (m_.state.mixed ? " (mixed)" : "") +
              ": torch.optim.load_state_dict maps none of them to a parameter; run optstate remap");
      for (const ParamInfo& p : m_.params) r_.cold.push_back(p.name);
      return r_;
    }
    OPTSTATE_RETURN_IF_ERROR(RefuseOtherAlgorithms());
    if (m_.params_from_state) {
      r_.notes.push_back(std::string("no model or manifest: the parameters are the state's own shapes and dtypes, "
                                     "so shape and dtype against the model were not checked (give --model or "
                                     "--manifest)") +
                         (family.replayable() ? ", and each replay starts from synthetic values" : ""));
    }
    for (const CollisionGroup& c : m_.match.collisions) Add("", "collision", c.reason);
    for (size_t k : m_.match.orphans) Add("", "orphan", m_.state.keys[k].text + ": " + m_.match.keys[k].reason);
    if (!family.replayable()) {
      OPTSTATE_RETURN_IF_ERROR(CheckWithoutReplay(m_, family, r_));
      return r_;
    }
    if (family.name == "adam") {  // adam-or-adamw says itself what the file cannot tell
      r_.notes.push_back("Adam state: replayed with AdamW's step (weight decay decoupled), which tells warm from "
                         "cold state the same way");
    }
    size_t p = 0;
    for (size_t gi = 0; gi < m_.state.group_params.size(); ++gi) {
      NodeId group = g_.at(DictLookup(g_, m_.state.node, "param_groups")).items[gi];
      AdamWHyper hyper = GroupHyper(g_, group);
      // At lr 0 every update is zero (weight decay too), so warm and cold
      // state would look alike: the end of a schedule that decays to 0 is
      // replayed with a probe lr instead, and the report says so.
      if (hyper.lr == 0) {
        hyper.lr = kProbeLr;
        r_.notes.push_back("param_groups[" + std::to_string(gi) + "] has lr 0 (a schedule's end, or a leak "
                           "validate reports): replayed with a probe lr of 0.001, since an update at lr 0 is zero "
                           "for any state");
      }
      std::map<float, std::string> steps;  // step value -> first parameter with it
      group_step_ = GroupStepOfHeavyBall3(p, m_.state.group_params[gi].size());
      for (size_t i = 0; i < m_.state.group_params[gi].size() && p < m_.params.size(); ++i, ++p) {
        OPTSTATE_RETURN_IF_ERROR(Param(p, hyper, model, model_dict, steps));
      }
      if (steps.size() > 1) {
        std::string list;
        for (const auto& [s, name] : steps) {
          std::ostringstream text;
          text << s;  // 3, 12.5: as Python prints a float step
          list += (list.empty() ? "" : ", ") + text.str() + " (" + name + ")";
        }
        Add("", "step-mismatch", "param_groups[" + std::to_string(gi) + "] has different steps: " + list);
      }
    }
    return r_;
  }

 private:
  void Add(const std::string& param, const std::string& check, const std::string& message) {
    r_.findings.push_back({param, check, message});
  }

  // The replay is AdamW's: a file whose state is another algorithm's (what
  // migrate writes for HeavyBall SOAP) is refused as a whole, naming it, so
  // that no parameter is reported as checked or as broken.
  Status RefuseOtherAlgorithms() const {
    for (const StateKey& key : m_.state.keys) {
      const Node& v = g_.at(key.value);
      if (v.kind != NodeKind::kDict) continue;
      std::vector<NodeId> dicts{key.value};
      if (key.nested_views) {
        dicts.clear();
        for (auto [view, d] : v.entries) dicts.push_back(d);
      }
      for (NodeId d : dicts) {
        if (g_.at(d).kind != NodeKind::kDict) continue;
        for (auto [name, value] : g_.at(d).entries) {
          const Node& n = g_.at(name);
          if (n.kind == NodeKind::kStr && (n.text.starts_with("scale_by_soap_") || n.text == "Q" || n.text == "GG")) {
            return UnsupportedError("state entry " + key.text + " holds '" + n.text +
                                    "': SOAP state; verify replays AdamW only (torch.optim, HeavyBall 3.x), so "
                                    "nothing was checked");
          }
        }
      }
    }
    return Status();
  }

  // A step as torch.optim (float32 0-d tensor), HeavyBall 3.x (int64 0-d
  // tensor) or a Python number keeps it; 0 when there is none.
  float StepOf(NodeId dict) const {
    NodeId sv = DictLookup(g_, dict, "step");
    if (sv == kNoNode) return 0;
    std::optional<double> v = NumberValue(m_.file->checkpoint(), m_.file->bytes(), sv);
    return v ? static_cast<float>(*v) : 0;
  }

  // HeavyBall 3.x's AdamW entry: {0: {update_by_adam_exp_avg_0, ..._sq_0, ...}},
  // one view. Its view dict, or kNoNode for any other layout.
  NodeId HeavyBall3View(const StateKey& key) const {
    if (!key.nested_views) return kNoNode;
    const Node& v = g_.at(key.value);
    if (v.kind != NodeKind::kDict || v.entries.size() != 1) return kNoNode;
    NodeId view = v.entries[0].second;
    if (DictLookup(g_, view, kHb3ExpAvg) == kNoNode) return kNoNode;
    return view;
  }

  // 3.x reads a group's counter from the first of its parameters whose view
  // dict has `step` (chainable.py, ChainOpt._step_inner).
  float GroupStepOfHeavyBall3(size_t first, size_t count) const {
    for (size_t p = first; p < first + count && p < m_.params.size(); ++p) {
      const ParamMatch& pm = m_.match.params[p];
      if (pm.keys.empty() || pm.collided) continue;
      NodeId view = HeavyBall3View(m_.state.keys[pm.keys.front()]);
      if (view != kNoNode && DictLookup(g_, view, "step") != kNoNode) return StepOf(view);
    }
    return 0;
  }

  const TensorRef* Field(NodeId entry, const char* name) const {
    NodeId v = DictLookup(g_, entry, name);
    if (v == kNoNode || g_.at(v).kind != NodeKind::kTensor) return nullptr;
    return &m_.file->checkpoint().tensors[g_.at(v).tensor];
  }

  Status Param(size_t p, const AdamWHyper& hyper, const CheckpointFile* model, NodeId model_dict,
               std::map<float, std::string>& steps) {
    const ParamInfo& info = m_.params[p];
    const ParamMatch& pm = m_.match.params[p];
    if (pm.collided) return Status();  // reported as a collision
    if (pm.keys.empty()) {
      Add(info.name, "no-state", "no state entry: the optimizer never stepped it, or its state went elsewhere");
      r_.cold.push_back(info.name);
      return Status();
    }
    const StateKey& key = m_.state.keys[pm.keys.front()];
    NodeId view = HeavyBall3View(key);
    const bool hb3 = view != kNoNode;
    if (!hb3 && (pm.keys.size() > 1 || key.nested_views)) {
      Add(info.name, "unreplayable", "state split into per-view entries; the replay covers whole-tensor AdamW state");
      return Status();
    }
    const TensorRef* m = hb3 ? Field(view, kHb3ExpAvg) : Field(key.value, "exp_avg");
    const TensorRef* v = hb3 ? Field(view, kHb3ExpAvgSq) : Field(key.value, "exp_avg_sq");
    const TensorRef* vmax = hb3 ? nullptr : Field(key.value, "max_exp_avg_sq");
    if (m == nullptr || v == nullptr) {
      Add(info.name, "unreplayable", "no exp_avg / exp_avg_sq tensors: not AdamW state");
      return Status();
    }
    for (const TensorRef* t : {m, v}) {
      // torch keeps moments in the parameter's dtype; float32 moments for a
      // low-precision parameter are the mixed-precision layout.
      if (t->dtype != info.dtype && t->dtype != DType::kFloat32) {
        Add(info.name, "dtype", std::string("state dtype ") + std::string(GetDTypeInfo(t->dtype).name) +
                                    " does not fit the parameter's " + std::string(GetDTypeInfo(info.dtype).name));
        return Status();
      }
      // A DTensor (FSDP2) holds this rank's shard: its global shape must fit,
      // and the replay runs on the shard.
      const std::vector<int64_t>& shape = t->is_dtensor ? t->global_sizes : t->sizes;
      if (shape != info.shape) {
        Add(info.name, "shape", "state shape " + ShapeText(shape) + " does not fit the parameter's " +
                                    ShapeText(info.shape));
        return Status();
      }
    }
    // HeavyBall 3.x keeps one counter per group (group_step_); torch.optim one per
    // parameter, and its Adam/AdamW fail on an entry without one.
    if (!hb3 && DictLookup(g_, key.value, "step") == kNoNode) {
      Add(info.name, "no-step",
          "no per-parameter step: torch.optim's Adam / AdamW raise KeyError('step') on their first step from this "
          "entry (HeavyBall 0.x keeps its counter in the group: `optstate migrate` writes it for HeavyBall 3.x)");
    }
    float step = hb3 ? group_step_ : StepOf(key.value);
    if (!hb3) steps.emplace(step, info.name);
    auto mv = ReadFloats(*m_.file, *m);
    auto vv = ReadFloats(*m_.file, *v);
    if (!mv.ok() || !vv.ok()) {
      Add(info.name, "dtype", std::string(!mv.ok() ? mv.status().message() : vv.status().message()));
      return Status();
    }
    std::vector<float> vmaxv;
    if (hyper.amsgrad) {
      if (vmax == nullptr) {
        Add(info.name, "unreplayable", "amsgrad is on but there is no max_exp_avg_sq");
        return Status();
      }
      OPTSTATE_ASSIGN_OR_RETURN(vmaxv, ReadFloats(*m_.file, *vmax));
    }
    size_t n = mv->size();
    size_t bad = n, negative = n;
    bool zero = true;
    for (size_t i = 0; i < n; ++i) {
      if (bad == n && (!std::isfinite((*mv)[i]) || !std::isfinite((*vv)[i]))) bad = i;
      if (negative == n && (*vv)[i] < 0) negative = i;
      zero = zero && (*mv)[i] == 0 && (*vv)[i] == 0;
    }
    if (bad != n) Add(info.name, "non-finite", "non-finite moment at element " + std::to_string(bad));
    if (negative != n) {
      Add(info.name, "negative-exp-avg-sq", "exp_avg_sq < 0 at element " + std::to_string(negative) +
                                                " (a second moment cannot be negative)");
    }
    // The replay: the same probe step from the loaded state and from fresh state.
    std::vector<float> values;
    if (model != nullptr) {
      NodeId t = DictLookup(model->checkpoint().graph, model_dict, info.name);
      if (t != kNoNode && model->checkpoint().graph.at(t).kind == NodeKind::kTensor) {
        OPTSTATE_ASSIGN_OR_RETURN(values,
                                  ReadFloats(*model, model->checkpoint().tensors[model->checkpoint().graph.at(t).tensor]));
      }
    }
    if (values.size() != n) {
      values = Probe(n, o_.probe_seed, p, 0, 0.05f);  // no model, or a DTensor shard of it
      r_.values_from_model = false;
    }
    std::vector<float> grad = Probe(n, o_.probe_seed, p, 1, 0.01f);
    std::vector<float> loaded = values, fresh = values;
    std::vector<float> fm(n, 0.0f), fv(n, 0.0f), fvmax(hyper.amsgrad ? n : 0, 0.0f);
    float loaded_step = step, fresh_step = 0;
    AdamWTensor a{loaded.data(), grad.data(), DType::kFloat32, mv->data(), vv->data(),
                  hyper.amsgrad ? vmaxv.data() : nullptr, &loaded_step, static_cast<int64_t>(n)};
    AdamWTensor b{fresh.data(), grad.data(), DType::kFloat32, fm.data(), fv.data(),
                  hyper.amsgrad ? fvmax.data() : nullptr, &fresh_step, static_cast<int64_t>(n)};
    Status s;
    if (hb3) {
      HeavyBallAdamWStep(loaded, grad, *mv, *vv, hyper, step);
      HeavyBallAdamWStep(fresh, grad, fm, fv, hyper, 0);
    } else {
      s = AdamWStep(std::span<const AdamWTensor>(&a, 1), hyper);
      if (s.ok()) s = AdamWStep(std::span<const AdamWTensor>(&b, 1), hyper);
    }
    if (!s.ok()) {
      Add(info.name, "unreplayable", std::string(s.message()));
      return Status();
    }
    ++r_.replayed;
    bool finite = true;
    for (float x : loaded) finite = finite && std::isfinite(x);
    if (!finite && bad == n) Add(info.name, "non-finite-update", "one step from this state gives non-finite parameters");
    if (n > 0 && (zero || std::memcmp(loaded.data(), fresh.data(), n * sizeof(float)) == 0)) {
      Add(info.name, "cold", zero ? "its moments are all zero (state created, never trained: DCP's init step?)"
                                  : "its state changes nothing: a step from it equals a step from fresh state");
      r_.cold.push_back(info.name);
    }
    return Status();
  }

  const MatchedState& m_;
  const VerifyOptions& o_;
  const ObjectGraph& g_;
  VerifyReport r_;
  float group_step_ = 0;  // HeavyBall 3.x: this group's counter
};

}  // namespace

StatusOr<VerifyReport> VerifyState(const MatchedState& m, const VerifyOptions& options) {
  Verifier v(m, options);
  return v.Run(m.model(), m.model_dict);
}

}  // namespace optstate
