// Legacy HeavyBall optimizer state rewritten as today's optimizers save it,
// so that they train from it (remap only fixes the keys).
//
// The entries are first remapped to parameter indices (collisions.h, the remap: every
// entry accounted for, collisions by policy), then laid out as HeavyBall 3.2's
// own state_dict() holds them, read from its code and checked against
// checkpoints real 3.2.0 wrote: per parameter {view: {name: value}} even for
// one view, state named by transform ("update_by_adam_exp_avg_0"),
// `is_initialized` the set of transform indices, the group's step counter as
// `step` in the first parameter's view 0 (where 3.x looks for it),
// param_groups with 3.2's fields (values carried over where the old group had
// them, 3.2's defaults otherwise), and the top-level `heavyball` entry without
// its pickled `precond_schedule` (3.x then keeps its constructor's).
// Migrated so far: the AdamW family of HeavyBall 0.x (ForeachAdamW: exp_avg,
// exp_avg_sq, the group counter `k`) and 1.x (update_by_adam_exp_avg, _sq,
// `step` in the entries, (Parameter, i) keys, sentinel objects and the class
// pickled in the groups) and 2.x (3.x's names nested per view, the class in
// the groups), and SOAP of 0.x ForeachSOAP (per-parameter `step`, exp_avg kept
// unprojected: rotated into Q's eigenbasis, as 3.x keeps it, when written), 1.x
// (moments named by transform, already projected) and 2.x (transforms renumbered, 3.x's batch dimension added, its pickled
// schedule carried over only when it is a number). Other algorithms and eras
// are refused by name, never half-converted.
#ifndef OPTSTATE_STATE_MIGRATE_H_
#define OPTSTATE_STATE_MIGRATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optstate/checkpoint_writer.h"
#include "optstate/collisions.h"

namespace optstate {

// MigrateState always builds HeavyBall 3.x's layout; --to torch is that
// layout turned into torch's by WriteAsTorchAdamW below.
struct MigrateOptions {
  CollisionPolicy on_collision = CollisionPolicy::kFail;
  // Steps taken, for files whose group counter does not say (HeavyBall 0.x
  // with foreach=False saves k = 0: its per-parameter group copies held it).
  std::optional<int64_t> steps;
  // SOAP's precondition_frequency, for files that do not keep it (HeavyBall
  // 1.6 pops it out of its groups); HeavyBall's default 2 when absent.
  std::optional<int64_t> precondition_frequency;
  // The bytes the checkpoint was read from, so that a step kept as a tensor
  // (HeavyBall 3.x's 0-d int64 counter) can be read; empty: Python numbers only.
  ByteSpan input_bytes;
};

// A storage of the migrated checkpoint whose bytes are computed when it is
// written: a 0-d int64 (the step counter, as 3.x saves it), or a float32
// moment projected into the eigenbasis of `bases` (one per dimension, absent
// where that dimension has none; all tensors of the input).
struct ComputedStorage {
  size_t storage = 0;               // index in MigrateResult::checkpoint.storages
  int64_t int_value = 0;            // when `source` is absent
  std::optional<TensorRef> source;
  std::vector<std::optional<TensorRef>> bases;
};

struct MigrateResult {
  Checkpoint checkpoint;            // tensors point into the input's bytes, or are `computed`
  RemapResult remap;                // the entries' fates (its checkpoint is not used)
  std::string algorithm;            // what the input was recognised as
  int64_t steps = 0;                // the step counter written
  std::string steps_from;           // where it came from, for reports
  std::vector<std::string> renamed; // "exp_avg -> update_by_adam_exp_avg_0"
  std::vector<std::string> notes;   // what a user should know (defaults taken, fields left out)
  std::vector<ComputedStorage> computed;
};

// State already in 3.x's layout is carried over as it is (--to heavyball3 then
// writes it unchanged, --to torch converts it). kUnsupported for algorithms not
// migrated yet; kInvalidArgument for what the remap refuses and for a missing
// step count; errors name the entry or group.
StatusOr<MigrateResult> MigrateState(const Checkpoint& checkpoint, const OptimizerState& state,
                                     const std::vector<ParamInfo>& params, const MatchReport& match,
                                     const MigrateOptions& options);

// Writes MigrateState's result for `input` (the file it was read from):
// tensors copied from the input, computed storages computed one at a time.
StatusOr<WriteReport> WriteMigrated(const CheckpointFile& input, const MigrateResult& migrated, const std::string& path,
                                    const WriteOptions& options);

// --to torch, from MigrateState's result for an AdamW-family file: the
// optimizer state dict alone, as torch.optim.AdamW saves it. HeavyBall's
// moments are bias-corrected in the state (its lerp by beta_debias is exactly
// torch's running average divided by 1 - beta^t), so exp_avg = m (1 - beta1^t)
// and exp_avg_sq = v (1 - beta2^t), each parameter gets step t as a float32
// 0-d tensor, and the groups get torch's AdamW fields. The one difference that
// remains is eps: HeavyBall divides by max(sqrt(v), eps), torch by
// sqrt(v_hat) + eps. kUnsupported for split views, non-float32 state and
// algorithms torch has no optimizer for (SOAP).
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
