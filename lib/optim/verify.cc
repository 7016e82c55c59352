
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "optim/replay_steps.h"
#include "optim/synthetic_values.h"
#include "optim/verify_unreplayed.h"
#include "optstate/optimizer.h"
#include "optstate/params.h"
#include "state/optimizer_family.h"

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


// Fields that sum squares and so cannot be negative.
bool IsSquareSum(const std::string& field) {
  return field == "exp_avg_sq" || field == "max_exp_avg_sq" || field == "sum" || field == "square_avg";
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
    const std::optional<Replay> replay = ReplayFor(family.name);
    r_.replay_applicable = replay.has_value();
    if (replay) {
      replay_ = *replay;
      r_.replayed_with = replay_.heavyball3 ? "HeavyBall 3.x AdamW" : Title();
    }
    const KeyKind scheme = m_.state.scheme;
    // An empty state (plain SGD, or an optimizer never stepped) has no keys to be wrong.
    if (!m_.state.keys.empty() && ((scheme != KeyKind::kIndex && scheme != KeyKind::kFqn) || m_.state.mixed)) {
      Add("", "non-canonical-keys",
          std::string("state keys are ") + std::string(KeyKindName(scheme)) + (m_.state.mixed ? " (mixed)" : "") +
              ": torch.optim.load_state_dict maps none of them to a parameter; run optstate remap");
      for (const ParamInfo& p : m_.params) r_.cold.push_back(p.name);
      return r_;
    }
    OPTSTATE_RETURN_IF_ERROR(RefuseSoapState(m_));
    if (m_.params_from_state) {
      r_.notes.push_back(std::string("no model or manifest: the parameters are the state's own shapes and dtypes, "
                                     "so shape and dtype against the model were not checked (give --model or "
                                     "--manifest)") +
                         (replay ? ", and each replay starts from synthetic values" : ""));
    }
    for (const CollisionGroup& c : m_.match.collisions) Add("", "collision", c.reason);
    for (size_t k : m_.match.orphans) Add("", "orphan", m_.state.keys[k].text + ": " + m_.match.keys[k].reason);
    if (!replay) {
      OPTSTATE_RETURN_IF_ERROR(CheckWithoutReplay(m_, family, r_));
      return r_;
    }
    size_t p = 0;
    for (size_t gi = 0; gi < m_.state.group_params.size(); ++gi) {
      NodeId group = g_.at(DictLookup(g_, m_.state.node, "param_groups")).items[gi];
      OptimizerHyper hyper = GroupOptimizerHyper(g_, group, replay_.algorithm);
      // At lr 0 every update is zero (weight decay too), so warm and cold
      // state would look alike: the end of a schedule that decays to 0 is
      // replayed with a probe lr instead, and the report says so.
      if (std::optional<std::string> note = UseProbeLrWhereUpdatesVanish(hyper, gi)) r_.notes.push_back(*note);
      // Plain SGD keeps no state: nothing can be cold, nothing is replayed.
      const bool stateless = replay_.algorithm == Algorithm::kSgd && hyper.momentum == 0;
      if (stateless) {
        r_.notes.push_back("param_groups[" + std::to_string(gi) + "] is SGD without momentum, which keeps no "
                           "state: there is nothing to replay, and no parameter of it can be cold");
      }
      std::map<double, std::string> steps;  // step value -> first parameter with it
      group_step_ = GroupStepOfHeavyBall3(p, m_.state.group_params[gi].size());
      for (size_t i = 0; i < m_.state.group_params[gi].size() && p < m_.params.size(); ++i, ++p) {
        OPTSTATE_RETURN_IF_ERROR(stateless ? Status() : Param(p, hyper, model, model_dict, steps));
      }
      if (steps.size() > 1) {
        Add("", "step-mismatch", "param_groups[" + std::to_string(gi) + "] has different steps: " + StepList(steps));
      }
    }
    NoteParamsWithoutState(without_state_, r_);
    return r_;
  }

 private:
  void Add(const std::string& param, const std::string& check, const std::string& message) {
    // A model from safetensors keeps no module order: a same-shape parameter's
    // name is the state shapes' best guess, and the finding says so.
    if (!param.empty() && guessed_.count(param)) {
      r_.findings.push_back({param, check, message + " (the name is a guess: this parameter shares its shape with "
                                                     "another, and the model file keeps no order; --manifest tells)"});
      return;
    }
    r_.findings.push_back({param, check, message});
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

  std::string Title() const {
    switch (replay_.algorithm) {
      case Algorithm::kAdamW: return "AdamW";
      case Algorithm::kAdam: return "Adam";
      case Algorithm::kSgd: return "SGD";
      case Algorithm::kAdagrad: return "Adagrad";
      case Algorithm::kRmsprop: return "RMSprop";
    }
    return "AdamW";
  }

  // The entry's state tensors by slot (StateSlots order); nullptr where the
  // algorithm keeps none. A finding and false when one it keeps is missing.
  bool Fields(const ParamInfo& info, NodeId entry, bool hb3, const std::vector<StateSlot>& slots,
              const TensorRef* out[3]) {
    for (size_t k = 0; k < 3; ++k) out[k] = nullptr;
    if (hb3) {
      out[0] = Field(entry, kHb3ExpAvg);
      out[1] = Field(entry, kHb3ExpAvgSq);
    } else {
      for (size_t k = 0; k < slots.size(); ++k) {
        if (slots[k].kept) out[k] = Field(entry, slots[k].name.c_str());
      }
    }
    const bool adam = replay_.algorithm == Algorithm::kAdamW || replay_.algorithm == Algorithm::kAdam;
    if (HoldsShardedTensors(g_, entry)) {  // said once, judged neither way
      if (!sharded_noted_) r_.notes.push_back(kShardedTensorNote);
      sharded_noted_ = true;
      return false;
    }
    if (adam && (out[0] == nullptr || out[1] == nullptr)) {
      Add(info.name, "unreplayable", "no exp_avg / exp_avg_sq tensors: not AdamW state");
      return false;
    }
    for (size_t k = 0; k < slots.size() && !hb3; ++k) {
      if (!slots[k].kept || out[k] != nullptr) continue;
      Add(info.name, "unreplayable", slots[k].name == "max_exp_avg_sq"
                                         ? "amsgrad is on but there is no max_exp_avg_sq"
                                         : "no " + slots[k].name + " tensor, which " + Title() + " keeps under its "
                                               "group's hyperparameters");
      return false;
    }
    for (size_t k = 0; k < 3; ++k) {
      const TensorRef* t = out[k];
      if (t == nullptr) continue;
      // torch keeps state in the parameter's dtype; float32 state for a
      // low-precision parameter is the mixed-precision layout.
      if (t->dtype != info.dtype && t->dtype != DType::kFloat32) {
        Add(info.name, "dtype", std::string("state dtype ") + std::string(GetDTypeInfo(t->dtype).name) +
                                    " does not fit the parameter's " + std::string(GetDTypeInfo(info.dtype).name));
        return false;
      }
      // A DTensor (FSDP2) holds this rank's shard: its global shape must fit,
      // and the replay runs on the shard.
      const std::vector<int64_t> shape = t->whole_sizes();
      if (shape != info.shape) {
        Add(info.name, "shape", "state shape " + ShapeText(shape) + " does not fit the parameter's " +
                                    ShapeText(info.shape));
        return false;
      }
    }
    return true;
  }

  Status Param(size_t p, const OptimizerHyper& hyper, const CheckpointFile* model, NodeId model_dict,
               std::map<double, std::string>& steps) {
    const ParamInfo& info = m_.params[p];
    const ParamMatch& pm = m_.match.params[p];
    if (pm.collided) return Status();  // reported as a collision
    if (pm.keys.empty()) {
      without_state_.push_back(info.name);
      return Status();
    }
    const StateKey& key = m_.state.keys[pm.keys.front()];
    if (CreatesStateUpFront(r_.algorithm) && !key.nested_views && g_.at(key.value).kind == NodeKind::kDict) {
      NodeId step = DictLookup(g_, key.value, "step");
      std::optional<double> s = step == kNoNode ? std::nullopt : NumberValue(m_.file->checkpoint(), m_.file->bytes(), step);
      if (s && *s == 0) {  // Adagrad's state of a parameter no step ever reached
        without_state_.push_back(info.name);
        return Status();
      }
    }
    NodeId view = replay_.heavyball3 ? HeavyBall3View(key) : kNoNode;
    const bool hb3 = view != kNoNode;
    if (!hb3 && (pm.keys.size() > 1 || key.nested_views)) {
      Add(info.name, "unreplayable", "state split into per-view entries; the replay covers whole-tensor state");
      return Status();
    }
    const Algorithm algo = replay_.algorithm;
    const std::vector<StateSlot> slots = StateSlots(algo, hyper);
    const TensorRef* refs[3];
    if (!Fields(info, hb3 ? view : key.value, hb3, slots, refs)) return Status();
    // HeavyBall 3.x keeps one counter per group (group_step_); torch.optim one
    // per parameter (but SGD none), and fails on an entry without it.
    if (!hb3 && KeepsStep(algo) && DictLookup(g_, key.value, "step") == kNoNode) {
      Add(info.name, "no-step",
          algo == Algorithm::kAdamW || algo == Algorithm::kAdam
              ? "no per-parameter step: torch.optim's Adam / AdamW raise KeyError('step') on their first step from "
                "this entry (HeavyBall 0.x keeps its counter in the group: `optstate migrate` writes it for "
                "HeavyBall 3.x)"
              : "no per-parameter step: torch.optim's " + Title() + " raises KeyError('step') on its first step "
                "from this entry");
    }
    float step = hb3 ? group_step_ : StepOf(key.value);
    if (!hb3 && KeepsStep(algo)) steps.emplace(step, info.name);
    std::vector<float> state[3];
    size_t n = 0;
    for (size_t k = 0; k < 3; ++k) {
      if (refs[k] == nullptr) continue;
      auto values = ReadFloats(*m_.file, *refs[k]);
      if (!values.ok()) {
        Add(info.name, "dtype", std::string(values.status().message()));
        return Status();
      }
      state[k] = std::move(*values);
      n = state[k].size();
    }
    // The parameter's values: the model's, or synthetic.
    std::vector<float> values;
    if (model != nullptr) {
      NodeId t = DictLookup(model->checkpoint().graph, model_dict, info.name);
      if (t != kNoNode && model->checkpoint().graph.at(t).kind == NodeKind::kTensor) {
        OPTSTATE_ASSIGN_OR_RETURN(values,
                                  ReadFloats(*model, model->checkpoint().tensors[model->checkpoint().graph.at(t).tensor]));
      }
    }
    const bool model_values = values.size() == n;
    if (!model_values) {
      values = Probe(n, o_.probe_seed, p, 0, 0.05f);  // no model, or a DTensor shard of it
      r_.values_from_model = false;
    }
    const float start = algo == Algorithm::kAdagrad ? static_cast<float>(hyper.initial_accumulator_value) : 0.0f;
    bool untrained = true, nonfinite_state = false;
    for (size_t k = 0; k < 3; ++k) {
      if (refs[k] == nullptr) continue;
      const std::string name = hb3 ? (k == 0 ? "exp_avg" : "exp_avg_sq") : slots[k].name;
      size_t bad = n, negative = n;
      for (size_t i = 0; i < n; ++i) {
        float x = state[k][i];
        if (bad == n && !std::isfinite(x)) bad = i;
        if (negative == n && x < 0) negative = i;
        untrained = untrained && x == start;
      }
      const bool adam = algo == Algorithm::kAdamW || algo == Algorithm::kAdam;
      nonfinite_state = nonfinite_state || bad != n;
      if (bad != n) {
        Add(info.name, "non-finite", adam ? "non-finite moment at element " + std::to_string(bad)
                                          : "non-finite " + name + " at element " + std::to_string(bad));
      }
      if (negative != n && IsSquareSum(name)) {
        if (name == "exp_avg_sq") {
          Add(info.name, "negative-exp-avg-sq", "exp_avg_sq < 0 at element " + std::to_string(negative) +
                                                    " (a second moment cannot be negative)");
        } else if (name != "max_exp_avg_sq") {
          Add(info.name, "negative-accumulator", name + " < 0 at element " + std::to_string(negative) +
                                                     " (a running sum of squares cannot be negative)");
        }
      }
    }
    // State that is exactly one zero-gradient step at lr 0 from fresh state
    // (DCP's init; with weight decay it is not zero) was never trained either.
    // Only the model's own values can show it.
    bool init_step = false;
    if (!untrained && model_values && !hb3) {
      init_step = EqualsInitStep(algo, hyper, values, state) ||
                  (replay_.ambiguous_adam && EqualsInitStep(Algorithm::kAdam, hyper, values, state));
    }
    // The replay: the same probe step from the loaded state and from fresh state.
    std::vector<float> grad = Probe(n, o_.probe_seed, p, 1, 0.01f);
    std::vector<float> loaded = values, fresh = values;
    std::vector<float> fresh_state[3];
    for (size_t k = 0; k < 3; ++k) fresh_state[k].assign(state[k].size(), 0.0f);
    Status s;
    if (hb3) {
      HeavyBallAdamWStep(loaded, grad, state[0], state[1], hyper, step);
      HeavyBallAdamWStep(fresh, grad, fresh_state[0], fresh_state[1], hyper, 0);
    } else {
      float loaded_step = step, fresh_step = 0;
      OptimizerTensor a, b;
      a.param = loaded.data();
      b.param = fresh.data();
      a.grad = b.grad = grad.data();
      a.numel = b.numel = static_cast<int64_t>(n);
      a.step = &loaded_step;
      b.step = &fresh_step;
      for (size_t k = 0; k < 3; ++k) {
        a.state[k] = state[k].empty() ? nullptr : state[k].data();
        b.state[k] = fresh_state[k].empty() ? nullptr : fresh_state[k].data();
      }
      InitOptimizerState(algo, hyper, b);
      s = OptimizerStep(algo, std::span<const OptimizerTensor>(&a, 1), hyper);
      if (s.ok()) s = OptimizerStep(algo, std::span<const OptimizerTensor>(&b, 1), hyper);
    }
    if (!s.ok()) {
      Add(info.name, "unreplayable", std::string(s.message()));
      return Status();
    }
    ++r_.replayed;
    bool finite = true;
    for (float x : loaded) finite = finite && std::isfinite(x);
    if (!finite && !nonfinite_state) Add(info.name, "non-finite-update", "one step from this state gives non-finite parameters");
    if (n > 0 && (untrained || init_step || std::memcmp(loaded.data(), fresh.data(), n * sizeof(float)) == 0)) {
      const bool adam = algo == Algorithm::kAdamW || algo == Algorithm::kAdam;
      Add(info.name, "cold",
          init_step  ? "its state is exactly what one step with a zero gradient at lr 0 gives fresh state (DCP's "
                       "init step): never trained"
          : !untrained ? "its state changes nothing: a step from it equals a step from fresh state"
          : adam       ? "its moments are all zero (state created, never trained: DCP's init step?)"
                       : "its state is still where " + Title() + " starts it (created, never trained: DCP's init "
                         "step?)");
      r_.cold.push_back(info.name);
    }
    return Status();
  }

  const MatchedState& m_;
  const VerifyOptions& o_;
  const ObjectGraph& g_;
  VerifyReport r_;
  std::vector<std::string> without_state_;
  bool sharded_noted_ = false;
  float group_step_ = 0;  // HeavyBall 3.x: this group's counter
  Replay replay_;
  std::set<std::string> guessed_{m_.order_ambiguous.begin(), m_.order_ambiguous.end()};
};

}  // namespace

StatusOr<VerifyReport> VerifyState(const MatchedState& m, const VerifyOptions& options) {
  Verifier v(m, options);
  return v.Run(m.model(), m.model_dict);
}

}  // namespace optstate
