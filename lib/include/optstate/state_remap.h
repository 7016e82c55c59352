// Rewrites an optimizer state dict so torch.optim (or HeavyBall 2.x/3.x) maps it
// to the right parameters: state keyed by index (or FQN), param_groups params to
// match, nothing else in the checkpoint touched.
//
// Every input entry is accounted for in RemapResult::entries: moved (to which
// key and view), or dropped with the reason. A parameter with several keys
// (split views) gets HeavyBall's per-view layout {index: {view: {...}}}, views in
// the matcher's order; a parameter with one key gets a plain entry.
#ifndef OPTSTATE_STATE_REMAP_H_
#define OPTSTATE_STATE_REMAP_H_

#include <string>
#include <vector>

#include "optstate/state_matching.h"

namespace optstate {

enum class KeyTarget { kIndex, kFqn };
enum class CollisionPolicy { kFail, kReset, kShare, kDrop };

struct RemapOptions {
  KeyTarget to = KeyTarget::kIndex;
  CollisionPolicy on_collision = CollisionPolicy::kFail;
};

struct RemapEntry {
  std::string input_key;
  std::string fate;              // "moved", "dropped", "shared" (copied to each merged
                                 // parameter), "reset" (each got fresh zero state)
  std::string output_key;        // for moved entries
  std::vector<std::string> output_keys;  // for shared and reset entries
  int64_t view = -1;             // for views of a split parameter
  std::vector<std::string> params;
  std::string reason;            // for dropped entries
};

struct RemapResult {
  Checkpoint checkpoint;         // the edited copy; tensors still point into the input's bytes
  std::vector<RemapEntry> entries;  // one per input state entry, input order
  size_t moved = 0;    // carried over to their one parameter
  size_t shared = 0;   // merged, copied to each parameter that shared them
  size_t reset = 0;    // merged, replaced by zero state: their values are gone
  size_t dropped = 0;
};

// Collision policies: fail (kInvalidArgument naming the merged parameters),
// drop (they get no state), share (each gets its own copy of the merged entry:
// separate storages, so training does not keep mixing them), reset (each gets
// an entry of the same structure with every tensor zero and int step fields 0).
// Keys the matcher left ambiguous are refused with kInvalidArgument.
StatusOr<RemapResult> RemapState(const Checkpoint& checkpoint, const OptimizerState& state,
                                 const std::vector<ParamInfo>& params, const MatchReport& match,
                                 const RemapOptions& options);

// The same, editing `checkpoint` in place instead of a copy: the caller gives
// up its parse (the graph of a 10^5-parameter file is hundreds of MB), keeping
// the input's bytes for the writer. `state`'s node ids stay valid.
StatusOr<RemapResult> RemapState(Checkpoint&& checkpoint, const OptimizerState& state,
                                 const std::vector<ParamInfo>& params, const MatchReport& match,
                                 const RemapOptions& options = {});

// FSDP1 with use_orig_params=False keeps one step tensor per flat parameter,
// and FSDP.optim_state_dict hands that one tensor to every parameter of the
// unit, so the file shares it among their entries. torch.optim increments a
// tensor step in place, once per parameter: shared, it counts N steps per
// step. In the state dict `state` ({key: {"step": ...}}), each entry after the
// first that holds an already-seen step tensor (same node, or same storage)
// gets a copy of its own (a new storage with the same bytes) in a new entry
// dict; no node is changed in place. Returns how many entries got one. remap
// and unshard apply it to what they write.
size_t SeparateSharedSteps(Checkpoint& checkpoint, NodeId state);

}  // namespace optstate

#endif  // OPTSTATE_STATE_REMAP_H_
