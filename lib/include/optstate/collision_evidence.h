// What an optimizer state dict shows about merged state on its own, with no
// parameter list (no model, no manifest): the bug as its reporter saw it in
// `optim.state.keys()`.
//
// Pointer-keyed state (HeavyBall 0.12-0.24) has one key per parameter unless
// parameters shared keys. The file proves they did when it has fewer entries
// than param_groups lists parameters and every key carries the same pointer:
// pointer 0 (FSDP's flat parameters, FSDP2's DTensors) or one address for
// several keys. Which parameters share which entry needs their shapes; how
// many share one is visible where an entry's step counter ran a whole multiple
// faster than the others' (a merged entry is stepped once per parameter).
#ifndef OPTSTATE_COLLISION_EVIDENCE_H_
#define OPTSTATE_COLLISION_EVIDENCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/optimizer_state.h"

namespace optstate {

struct EntryEvidence {
  size_t key = 0;                      // position in OptimizerState::keys
  std::vector<int64_t> shape;          // the key's shape (empty for bare pointers)
  std::optional<double> step;          // its `step` counter, when it has a readable one
  std::optional<int64_t> multiplicity;  // parameters stepping it, when the counters show it
};

struct CollisionEvidence {
  bool merged = false;   // the file alone proves state was merged across parameters
  std::string reason;    // why it does, or why it cannot tell
  size_t entries = 0;    // state entries
  size_t params = 0;     // parameters param_groups lists
  std::optional<uint64_t> pointer;  // the one pointer every key carries, if they do
  std::optional<double> reference_step;  // the counter of a single-owner entry (or the group's)
  std::vector<EntryEvidence> keys;  // every key, in state dict order
};

// `bytes` is the buffer `checkpoint` was parsed from, for 0-d step tensors;
// empty (a DCP directory) reads only Python-number counters.
CollisionEvidence FindCollisionEvidence(const Checkpoint& checkpoint, ByteSpan bytes, const OptimizerState& state);
inline CollisionEvidence FindCollisionEvidence(const CheckpointFile& file, const OptimizerState& state) {
  return FindCollisionEvidence(file.checkpoint(), file.bytes(), state);
}

}  // namespace optstate

#endif  // OPTSTATE_COLLISION_EVIDENCE_H_
