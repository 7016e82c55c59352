// Which torch.optim algorithm an optimizer state dict was saved by, from its
// state fields and group hyperparameters: verify replays what it knows,
// and reports the rest as "replay not applicable" instead of broken AdamW.
#ifndef OPTSTATE_OPTIM_OPTIMIZER_FAMILY_H_
#define OPTSTATE_OPTIM_OPTIMIZER_FAMILY_H_

#include <string>

#include "optstate/optimizer_state.h"

namespace optstate {

struct OptimizerFamily {
  // "adam" / "adamw" (when the file tells: torch 1.13's AdamW groups lack
  // `fused`, its Adam's have it), "adam-or-adamw" (same fields: torch 2.x),
  // "heavyball3-adamw", "sgd", "adagrad", "rmsprop", "unknown".
  std::string name;
  std::string evidence;  // what decided it, for the report
  bool replayable() const { return name != "unknown"; }
};

OptimizerFamily RecogniseOptimizer(const Checkpoint& checkpoint, const OptimizerState& state);

}  // namespace optstate

#endif  // OPTSTATE_OPTIM_OPTIMIZER_FAMILY_H_
