// Which parameter each optimizer state entry belongs to, with a confidence,
// and what cannot be attributed: collisions (state merged across parameters
// during training) and orphans (state that belongs to no parameter).
//
// How keys are matched, by scheme:
//   index, string-index   by index                                   exact
//   fqn                   by name                                    exact
//   ptr-shape, bare-ptr   data_ptr inside [param.data_ptr, +nbytes)  exact (places split views)
//                         one parameter of the key's shape           shape-unique
//                         several, as many keys: pointer order       heuristic (refused unless allowed)
//                         pointer 0 for several parameters           collision (FSDP)
//   param-view            the key's Parameter shares storage with a
//                         named tensor in the same file              exact
// A parameter with several keys (split views) gets them in view order: by
// pointer for pointer keys, by view index for (Parameter, i) keys.
#ifndef OPTSTATE_STATE_MATCHING_H_
#define OPTSTATE_STATE_MATCHING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optstate/optimizer_state.h"
#include "optstate/param_manifest.h"

namespace optstate {

enum class Confidence { kExact, kShapeUnique };
std::string_view ConfidenceName(Confidence c);  // "exact", "shape-unique", "heuristic"

enum class KeyFate { kAssigned, kCollided, kOrphan, kAmbiguous };
std::string_view KeyFateName(KeyFate f);  // "assigned", "collided", "orphan", "ambiguous"

struct KeyMatch {
  KeyFate fate = KeyFate::kOrphan;
  // The owner of an assigned key; every owner of a collided one. An ambiguous
  // key's candidates are its `candidates` group's (MatchReport::CandidatesOf):
  // 10^4 same-shape keys would otherwise each hold the same 10^4 parameters.
  std::vector<size_t> params;
  int64_t candidates = -1;     // ambiguous: index in MatchReport::candidate_groups
  int64_t view = 0;            // position among its owner's keys
  Confidence confidence = Confidence::kExact;
  std::string reason;          // for orphans, collisions and ambiguous keys
};

struct ParamMatch {
  std::vector<size_t> keys;    // its state entries, in view order
  bool collided = false;       // its state was merged with another parameter's
  Confidence confidence = Confidence::kExact;
};

struct CollisionGroup {
  std::vector<int64_t> shape;  // empty for bare pointers
  std::vector<size_t> params;
  std::vector<size_t> keys;
  uint64_t bytes = 0;
  std::string reason;
};

// Keys that only data_ptr could place, and the parameters any of them may belong to.
struct CandidateGroup {
  std::vector<int64_t> shape;
  std::vector<size_t> params;
  std::vector<size_t> keys;
};

struct MatchReport {
  std::vector<KeyMatch> keys;      // parallel to OptimizerState::keys
  std::vector<ParamMatch> params;  // parallel to the manifest
  std::vector<CollisionGroup> collisions;
  std::vector<CandidateGroup> candidate_groups;
  std::vector<size_t> orphans;     // key positions
  std::vector<size_t> ambiguous;   // key positions that only data_ptr could place
  std::vector<size_t> without_state;  // parameters with no state entry
  uint64_t unattributable_bytes = 0;  // state bytes of collided and orphan keys

  // The parameters key `k` belongs to or may belong to: its owner(s), or an
  // ambiguous key's candidates.
  const std::vector<size_t>& CandidatesOf(size_t k) const {
    const KeyMatch& m = keys[k];
    return m.candidates >= 0 ? candidate_groups[static_cast<size_t>(m.candidates)].params : m.params;
  }
};

// Matching is exact or by a shape only one parameter has. (Pairing same-shape
// keys by pointer order was an option until it was measured wrong on real files.)
struct MatchOptions {
  // The ContentHash of a (Parameter, i) key's tensor (its index in the
  // checkpoint's tensors), or nullopt when it cannot be read. Set by
  // OpenAndMatch when the parameters came from a model file of their own: a
  // HeavyBall 0.25-1.5 optimizer saved alone pickles a copy of each parameter
  // in its keys, whose bytes equal the model's saved at the same step.
  std::function<std::optional<uint64_t>(int64_t tensor)> key_content;
};

// Is `merged` what merging runs of consecutive dims of `shape` gives (and not
// `shape` itself)? [64, 3, 3, 3] -> [64, 27] or [192, 9]; dims of 1 may vanish.
// HeavyBall's merge_dims keeps such views' state (SOAP's conv weights).
bool IsDimMerge(const std::vector<int64_t>& shape, const std::vector<int64_t>& merged);

// FNV-1a over a tensor's bytes (64 bits): equal bytes, equal hash.
uint64_t ContentHash(ByteSpan bytes);

// kInvalidArgument when the manifest's parameter count differs from
// param_groups', or when bare pointers come without data_ptr in the manifest.
StatusOr<MatchReport> MatchState(const Checkpoint& checkpoint, const OptimizerState& state,
                                 const std::vector<ParamInfo>& params, const MatchOptions& options = {});

// Where the parameters come from: a manifest, or a model state_dict in its own
// file or in the checkpoint itself (see model_params.h for when that works).
struct ParamSource {
  std::string manifest;   // --manifest FILE
  std::string model;      // --model FILE; "" = the checkpoint itself
  std::string model_key;  // path of the state_dict in that file; "" = find it
  // With no manifest, no --model and no model in the checkpoint, index- or
  // FQN-keyed state gives its own parameters (ParamsOfState): for the commands whose
  // checks mean something without a model (verify, collisions), never for
  // ones that would write names.
  bool state_shapes_when_none = false;
};

// Everything `collisions` and `remap` start from: the checkpoint, its optimizer
// state (at `state_key`, or the only one), the parameters, and the match.
struct MatchedState {
  std::unique_ptr<CheckpointFile> file;
  OptimizerState state;
  std::vector<ParamInfo> params;
  std::string params_from;           // "manifest m.json", "model state_dict m.pt", "'model' in ckpt.pt"
  std::string order;                 // how the parameter order was decided
  std::vector<std::string> order_ambiguous;  // ModelParams::order_ambiguous
  std::vector<std::string> tied;     // model entries dropped as tied duplicates
  std::vector<std::string> buffers;  // model entries dropped as buffers
  std::vector<std::string> frozen;   // model parameters no param group lists
  bool params_from_state = false;    // ParamSource::state_shapes_when_none was used
  MatchReport match;
  // The model state_dict the parameters came from, kept for its values (verify):
  // in a file of its own (model_file), or in the checkpoint itself (model_file
  // empty); model_dict is kNoNode when the parameters came from a manifest.
  std::unique_ptr<CheckpointFile> model_file;
  NodeId model_dict = kNoNode;
  const CheckpointFile* model() const {
    if (model_dict == kNoNode) return nullptr;
    return model_file ? model_file.get() : file.get();
  }
};

// For (Parameter, i) keys whose parameters came from `model_dict` in `model`,
// a file other than the optimizer's (`checkpoint`, parsed from
// `checkpoint_bytes`): hashes each parameter's bytes there into
// params[i].content_hash and sets options.key_content. Nothing for other keys.
Status PrepareContentMatch(ByteSpan checkpoint_bytes, const Checkpoint& checkpoint, const OptimizerState& state,
                           const CheckpointFile& model, NodeId model_dict, std::vector<ParamInfo>& params,
                           MatchOptions& options);

// Errors carry the path of the file they concern (checkpoint, manifest or model).
StatusOr<MatchedState> OpenAndMatch(const std::string& checkpoint, const std::string& state_key,
                                    const ParamSource& source, const ReadOptions& read, const MatchOptions& match);

// The same for a checkpoint already open (validate reads it for its own rules
// first); `read` applies to the model file, if one is opened.
StatusOr<MatchedState> MatchCheckpoint(std::unique_ptr<CheckpointFile> file, const std::string& state_key,
                                       const ParamSource& source, const ReadOptions& read, const MatchOptions& match);

}  // namespace optstate

#endif  // OPTSTATE_STATE_MATCHING_H_
