// Optimizer state and the parameters it refers to: how a checkpoint's state is
// keyed (below), and where the parameters come from: a manifest
// (schemas/param-manifest.schema.json) or a model state_dict file.
#ifndef OPTSTATE_PARAMS_H_
#define OPTSTATE_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/compact_containers.h"
#include "optstate/status.h"
#include "optstate/torch_objects.h"

namespace optstate {

// Optimizer state dicts inside a checkpoint, and what their state keys are.
//
// torch.optim saves {"state": {key: {...}}, "param_groups": [{"params": [...]}]}
// with key = the parameter's index in group order. Other writers used other keys:
//   kIndex        0, 1, ...                 torch.optim; HeavyBall <= 0.11 and 2.x/3.x
//   kStringIndex  "0", "1", ...             a torch.optim dict after a DCP round trip
//   kFqn          "layers.0.wq.weight"      torch.distributed.checkpoint's DSD layout
//   kPtrShape     (data_ptr, (16, 8))       HeavyBall 0.12.3-0.24
//   kBarePtr      data_ptr (an int that is no index)   HeavyBall 0.12.0-0.12.2
//   kParamView    (Parameter, view_idx)     HeavyBall 0.25-1.5
//   kTensor       a tensor                  anything that keyed by the tensor itself
//   kOther        anything else
// HeavyBall 2.x/3.x also nests per-view dicts under int keys: {index: {view: {...}}}.
enum class KeyKind { kIndex, kStringIndex, kFqn, kPtrShape, kBarePtr, kParamView, kTensor, kOther };

// "index", "string-index", "fqn", "ptr-shape", "bare-ptr", "param-view", "tensor", "other".
std::string_view KeyKindName(KeyKind kind);
// What produced such keys, for reports.
std::string_view KeyKindOrigin(KeyKind kind);

struct StateKey {
  NodeId key = kNoNode;
  NodeId value = kNoNode;
  KeyKind kind = KeyKind::kOther;
  int64_t index = -1;            // kIndex, kStringIndex
  uint64_t ptr = 0;              // kPtrShape, kBarePtr
  std::vector<int64_t> shape;    // kPtrShape
  CompactText fqn;               // kFqn (compact: one key per parameter, 10^5 and more)
  int64_t tensor = -1;           // kParamView: index into Checkpoint::tensors
  int64_t view = 0;              // kParamView
  bool nested_views = false;     // value is {view_idx: {name: value}}
  uint64_t state_bytes = 0;      // tensor bytes in the value
  CompactText text;              // the key as printed
};

struct OptimizerState {
  std::string path;              // where in the checkpoint ("" = root, "optimizer", ...)
  NodeId node = kNoNode;
  std::vector<StateKey> keys;    // state dict order
  std::vector<std::vector<NodeId>> group_params;  // param_groups[g]["params"] items
  size_t param_count = 0;        // params across groups
  KeyKind scheme = KeyKind::kOther;  // the kind of most keys; without any, of param_groups' ids
  bool mixed = false;            // more than one kind present
  // param_groups list names (FQNs), which torch.optim never saves: what
  // FSDP.optim_state_dict and DSD's get_optimizer_state_dict write.
  bool groups_name_params = false;
};

// {"state": dict, "param_groups": [dict...]}: what Optimizer.state_dict() returns.
bool IsOptimizerStateDict(const ObjectGraph& graph, NodeId id);

// Paths of every {"state": dict, "param_groups": [dict...]} in the checkpoint
// (the root, or under keys like "optimizer"), in tree order.
std::vector<std::string> FindOptimizerStates(const Checkpoint& checkpoint);

// Reads and classifies the optimizer state at `path` ("" for the root). An int
// key is an index when it is below the number of params in param_groups and a
// bare pointer otherwise. kNotFound / kInvalidArgument when there is none.
StatusOr<OptimizerState> ReadOptimizerState(const Checkpoint& checkpoint, const std::string& path);

// A counter or hyperparameter as a number: a Python int or float, or a
// one-element plain tensor (torch 2.x saves `step` as a float32 0-d tensor)
// read from `bytes`, the buffer `checkpoint` was parsed from (empty: tensors
// are not read). nullopt for anything else.
std::optional<double> NumberValue(const Checkpoint& checkpoint, ByteSpan bytes, NodeId id);

// ReadOptimizerState at `state_key`, or, when it is empty, at the one optimizer
// state dict the checkpoint holds: kNotFound if none, kInvalidArgument naming
// the count if several (the caller must choose).
StatusOr<OptimizerState> LocateOptimizerState(const Checkpoint& checkpoint, const std::string& state_key);

// A model's parameters in optimizer order (schemas/param-manifest.schema.json).
// Written from a live model and optimizer (see README); with data_ptr it places
// pointer-keyed state exactly, split views included.

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;  // the whole parameter's shape, also for a sharded one
  // A DTensor shard (FSDP2, tensor parallel) read from one rank's model file: its
  // local shape, placements ("Shard(dim=0)", ...), mesh shape and this rank's
  // coordinate in it (shard_layout.h). Empty for whole tensors. Out of line
  // (written through shard()): most parameters are whole, and 10^5 of them
  // each carried 96 bytes of empty vectors.
  const std::vector<int64_t>& local_shape() const { return shard_ ? shard_->local_shape : kNoInts; }
  const std::vector<std::string>& placements() const { return shard_ ? shard_->placements : kNoTexts; }
  const std::vector<int64_t>& mesh_shape() const { return shard_ ? shard_->mesh_shape : kNoInts; }
  const std::vector<int64_t>& mesh_coordinate() const { return shard_ ? shard_->mesh_coordinate : kNoInts; }
  // FSDP1's ShardedTensor gives its block outright instead of placements:
  // its offsets, or nullopt on a rank that holds none of it.
  bool explicit_block() const { return shard_ && shard_->explicit_block; }
  const std::optional<std::vector<int64_t>>& block_offsets() const { return shard_ ? shard_->block_offsets : kNoBlock; }
  struct Shard {
    std::vector<int64_t> local_shape;
    std::vector<std::string> placements;
    std::vector<int64_t> mesh_shape;
    std::vector<int64_t> mesh_coordinate;
    bool explicit_block = false;
    std::optional<std::vector<int64_t>> block_offsets;
  };
  Shard& shard() { return shard_.GetOrCreate(); }
  DType dtype = DType::kFloat32;
  std::optional<uint64_t> data_ptr;
  uint64_t nbytes = 0;  // from the file, else numel * element size
  std::optional<int64_t> group;  // its param_groups index, when the manifest says
  // A hash of the parameter's bytes in its model file (ContentHash), filled
  // when the state's keys are (Parameter, i) copies that share no storage.
  std::optional<uint64_t> content_hash;

 private:
  static inline const std::vector<int64_t> kNoInts;
  static inline const std::vector<std::string> kNoTexts;
  static inline const std::optional<std::vector<int64_t>> kNoBlock;
  OutOfLine<Shard> shard_;
};

// Errors name the file and the field: "m.json: params[3].shape: expected an
// array of non-negative integers".
StatusOr<std::vector<ParamInfo>> ReadParamManifest(const std::string& path);
StatusOr<std::vector<ParamInfo>> ParseParamManifest(std::string_view json_text);

// The manifest of `params` as JSON text (data_ptr where known), which
// ParseParamManifest reads back to the same list.
std::string ParamManifestText(const std::vector<ParamInfo>& params);

// The parameters an optimizer state refers to, in optimizer order, taken from
// a model state_dict instead of a manifest.
//
// torch.optim numbers parameters in param_groups order; a model state_dict
// lists tensors in module order and mixes in buffers and tied duplicates. The
// two orders agree only in a narrow case, so the order is derived only when it
// can be decided:
//   param_groups lists FQNs (DSD layout)      those names, looked up in the model
//   one group of N indices, and the model has
//   N parameters once tied duplicates and
//   known buffers are dropped                 model order (what Optimizer(model.parameters()) gives)
//   several groups, or frozen parameters      the one assignment that keeps each group in module
//                                             order with every state shape its parameter's
//                                             (group_order.h); refused when none or several fit
//   a safetensors model (no module order)     the order the state's shapes give
//   anything else                             kInvalidArgument asking for a manifest
// A state_dict records no data_ptr, so pointer keys are then placed by shape only.

struct ModelParams {
  std::vector<ParamInfo> params;     // optimizer order
  std::string order;                 // how the order was decided, for reports
  std::vector<std::string> tied;     // "head.weight (tied to emb.weight)": dropped
  std::vector<std::string> buffers;  // dropped as buffers
  std::vector<std::string> frozen;   // model parameters no param group lists
  // Parameters whose position the files leave open (safetensors keeps no
  // module order; same-shape parameters matched by shape could be swapped):
  // checks that depend only on shapes are sound, a mapping by name is not.
  std::vector<std::string> order_ambiguous;
};

// A flat {name: tensor} dict at `path` of `checkpoint`; with an empty path, the
// root when it is one, else the root's "model" (or "model_state_dict",
// "state_dict") entry, else, given the optimizer `state` that names its
// parameters (DSD's layout), the root itself when every name is a tensor
// there: torchtitan saves the model's entries at the top level, beside
// "optimizer". `*found_at` receives the path used ("" = root).
StatusOr<NodeId> LocateModelStateDict(const Checkpoint& checkpoint, const std::string& path,
                                      std::string* found_at, const OptimizerState* state = nullptr);

// Every parameter of the model state_dict at `dict`, in module order, with tied
// duplicates and known buffers dropped (what model.parameters() would give, as
// far as a state_dict can tell).
ModelParams ParamsOfModel(const Checkpoint& model, NodeId dict);

// The parameters `state` (read from `checkpoint`) refers to, from the model
// state_dict at `dict` of `model` (which may be the same checkpoint).
StatusOr<ModelParams> ParamsFromModel(const Checkpoint& model, NodeId dict, const Checkpoint& checkpoint,
                                      const OptimizerState& state);

// For index- or FQN-keyed state with no model at all: param_groups' parameters
// (named as it names them, or "index i"), each with the shape and dtype of its state's first tensor other than `step`
// (empty shape when it has none). Checks against these compare the state with
// itself, so callers must say which checks did not run.
ModelParams ParamsOfState(const Checkpoint& checkpoint, const OptimizerState& state);

// FSDP1's LOCAL_STATE_DICT names each unit's flat parameter
// <unit prefix>_flat_param: that prefix ("" for the root unit, "layers.0."),
// or nullopt for any other name (a path such as "model.fc1._flat_param" too).
std::optional<std::string_view> Fsdp1FlatParamUnit(std::string_view name);

// Parameter names as torch.distributed.checkpoint.state_dict (DSD) spells
// them, which set_optimizer_state_dict looks up: the segments wrappers add
// removed (`_orig_mod` of torch.compile, `_fsdp_wrapped_module` of FSDP1,
// `_checkpoint_wrapped_module` of activation checkpointing), and DDP's leading
// `module.` when every name has it (a whole model wrapped once).
std::vector<std::string> CanonicalFqns(const std::vector<std::string>& names);

// Renames the str keys of the model state dict at `dict` in `checkpoint` to
// their CanonicalFqns (new key nodes: shared ones are never changed in place),
// so that a model saved through DDP or torch.compile is keyed as DSD's
// get_model_state_dict keys it, as the optimizer state rekeyed by FQN is.
// Returns how many keys changed.
size_t RenameToCanonicalFqns(Checkpoint& checkpoint, NodeId dict);

}  // namespace optstate

#endif  // OPTSTATE_PARAMS_H_
