// Two checkpoints of one run compared: which parameters moved, how far each
// state entry's step advanced, what changed in the hyperparameters, which
// entries appeared or vanished.
//
// One checkpoint cannot show a parameter that stopped training while its
// optimizer kept stepping (HeavyBall 0.16-1.5 with foreach=False, whose
// per-parameter group copies kept the lr=0 of DCP's state-initialising step,
// while every checkpoint saves the right lr); two can: the state's step
// advanced and the parameter is bit for bit the same.
#ifndef OPTSTATE_CHECKPOINT_DIFF_H_
#define OPTSTATE_CHECKPOINT_DIFF_H_

#include <optional>
#include <string>
#include <vector>

#include "optstate/collisions.h"

namespace optstate {

struct DiffOptions {
  ParamSource a_params;  // where A's (B's) parameters come from; default: the file's own model entry
  ParamSource b_params;
  std::string state_key;
  ReadOptions read;
};

struct ParamDiff {
  std::string name;
  std::vector<int64_t> shape;
  bool in_a = false, in_b = false;          // a parameter of that checkpoint
  std::optional<double> relative_change;    // ||B - A|| / ||A|| (||B - A|| when A is all zero)
  std::optional<double> max_abs_change;
  std::optional<double> step_a, step_b;     // its state entry's step counter
  bool state_a = false, state_b = false;    // it has a state entry there
  bool frozen = false;   // the state stepped on and the values did not change at all
  std::string note;      // why something could not be compared
};

struct HyperChange {
  size_t group = 0;
  std::string key;
  std::string a, b;  // values as text; "(absent)" where a group lacks the key
};

struct DiffReport {
  std::string a, b;
  std::string a_params_from, b_params_from;
  std::vector<ParamDiff> params;  // A's order, then parameters only B has
  std::vector<HyperChange> hyper;
  size_t groups_a = 0, groups_b = 0;
  std::vector<std::string> state_appeared;  // parameters with state in B only
  std::vector<std::string> state_vanished;  // with state in A only
  size_t moved = 0, unmoved = 0, frozen = 0, not_compared = 0;
};

// Errors: either file unreadable, no optimizer state, no parameter list.
StatusOr<DiffReport> DiffCheckpoints(const std::string& a, const std::string& b, const DiffOptions& options);

// One side of a diff as users hold it: a torch.save file, a DCP checkpoint
// directory (consolidated first, FQN keys), or the per-rank files of a sharded
// save (unsharded first); `models` likewise (none: the checkpoint's own model
// entry). The intermediate files live in a scratch directory under the system
// temp directory, removed when done (or interrupted).
struct DiffSide {
  std::vector<std::string> files;
  std::vector<std::string> models;
};
StatusOr<DiffReport> DiffCheckpointSets(const DiffSide& a, const DiffSide& b, const DiffOptions& options);

}  // namespace optstate

#endif  // OPTSTATE_CHECKPOINT_DIFF_H_
