// The validate rules that need only the checkpoint: security findings, each
// optimizer state's keys, groups, steps and lr, and (unless --no-values) its
// values and the zip records' CRCs, read in one sweep (value_scan.h).
#include "check/validate_checkpoint.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "check/value_scan.h"
#include "optstate/params.h"
#include "pickle/graph_walk.h"
#include "state/optimizer_family.h"
#include "torch/element_values.h"

namespace optstate {
namespace {

bool IsFloatType(DType d) { return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kBFloat16 || d == DType::kFloat16; }

class Validator {
 public:
  Validator(const Checkpoint& cp, const TensorBytesReader& read, FindingSink& sink)
      : cp_(cp), g_(cp.graph), read_(read), sink_(sink), o_(sink.options()), r_(sink.report()) {}

  // For a file: contiguous tensors are scanned where they lie, without a copy.
  void ScanInPlace(const CheckpointFile* file) { file_ = file; }

  void Add(std::string_view rule, std::string path, std::string message) {
    sink_.Add(rule, std::move(path), std::move(message));
  }

  void Security() { AddSecurityFindings(cp_.findings, sink_); }

  void Optimizers() {
    for (const std::string& path : FindOptimizerStates(cp_)) {
      StatusOr<OptimizerState> s = ReadOptimizerState(cp_, path);
      if (s.ok()) Optimizer(*s);
    }
  }

 private:
  std::string At(const OptimizerState& s, const std::string& rest) const {
    return (s.path.empty() ? "" : s.path + ".") + rest;
  }

  // A step value: a 0-d tensor (torch) or a plain number (HeavyBall's int step).
  std::optional<double> Step(NodeId v) const {
    const Node& n = g_.at(v);
    if (n.kind == NodeKind::kInt) return static_cast<double>(n.int_value);
    if (n.kind == NodeKind::kFloat) return n.float_value;
    if (n.kind != NodeKind::kTensor) return std::nullopt;
    const TensorRef& t = cp_.tensors[n.tensor];
    if (t.numel() != 1) return std::nullopt;
    StatusOr<std::vector<std::byte>> b = read_(t);
    if (!b.ok() || b->empty()) return std::nullopt;
    if (IsFloatType(t.dtype)) return LoadAsDouble(b->data(), t.dtype, 0);
    if (t.dtype == DType::kInt64) {
      int64_t i;
      std::memcpy(&i, b->data(), 8);
      return static_cast<double>(i);
    }
    return std::nullopt;
  }

  void Optimizer(const OptimizerState& s) {
    // Keys torch.optim will not map.
    std::map<KeyKind, size_t> odd;
    for (const StateKey& k : s.keys) {
      if (k.kind != KeyKind::kIndex && k.kind != KeyKind::kFqn) ++odd[k.kind];
    }
    for (auto [kind, n] : odd) {
      const bool passed_through = (kind == KeyKind::kPtrShape || kind == KeyKind::kBarePtr) && s.groups_name_params;
      Add("state-keys-not-canonical", At(s, "state"),
          std::to_string(n) + " of " + std::to_string(s.keys.size()) + " state keys are " +
              std::string(KeyKindName(kind)) + " (" + std::string(KeyKindOrigin(kind)) +
              "): torch.optim files that state under no parameter, so training restarts without it. " +
              (passed_through
                   ? "param_groups name the parameters by FQN: FSDP.optim_state_dict (or DSD) converted them and "
                     "passed HeavyBall's own keys through unconverted. Under FSDP1 those entries are the saving "
                     "rank's pieces of flattened parameters (under FULL_STATE_DICT, rank 0's alone: the full state "
                     "was never gathered), which no remap of this one file can make whole: save every rank's "
                     "opt.state_dict() as it is and run `optstate collisions` on the rank set."
                   : "Run `optstate collisions` then `optstate remap`."));
    }
    // param_groups: duplicates, and which group each parameter is in.
    std::map<std::string, size_t> group_of;
    for (size_t gi = 0; gi < s.group_params.size(); ++gi) {
      for (NodeId p : s.group_params[gi]) {
        std::string name = ValueText(g_, p);
        if (!group_of.emplace(name, gi).second) {
          Add("param-group-duplicate", At(s, "param_groups[" + std::to_string(gi) + "].params"),
              "parameter " + name + " is listed again (first in group " + std::to_string(group_of[name]) +
                  "): load_state_dict would pair the wrong state with the wrong parameter.");
        }
      }
    }
    CheckStateAliasing(cp_, s, s.path, sink_);
    // State and parameters against each other (canonical keys only: others are reported above).
    const OptimizerFamily family = RecogniseOptimizer(cp_, s);
    std::set<std::string> with_state;
    std::map<size_t, std::vector<std::pair<std::string, double>>> steps;  // group -> (key, step)
    bool all_steps_one = !s.keys.empty();
    size_t first_task = tasks_.size();
    for (const StateKey& k : s.keys) {
      if (k.kind != KeyKind::kIndex && k.kind != KeyKind::kFqn) {
        all_steps_one = false;
        continue;
      }
      std::string name = k.kind == KeyKind::kIndex ? std::to_string(k.index) : "'" + k.fqn + "'";
      with_state.insert(name);
      auto gi = group_of.find(name);
      if (gi == group_of.end()) {
        Add("state-without-param", At(s, "state[" + k.text + "]"),
            "no param_group lists " + name + ": torch.optim keeps this entry but no parameter uses it.");
      }
      NodeId step = DictLookup(g_, k.value, "step");
      std::optional<double> v = step == kNoNode ? std::nullopt : Step(step);
      // Adagrad makes state for every parameter up front: step 0 there is a
      // parameter never stepped (frozen, unused), not state out of step.
      const bool never_stepped = v && *v == 0.0 && CreatesStateUpFront(family.name);
      if (v && gi != group_of.end() && !never_stepped) steps[gi->second].emplace_back(k.text, *v);
      all_steps_one &= v && *v == 1.0;
      const size_t entry_first_task = tasks_.size();
      Values(s, k);
      // After two or more steps a moment is zero only if every gradient was:
      // an entry zeroed by hand or by a tool that reset it (it loads, but cold).
      if (v && *v >= 2.0) zero_candidates_.push_back({At(s, "state[" + k.text + "]"), entry_first_task, tasks_.size(), *v});
    }
    // Keys that map to nothing are reported above; every parameter would repeat it.
    // LBFGS keeps its one entry under the first parameter, by design.
    if (odd.empty() && !KeepsOneEntryForAllParams(family.name)) {
      std::map<size_t, std::vector<std::string>> missing;
      for (auto& [name, gi] : group_of) {
        if (!with_state.count(name)) missing[gi].push_back(name);
      }
      for (auto& [gi, names] : missing) {
        std::string list;
        for (size_t i = 0; i < names.size() && i < 8; ++i) list += (i ? ", " : "") + names[i];
        if (names.size() > 8) list += ", ...";
        Add("param-without-state", At(s, "param_groups[" + std::to_string(gi) + "]"),
            std::to_string(names.size()) + " of " + std::to_string(s.group_params[gi].size()) +
                " parameters have no state (" + list + "): frozen, never stepped, or their state sits under "
                "other keys.");
      }
    }
    for (auto& [gi, list] : steps) {
      double lo = list[0].second, hi = lo;
      for (auto& [key, v] : list) lo = std::min(lo, v), hi = std::max(hi, v);
      if (lo != hi) {
        Add("steps-differ-in-group", At(s, "param_groups[" + std::to_string(gi) + "]"),
            "steps run from " + ValueTextOfNumber(lo) + " to " + ValueTextOfNumber(hi) +
                " in one group: state was mixed from different points of training, or some entries belong "
                "to other parameters.");
      }
      NodeId group = s.group_params.size() > gi ? GroupNode(s, gi) : kNoNode;
      NodeId lr_node = group == kNoNode ? kNoNode : DictLookup(g_, group, "lr");
      std::optional<double> lr = lr_node == kNoNode ? std::nullopt : Step(lr_node);
      if (lr && *lr == 0.0 && hi > 0) LrZero(s, gi, group, hi);
    }
    if (o_.scan_values && all_steps_one) untrained_candidates_.push_back({At(s, "state"), first_task, tasks_.size()});
  }

  // lr 0 after steps is the leak of DCP's init step (HeavyBall's per-parameter
  // group copies kept it), or the end of a schedule that decays to 0 (HF
  // Trainer's linear default, CosineAnnealingLR(eta_min=0), torchtitan's).
  // Every torch scheduler sets `initial_lr`; a scheduler's own state in the
  // file whose last lr for this group is 0 settles it.
  void LrZero(const OptimizerState& s, size_t gi, NodeId group, double steps) {
    NodeId initial = DictLookup(g_, group, "initial_lr");
    const double initial_lr = initial == kNoNode ? 0.0 : Step(initial).value_or(0.0);
    const std::string where = At(s, "param_groups[" + std::to_string(gi) + "].lr");
    if (!(initial_lr > 0)) {
      Add("lr-zero-with-steps", where,
          "lr is 0 in a group whose state has taken " + ValueTextOfNumber(steps) +
              " steps, and no scheduler set it (no initial_lr): the lr=0 of DCP's init step leaked into the saved "
              "groups (HeavyBall's per-parameter group copies); training resumed from this will not move. Set lr "
              "in param_groups.");
      return;
    }
    std::optional<double> last = SchedulerLastLr(gi);
    if (last && *last == 0) return;  // the schedule ended at 0, as its own state says
    Add("lr-zero-after-schedule", where,
        "lr is 0 after " + ValueTextOfNumber(steps) + " steps in a group a scheduler started at initial_lr " +
            ValueTextOfNumber(initial_lr) + (last ? ", but the scheduler's state in the file says its last lr was " +
                                                         ValueTextOfNumber(*last)
                                                   : " and the file holds no scheduler state") +
            ": the end of a schedule that decays to 0, or DCP's init-step lr=0 leaked into the groups. Resuming "
            "with this lr trains nothing; check the schedule.");
  }

  // `_last_lr[gi]` of a torch LR scheduler's state_dict saved in the file
  // (under the root, or in a list there: Lightning's lr_schedulers).
  std::optional<double> SchedulerLastLr(size_t gi) const {
    const Node& root = g_.at(g_.root);
    if (root.kind != NodeKind::kDict) return std::nullopt;
    std::vector<NodeId> candidates;
    for (auto [k, v] : root.entries) {
      candidates.push_back(v);
      if (g_.at(v).kind == NodeKind::kList) {
        for (NodeId item : g_.at(v).items) candidates.push_back(item);
      }
    }
    for (NodeId c : candidates) {
      NodeId last = DictLookup(g_, c, "_last_lr");
      if (last == kNoNode || DictLookup(g_, c, "last_epoch") == kNoNode) continue;
      const Node& list = g_.at(last);
      if ((list.kind == NodeKind::kList || list.kind == NodeKind::kTuple) && gi < list.items.size()) {
        return Step(list.items[gi]);
      }
    }
    return std::nullopt;
  }

  NodeId GroupNode(const OptimizerState& s, size_t gi) const {
    NodeId groups = DictLookup(g_, s.node, "param_groups");
    if (groups == kNoNode || gi >= g_.at(groups).items.size()) return kNoNode;
    return g_.at(groups).items[gi];
  }

  static std::string ValueTextOfNumber(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }

  // Tensor fields of one entry (and of its per-view dicts) become scan tasks:
  // counted where they lie in a mapped file (in the records' sweep, see
  // ScanAndReport), else read and counted now.
  void Values(const OptimizerState& s, const StateKey& k) {
    if (!o_.scan_values) return;
    std::vector<std::pair<std::string, NodeId>> fields;
    auto collect = [&](NodeId dict, const std::string& prefix) {
      if (g_.at(dict).kind != NodeKind::kDict) return;
      for (auto [key, v] : g_.at(dict).entries) fields.emplace_back(prefix + KeyText(g_, key), v);
    };
    collect(k.value, "");
    for (size_t i = 0; i < fields.size(); ++i) {
      if (g_.at(fields[i].second).kind == NodeKind::kDict) collect(fields[i].second, fields[i].first + ".");
    }
    for (auto& [name, v] : fields) {
      const Node& n = g_.at(v);
      if (n.kind != NodeKind::kTensor) continue;
      const TensorRef& t = cp_.tensors[n.tensor];
      if (!IsFloatType(t.dtype) || t.storage < 0) continue;
      ScanTask task{At(s, "state[" + k.text + "]." + name), t.numel(), name.ends_with("exp_avg_sq"),
                    name.ends_with("exp_avg") || name.ends_with("exp_avg_sq"), kNoRange, {}};
      std::optional<ByteSpan> in_place;
      if (file_) {
        StatusOr<std::optional<ByteSpan>> found = TensorBytesInPlace(file_->bytes(), cp_, t);
        if (!found.ok()) continue;
        in_place = *found;
      }
      if (in_place) {
        task.range = ranges_.size();
        ranges_.push_back({*in_place, t.dtype, {}});
        r_.value_bytes += in_place->size();
      } else {
        StatusOr<std::vector<std::byte>> bytes = read_(t);
        if (!bytes.ok()) continue;
        task.counts = CountValues(*bytes, t.dtype);
        r_.value_bytes += bytes->size();
      }
      tasks_.push_back(std::move(task));
    }
  }

 public:
  // Reads what was deferred, every stored record of a file with it (`records`:
  // the zip entries whose CRCs to check), then reports values and CRCs.
  void ScanAndReport(const std::vector<const ZipEntry*>& records, const SweptRecords* swept) {
    std::vector<ScanRecord> scan;
    for (const ZipEntry* e : records) scan.push_back({file_->bytes().subspan(e->data_offset, e->size), 0});
    if (!scan.empty() || !ranges_.empty()) {
      ScanHooks hooks;
      if (file_) hooks.locate = [this](ByteSpan b) { return file_->FileRangeOf(b); };
      ScanRecordsAndRanges(scan, ranges_, hooks, 2, swept);
    }
    for (ScanTask& task : tasks_) {
      if (task.range != kNoRange) task.counts = ranges_[task.range].counts;
      if (task.counts.nonfinite) {
        Add("non-finite", task.path, std::to_string(task.counts.nonfinite) + " of " + std::to_string(task.numel) +
                                         " values are NaN or infinite: the next step spreads them into the parameter.");
      }
      if (task.second_moment && task.counts.negative) {
        Add("negative-exp-avg-sq", task.path,
            std::to_string(task.counts.negative) + " of " + std::to_string(task.numel) +
                " values are negative: exp_avg_sq is a mean of squares; this state is corrupt or belongs to another "
                "field.");
      }
    }
    for (const ZeroCandidate& z : zero_candidates_) {
      bool any_moment = false, all_zero = true;
      for (size_t i = z.first_task; i < z.end_task; ++i) {
        if (!tasks_[i].moment) continue;
        any_moment = true;
        all_zero &= !tasks_[i].counts.nonzero && !tasks_[i].counts.nonfinite;
      }
      if (any_moment && all_zero) {
        Add("state-zero-after-steps", z.at,
            "step is " + ValueTextOfNumber(z.step) + " but every moment is zero: only zero gradients at every step "
            "give that; the entry was reset or zeroed after training. It loads, and resumes as if untrained.");
      }
    }
    for (const Untrained& u : untrained_candidates_) {
      bool all_zero = true;
      for (size_t i = u.first_task; i < u.end_task; ++i) all_zero &= !(tasks_[i].moment && tasks_[i].counts.nonzero);
      if (all_zero) {
        Add("untrained-init-state", u.at,
            "every step is 1 and every moment is zero: this state was created by DCP's init step (a zero-gradient "
            "step at lr=0) and never trained. Resuming from it restarts Adam's bias correction at step 2.");
      }
    }
    ReportRecordCrcs(cp_, records, scan, sink_);
  }

 private:
  static constexpr size_t kNoRange = SIZE_MAX;
  struct ScanTask {
    std::string path;
    uint64_t numel;
    bool second_moment, moment;
    size_t range;        // into ranges_, or kNoRange when counted already
    ValueCounts counts;
  };
  struct Untrained {     // an optimizer whose steps are all 1: untrained if its moments are all zero
    std::string at;
    size_t first_task, end_task;
  };
  std::vector<ScanTask> tasks_;
  std::vector<ScanRange> ranges_;
  std::vector<Untrained> untrained_candidates_;
  struct ZeroCandidate {  // one entry at step >= 2: cold if its moments are all zero
    std::string at;
    size_t first_task, end_task;
    double step;
  };
  std::vector<ZeroCandidate> zero_candidates_;

  const Checkpoint& cp_;
  const ObjectGraph& g_;
  const CheckpointFile* file_ = nullptr;
  const TensorBytesReader& read_;
  FindingSink& sink_;
  const ValidateOptions& o_;
  ValidationReport& r_;
};

}  // namespace

void CheckCheckpointRules(const Checkpoint& checkpoint, const TensorBytesReader& read, const CheckpointFile* file,
                          const std::vector<const ZipEntry*>& records, FindingSink& sink, const SweptRecords* swept) {
  Validator v(checkpoint, read, sink);
  v.ScanInPlace(file);
  v.Security();
  v.Optimizers();
  v.ScanAndReport(records, swept);
}

}  // namespace optstate
