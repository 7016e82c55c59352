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
#ifndef OPTSTATE_OPTIMIZER_STATE_H_
#define OPTSTATE_OPTIMIZER_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"

namespace optstate {

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

}  // namespace optstate

#endif  // OPTSTATE_OPTIMIZER_STATE_H_
