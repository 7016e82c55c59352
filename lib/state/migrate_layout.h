// The pieces of `optstate migrate` that depend on the legacy optimizer:
// which family a file's state belongs to, and the param_groups and top-level
// `heavyball` entry HeavyBall 3.2 saves for it (state_migrate.cc builds the
// state entries and calls these).
#ifndef OPTSTATE_STATE_MIGRATE_LAYOUT_H_
#define OPTSTATE_STATE_MIGRATE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "optstate/optimizer_state.h"
#include "optstate/param_manifest.h"
#include "torch/graph_builder.h"

namespace optstate {

enum class LegacyFamily {
  kAdamW0,  // 0.x ForeachAdamW: exp_avg, exp_avg_sq; the group's counter k
  kAdamW1,  // 1.x ForeachAdamW: update_by_adam_exp_avg(_sq); step in the entries
  kSoap0,   // 0.x ForeachSOAP: step, exp_avg (unprojected), exp_avg_sq, Q, GG per entry
};

// Replaces every group of the optimizer state dict at `state_node` in `g` by
// the group HeavyBall 3.2's optimizer of `family` saves: the old group's
// values where it has the field, 3.2's defaults otherwise, `params` as the
// remap numbered them; adds what a user should know to `notes`.
void RewriteGroupsAs3x(LegacyFamily family, const OptimizerState& st, const std::vector<ParamInfo>& params,
                       NodeId state_node, GraphBuilder& b, ObjectGraph& g, std::vector<std::string>& notes);

// Adds the top-level `heavyball` entry 3.2's StatefulOptimizer saves. For SOAP
// it carries 0.x's precondition_frequency as 3.x's schedule and the
// scheduler's position after `steps` steps, so Q is recomputed on the steps
// 0.x would have recomputed it; AdamW never preconditions.
void AddHeavyballEntry(LegacyFamily family, NodeId state_node, int64_t steps, double precondition_frequency,
                       GraphBuilder& b, ObjectGraph& g, std::vector<std::string>& notes);

}  // namespace optstate

#endif  // OPTSTATE_STATE_MIGRATE_LAYOUT_H_
