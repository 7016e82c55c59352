// DSD's flattened optimizer layout (StateDictOptions(flatten_optimizer_state_dict=True),
// what torchtitan saves): one dict of "state.<fqn>.<field>" and
// "param_groups.<fqn>.<hyper>" entries instead of {"state", "param_groups"}.
// Left flat, no optimizer state is there for validate, inspect or consolidate
// to see; rebuilt, it is DSD's nested FQN layout.
#ifndef OPTSTATE_DCP_FLATTENED_OPTIMIZER_H_
#define OPTSTATE_DCP_FLATTENED_OPTIMIZER_H_

#include <string>
#include <vector>

#include "torch/graph_builder.h"

namespace optstate {

// Rebuilds every flattened optimizer at the root or one level below it in
// place, as {"state": {fqn: {field: value}}, "param_groups": [{hyper...,
// "params": [fqn...]}]}: parameters in the order their param_groups entries
// come, consecutive ones with equal hyperparameters in one group (the file
// does not record group boundaries between groups that agree on every value,
// which changes no update). Returns the paths rebuilt ("" = root).
std::vector<std::string> UnflattenOptimizers(Checkpoint& checkpoint, GraphBuilder& builder);

}  // namespace optstate

#endif  // OPTSTATE_DCP_FLATTENED_OPTIMIZER_H_
