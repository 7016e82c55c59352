// What verify's replay needs besides the fused kernels: a param group's
// hyperparameters read for any algorithm of the family, the test for DCP's
// init-step state, and HeavyBall 3.x's AdamW step, whose moments carry their
// own bias correction. Internal to lib/.
#ifndef OPTSTATE_OPTIM_REPLAY_STEPS_H_
#define OPTSTATE_OPTIM_REPLAY_STEPS_H_

#include <optional>
#include <string>
#include <vector>

#include "optstate/pickle_graph.h"
#include "optstate/optimizer.h"

namespace optstate {

// How a state is replayed: which step, and whether HeavyBall 3.x's.
struct Replay {
  Algorithm algorithm = Algorithm::kAdamW;
  bool heavyball3 = false;
  bool ambiguous_adam = false;  // adam-or-adamw: replayed as AdamW
};

// The replay for an OptimizerFamily name, or nothing for a family verify does
// not replay (nadam, lbfgs, ... and unknown).
std::optional<Replay> ReplayFor(const std::string& family);

// The group's saved hyperparameters; a key the group lacks keeps torch's
// default for `a` (OptimizerHyper::Defaults).
OptimizerHyper GroupOptimizerHyper(const ObjectGraph& g, NodeId group, Algorithm a);

// At lr 0 every update is zero (weight decay too), and below 1e-9 (a warmup's
// start: LinearLR from start_factor 1e-8 gives 1e-10) an update is under half
// the float32 spacing of any parameter from 0.01 up: warm and cold state would
// replay alike. Such a group is replayed with a probe lr of 0.001 instead;
// returns the note that says so for param_groups[group], or nothing.
std::optional<std::string> UseProbeLrWhereUpdatesVanish(OptimizerHyper& hyper, size_t group);

// Is `state` (StateSlots order; empty where not kept) bit for bit what a
// fresh optimizer holds after one step with a zero gradient at lr 0 on
// `values`? That is DCP's _init_optim_state: never trained, though with
// weight decay not zero.
bool EqualsInitStep(Algorithm a, OptimizerHyper h, const std::vector<float>& values,
                    const std::vector<float> (&state)[3]);

// One step of HeavyBall 3.x's AdamW (update_by_adam, utils.fused_adam_),
// scalar: both moments are lerped toward the gradient with beta_debias(beta,
// t) = 1 - (1 - beta) / (1 - beta^t), so they are bias-corrected in the state
// itself (torch's AdamW corrects on the fly), then p = p (1 - wd lr) - lr m /
// max(sqrt(v), eps). `step` is the counter before this step.
void HeavyBallAdamWStep(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
                        std::vector<float>& v, const OptimizerHyper& h, double step);

}  // namespace optstate

#endif  // OPTSTATE_OPTIM_REPLAY_STEPS_H_
