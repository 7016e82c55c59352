// A model's parameters in the optimizer's index order, where the model file
// does not give that order itself. Internal to lib/state (model_params.cc).
#ifndef OPTSTATE_LIB_STATE_PARAM_ORDER_H_
#define OPTSTATE_LIB_STATE_PARAM_ORDER_H_

#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/params.h"

namespace optstate {

// safetensors sorts its header, so a model read from one has lost its module
// order: each index takes a parameter of its state's shape (same-shape ones in
// natural name order), and which could have been swapped is recorded in `out`.
StatusOr<ModelParams> OrderByStateShapes(std::vector<ParamInfo> candidates, const Checkpoint& checkpoint,
                                         const OptimizerState& state, ModelParams out);

// Several groups or frozen parameters (group_order.h): the order when exactly
// one assignment fits; else an error naming the candidates that differ.
// `dropped` says in the messages how the candidates were counted ("12
// parameters once 1 tied duplicate and 2 buffers are dropped").
StatusOr<ModelParams> OrderByGroups(std::vector<ParamInfo> candidates, const Checkpoint& checkpoint,
                                    const OptimizerState& state, const std::string& dropped, ModelParams out);

}  // namespace optstate

#endif  // OPTSTATE_LIB_STATE_PARAM_ORDER_H_
