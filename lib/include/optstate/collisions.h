// Optimizer state against its parameters: which entry belongs to which
// parameter (collisions, orphans), what a file shows alone, the per-rank files
// of one sharded save, and the remap that keys state so torch.optim uses it.
#ifndef OPTSTATE_COLLISIONS_H_
#define OPTSTATE_COLLISIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/params.h"

namespace optstate {

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
// file or in the checkpoint itself (see params.h for when that works).
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

// The per-rank files of one sharded save (FSDP2 without DCP: each rank's
// torch.save(opt.state_dict()) and model.state_dict()) treated as one
// checkpoint: opened together, checked against each other, matched once on
// global shapes.
//
// Global shapes come from the DTensors themselves, or, for the `.to_local()`
// copies users make to avoid DTensor pickles, from the ranks' shards: FSDP2
// shards every parameter along dim 0, so the whole parameter has the local
// rows of all ranks. That inference is used only when it explains the state's
// shape-carrying keys better than the local shapes do (a DDP replica set keeps
// its local shapes), and the report says which was used.

struct RankSetSource {
  std::vector<std::string> files;   // optimizer files, in rank order or named rank<N>
  std::vector<std::string> models;  // one per rank, or none (manifest / own model entry)
  std::string manifest;
  std::string model_key;
};

struct RankSetMatch {
  std::vector<std::string> files;   // in rank order
  std::vector<std::string> models;  // in rank order (empty when not given)
  std::vector<MatchedState> ranks;  // parallel to files; every rank's params carry global shapes
  std::string global_shapes;        // how the global shapes were known, for reports
  // The ranks hold different entries (FSDP1: state only where a rank holds
  // elements of a parameter; pointer keys of each process's own addresses):
  // each rank's match is a report of its own, not a copy of rank 0's.
  bool ranks_differ = false;
};

// Files named ...rank<N>... for every N in 0..n-1 are put in that order;
// otherwise the order given is kept. kInvalidArgument for a repeated rank.
StatusOr<std::vector<std::string>> OrderByRank(const std::vector<std::string>& files);

// Errors name the rank and file, and the parameter, key or tensor that does
// not agree: different parameter names or global shapes, different state keys,
// shards that do not tile a global tensor exactly once along their Shard dim.
StatusOr<RankSetMatch> OpenAndMatchRankSet(const RankSetSource& source, const std::string& state_key,
                                           const ReadOptions& read, const MatchOptions& match);

// Rewrites an optimizer state dict so torch.optim (or HeavyBall 2.x/3.x) maps it
// to the right parameters: state keyed by index (or FQN), param_groups params to
// match, nothing else in the checkpoint touched.
//
// Every input entry is accounted for in RemapResult::entries: moved (to which
// key and view), or dropped with the reason. A parameter with several keys
// (split views) gets HeavyBall's per-view layout {index: {view: {...}}}, views in
// the matcher's order; a parameter with one key gets a plain entry.

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

#endif  // OPTSTATE_COLLISIONS_H_
