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
#ifndef OPTSTATE_MODEL_PARAMS_H_
#define OPTSTATE_MODEL_PARAMS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/optimizer_state.h"
#include "optstate/param_manifest.h"

namespace optstate {

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

#endif  // OPTSTATE_MODEL_PARAMS_H_
