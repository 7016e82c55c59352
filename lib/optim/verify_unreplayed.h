// verify for state whose algorithm it cannot replay (one it does not know,
// or --optimizer naming one outside the family): the checks that need no replay (every parameter has state where
// the algorithm keeps any, shapes and dtypes fit, values finite, steps agree
// in a group), and a note that warm vs cold was not judged.
#ifndef OPTSTATE_OPTIM_VERIFY_UNREPLAYED_H_
#define OPTSTATE_OPTIM_VERIFY_UNREPLAYED_H_

#include <map>
#include <string>
#include <vector>

#include "optstate/optimizer.h"
#include "state/optimizer_family.h"

namespace optstate {

// "3 (a.weight), 12.5 (b.bias)": each step value as Python prints a float
// step, with the first parameter that has it; for step-mismatch findings.
std::string StepList(const std::map<double, std::string>& steps);

// HeavyBall SOAP state (what migrate writes for it) is refused as a whole,
// naming it, so that no parameter is reported as checked or as broken: its
// preconditioner is nothing verify's replays could judge.
Status RefuseSoapState(const MatchedState& m);

// Parameters with no state (or, Adagrad, state no step reached) are frozen,
// never given a gradient, or lost their state: the file cannot tell which, so
// they are a note, as validate's param-without-state is, not a finding.
void NoteParamsWithoutState(const std::vector<std::string>& names, VerifyReport& report);

// FSDP1's SHARDED_STATE_DICT keeps each moment as a ShardedTensor (this rank's
// shards and the whole's metadata), which verify does not read yet: an entry
// holding one is neither replayed nor judged, and kShardedTensorNote says so.
bool HoldsShardedTensors(const ObjectGraph& graph, NodeId entry);
inline constexpr const char* kShardedTensorNote =
    "state held as ShardedTensors (FSDP1's SHARDED_STATE_DICT): this rank's shards of each moment, which verify "
    "does not read yet, so nothing was replayed or judged for those parameters";

Status CheckWithoutReplay(const MatchedState& m, const OptimizerFamily& family, VerifyReport& report);

}  // namespace optstate

#endif  // OPTSTATE_OPTIM_VERIFY_UNREPLAYED_H_
