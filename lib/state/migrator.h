// The migration of legacy HeavyBall state to 3.x's layout, as one object:
// recognising the era (migrate_recognise.cc), then counting steps, laying the
// state out per view and adding 3.x's counters (state_migrate.cc).
// Internal to lib/state.
#ifndef OPTSTATE_LIB_STATE_MIGRATOR_H_
#define OPTSTATE_LIB_STATE_MIGRATOR_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "optstate/state_migrate.h"
#include "optstate/collisions.h"
#include "state/migrate_layout.h"
#include "torch/graph_builder.h"

namespace optstate::migrate_internal {

// The dict of fields of a state entry: view 0 of a per-view nested entry.
inline NodeId FieldsOf(const ObjectGraph& g, const StateKey& k) {
  return k.nested_views ? g.at(k.value).entries.front().second : k.value;
}

class Migrator {
 public:
  Migrator(const Checkpoint& cp, const OptimizerState& st, const std::vector<ParamInfo>& params,
           const MatchReport& m, const MigrateOptions& o)
      : cp_(cp), st_(st), params_(params), m_(m), o_(o) {}

  StatusOr<MigrateResult> Run();

 private:
  const ObjectGraph& in() const { return cp_.graph; }

  Status Recognise();

  // 2.x: {index: {0: {...}}} with transform-indexed names; the counter `step`
  // in the first parameter's view, counted as 3.x counts it.
  Status RecogniseEra2(bool soap);

  // AdamW family: every entry a dict of exp_avg / exp_avg_sq.
  Status RecogniseAdamW();

  // 0.x and 1.x ForeachSOAP: their own group fields only, entries {step,
  // exp_avg, exp_avg_sq, Q, GG} (1.x: the moments named by transform), one
  // precondition frequency for the optimizer (3.x keeps one schedule).
  Status RecogniseSoap(NodeId groups);

  // 1.6's groups keep no precondition_frequency: HeavyBall popped it into the
  // optimizer (1/f per step, a sum whose integer part growing recomputes Q:
  // 3.x's own schedule). Without --precondition-frequency the constructor's
  // default 2 is taken, and said. A schedule function (use_precond_schedule)
  // or a random one (stochastic_schedule) has no position to carry.
  Status Soap16Schedule(NodeId group, std::optional<double>& frequency);

  // SOAP's precondition schedule for 3.x. 0.x recomputed Q when its
  // per-parameter step (one behind the optimizer's) was a multiple of f; 3.x
  // does when floor(cumulative_prob) grows, adding 1/f per step, so starting
  // the sum at (steps - 1) / f keeps 0.x's steps. 2.x already kept 3.x's
  // schedule: its pickled number and accumulator carry over.
  PreconditionSchedule Schedule() const;

  void UseStepsOption(const std::optional<int64_t>& found, const std::string& what);

  // 0.x AdamW counts steps in the group's `k`; with foreach=False the saved
  // groups keep k = 0 while per-parameter copies (not saved) held the count.
  Status StepsFromGroupCounter();

  // 1.x AdamW and 0.x SOAP keep `step` in the entries; every one that has it
  // must agree (1.x foreach=True keeps it on the first only). 0.x SOAP counts
  // from 0 on its first step, which only builds the preconditioner: 3.x counts
  // that step too, so it gets one more.
  Status StepsFromEntries();

  // {index: {name: v}} -> {index: {0: {3.x name: v, is_initialized: {...}}}};
  // split views ({index: {view: {...}}}, made by the remap) keep their views.
  Status RelayoutState(GraphBuilder& b);

  bool IsZeroFilled(NodeId tensor) const;

  // 3.x reads a group's counter from the first of its parameters whose view
  // dict has `step` (and writes it there after each step), as a 0-d int64.
  void AddStepCounters(GraphBuilder& b, std::vector<std::pair<NodeId, NodeId>>& out);

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

}  // namespace optstate::migrate_internal

#endif  // OPTSTATE_LIB_STATE_MIGRATOR_H_
