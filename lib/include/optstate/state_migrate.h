// Legacy HeavyBall optimizer state rewritten as today's optimizers save it,
// so that they train from it (remap only fixes the keys).
//
// The entries are first remapped to parameter indices (state_remap.h: every
// entry accounted for, collisions by policy), then laid out as HeavyBall 3.2's
// own state_dict() holds them, read from its code and checked against
// checkpoints real 3.2.0 wrote: per parameter {view: {name: value}} even for
// one view, state named by transform ("update_by_adam_exp_avg_0"),
// `is_initialized` the set of transform indices, the group's step counter as
// `step` in the first parameter's view 0 (where 3.x looks for it),
// param_groups with 3.2's fields (values carried over where the old group had
// them, 3.2's defaults otherwise), and the top-level `heavyball` entry without
// its pickled `precond_schedule` (3.x then keeps its constructor's).
// Only the AdamW family is migrated so far: HeavyBall 0.x (ForeachAdamW:
// exp_avg, exp_avg_sq, the group counter `k`) and 1.x (update_by_adam_exp_avg,
// _sq, `step` in the entries, (Parameter, i) keys, sentinel objects and the
// class pickled in the groups); other algorithms are refused by name, never
// half-converted.
#ifndef OPTSTATE_STATE_MIGRATE_H_
#define OPTSTATE_STATE_MIGRATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optstate/checkpoint_writer.h"
#include "optstate/state_remap.h"

namespace optstate {

// MigrateState always builds HeavyBall 3.x's layout; --to torch is that
// layout turned into torch's by WriteAsTorchAdamW below.
struct MigrateOptions {
  CollisionPolicy on_collision = CollisionPolicy::kFail;
  // Steps taken, for files whose group counter does not say (HeavyBall 0.x
  // with foreach=False saves k = 0: its per-parameter group copies held it).
  std::optional<int64_t> steps;
};

struct MigrateResult {
  Checkpoint checkpoint;            // tensors still point into the input's bytes
  RemapResult remap;                // the entries' fates (its checkpoint is not used)
  std::string algorithm;            // what the input was recognised as
  int64_t steps = 0;                // the step counter written
  std::string steps_from;           // where it came from, for reports
  std::vector<std::string> renamed; // "exp_avg -> update_by_adam_exp_avg_0"
  std::vector<std::string> notes;   // what a user should know (defaults taken, fields left out)
};

// kUnsupported for algorithms not migrated yet and for state already in 3.x's
// layout; kInvalidArgument for what the remap refuses and for a missing step
// count; errors name the entry or group.
StatusOr<MigrateResult> MigrateState(const Checkpoint& checkpoint, const OptimizerState& state,
                                     const std::vector<ParamInfo>& params, const MatchReport& match,
                                     const MigrateOptions& options);

// --to torch, from MigrateState's result for an AdamW-family file: the
// optimizer state dict alone, as torch.optim.AdamW saves it. HeavyBall's
// moments are bias-corrected in the state (its lerp by beta_debias is exactly
// torch's running average divided by 1 - beta^t), so exp_avg = m (1 - beta1^t)
// and exp_avg_sq = v (1 - beta2^t), each parameter gets step t as a float32
// 0-d tensor, and the groups get torch's AdamW fields. The one difference that
// remains is eps: HeavyBall divides by max(sqrt(v), eps), torch by
// sqrt(v_hat) + eps. kUnsupported for split views and non-float32 state.
struct TorchConversion {
  double beta1 = 0, beta2 = 0;
  int64_t steps = 0;
  size_t entries = 0;
  std::vector<std::string> notes;
};
StatusOr<WriteReport> WriteAsTorchAdamW(const CheckpointFile& input, const OptimizerState& state,
                                        const MigrateResult& heavyball3, const std::string& path,
                                        const WriteOptions& options, TorchConversion* conversion);

}  // namespace optstate

#endif  // OPTSTATE_STATE_MIGRATE_H_
