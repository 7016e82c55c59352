// verify for state whose algorithm it cannot replay (SGD, Adagrad, RMSprop,
// unknown): the checks that need no replay (every parameter has state where
// the algorithm keeps any, shapes and dtypes fit, values finite, steps agree
// in a group), and a note that warm vs cold was not judged.
#ifndef OPTSTATE_OPTIM_VERIFY_UNREPLAYED_H_
#define OPTSTATE_OPTIM_VERIFY_UNREPLAYED_H_

#include "optim/optimizer_family.h"
#include "optstate/verify.h"

namespace optstate {

Status CheckWithoutReplay(const MatchedState& m, const OptimizerFamily& family, VerifyReport& report);

}  // namespace optstate

#endif  // OPTSTATE_OPTIM_VERIFY_UNREPLAYED_H_
