// Does a checkpoint's optimizer state actually belong to, and act on, the
// model's parameters? Static checks on every entry, then a replay: one step of
// the algorithm that saved it (torch.optim's SGD, Adam, AdamW, Adagrad or
// RMSprop, recognised from the file or named by VerifyOptions::optimizer;
// optimizer.h) with a fixed probe gradient, once with the loaded state and once with fresh
// state. A parameter whose two updates come out identical is "cold": its state
// is missing, zero, or was never mapped to it (what HeavyBall's pointer keys
// did silently). HeavyBall 3.x's AdamW entries ({0: {update_by_adam_exp_avg_0,
// ..._sq_0}}, one counter per group in the first parameter's view) are replayed
// with HeavyBall's step, whose moments carry their bias correction; torch.optim
// entries with torch's.
#ifndef OPTSTATE_VERIFY_H_
#define OPTSTATE_VERIFY_H_

#include <string>
#include <vector>

#include "optstate/collisions.h"

namespace optstate {

struct VerifyFinding {
  std::string param;    // "" for findings about the whole state
  std::string check;    // stable id: "no-state", "non-canonical-keys", "shape", "dtype", "step-mismatch",
                        // "negative-exp-avg-sq", "negative-accumulator" (Adagrad's sum, RMSprop's
                        // square_avg), "non-finite", "cold", "non-finite-update", "unreplayable", "no-step"
  std::string message;
};

struct VerifyReport {
  size_t params = 0;
  size_t replayed = 0;              // parameters whose step was replayed
  std::vector<std::string> cold;    // parameter names
  std::vector<VerifyFinding> findings;
  bool values_from_model = false;   // every replay started from the model's values (else synthetic:
                                    // a manifest only, or DTensor shards of the model's tensors)
  std::vector<std::string> notes;   // how the replay differed from the saved hyperparameters
  // The algorithm the state was saved by (state/optimizer_family.h), or the
  // one --optimizer named; replayed unless it is "unknown".
  std::string algorithm;
  bool replay_applicable = true;
  // The step each replay ran: "SGD", "Adam", "AdamW" (also for adam-or-adamw),
  // "Adagrad", "RMSprop", "HeavyBall 3.x AdamW"; "" when not applicable.
  std::string replayed_with;
};

struct VerifyOptions {
  uint64_t probe_seed = 0;  // the probe gradient is a pure function of this and the parameter index
  std::string optimizer;    // "" = recognised from the file; adam, adamw, sgd, adagrad, rmsprop
};

// `m` comes from OpenAndMatch. Parameter values are read from the model
// state_dict the parameters came from (m.model()); with a manifest, they are
// synthetic (the replay compares updates, which weight decay alone does not
// make differ). Errors only for input that cannot be read.
StatusOr<VerifyReport> VerifyState(const MatchedState& m, const VerifyOptions& options = {});

}  // namespace optstate

#endif  // OPTSTATE_VERIFY_H_
