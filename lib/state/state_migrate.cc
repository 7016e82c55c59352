#include "optstate/state_migrate.h"

#include <map>
#include <set>

#include "state/migrator.h"

namespace optstate {
namespace migrate_internal {

StatusOr<MigrateResult> Migrator::Run() {
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

// SOAP's precondition schedule for 3.x. 0.x recomputed Q when its
// per-parameter step (one behind the optimizer's) was a multiple of f; 3.x
// does when floor(cumulative_prob) grows, adding 1/f per step, so starting
// the sum at (steps - 1) / f keeps 0.x's steps. 2.x already kept 3.x's
// schedule: its pickled number and accumulator carry over.
PreconditionSchedule Migrator::Schedule() const {
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

void Migrator::UseStepsOption(const std::optional<int64_t>& found, const std::string& what) {
  r_.steps = *o_.steps;
  r_.steps_from = "--steps " + std::to_string(*o_.steps);
  if (found && *found != *o_.steps) {
    r_.notes.push_back(what + " gives " + std::to_string(*found) + "; --steps " + std::to_string(*o_.steps) +
                       " was used");
  }
}

// 0.x AdamW counts steps in the group's `k`; with foreach=False the saved
// groups keep k = 0 while per-parameter copies (not saved) held the count.
Status Migrator::StepsFromGroupCounter() {
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
Status Migrator::StepsFromEntries() {
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
Status Migrator::RelayoutState(GraphBuilder& b) {
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
            if (StrValue(g, name) == f.legacy) b.Set(d, f.heavyball3, v);
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

bool Migrator::IsZeroFilled(NodeId tensor) const {
  const Checkpoint& c = r_.checkpoint;
  if (tensor == kNoNode || c.graph.at(tensor).kind != NodeKind::kTensor) return false;
  int64_t storage = c.tensors[c.graph.at(tensor).tensor].storage;
  return storage >= 0 && c.storages[static_cast<size_t>(storage)].zero_fill;
}

// 3.x reads a group's counter from the first of its parameters whose view
// dict has `step` (and writes it there after each step), as a 0-d int64.
void Migrator::AddStepCounters(GraphBuilder& b, std::vector<std::pair<NodeId, NodeId>>& out) {
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

}  // namespace migrate_internal

StatusOr<MigrateResult> MigrateState(const Checkpoint& checkpoint, const OptimizerState& state,
                                     const std::vector<ParamInfo>& params, const MatchReport& match,
                                     const MigrateOptions& options) {
  return migrate_internal::Migrator(checkpoint, state, params, match, options).Run();
}

}  // namespace optstate
