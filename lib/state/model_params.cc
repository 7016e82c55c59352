#include "optstate/params.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "pickle/graph_walk.h"
#include "state/param_order.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

// Keys under which training scripts commonly keep the model in a combined checkpoint.
constexpr const char* kModelEntries[] = {"model", "model_state_dict", "state_dict"};

// BatchNorm's running statistics: floating-point buffers that no optimizer
// trains. Other float buffers (causal masks, rotary tables) cannot be told
// apart from parameters; the count check catches them.
bool IsKnownBufferName(const std::string& name) {
  std::string leaf = name.substr(name.rfind('.') + 1);
  return leaf == "running_mean" || leaf == "running_var" || leaf == "num_batches_tracked";
}

// Only floating-point and complex tensors can require grad, so only they can be parameters.
bool CanBeParameter(DType dtype) {
  std::string_view name = GetDTypeInfo(dtype).name;
  return name.starts_with("float") || name.starts_with("bfloat") || name.starts_with("complex");
}

bool IsTensorDict(const ObjectGraph& g, NodeId id) {
  const Node& n = g.at(id);
  if (n.kind != NodeKind::kDict || n.entries.empty()) return false;
  for (auto [k, v] : n.entries) {
    if (g.at(k).kind != NodeKind::kStr) return false;
  }
  for (auto [k, v] : n.entries) {
    if (g.at(v).kind == NodeKind::kTensor) return true;
  }
  return false;
}

// What torch's Module.state_dict() returns: every value a tensor, except the
// `_extra_state` objects of modules that define get_extra_state. A combined
// checkpoint's root ({"epoch", "state_dict", "best_acc1": tensor, ...}) or one
// with a top-level rng_state tensor is not one, however many tensors it holds.
bool IsModuleStateDict(const ObjectGraph& g, NodeId id) {
  if (!IsTensorDict(g, id)) return false;
  for (auto [k, v] : g.at(id).entries) {
    if (g.at(v).kind != NodeKind::kTensor && !g.at(k).text.ends_with("_extra_state")) return false;
  }
  return true;
}

std::string Count(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

ParamInfo InfoOf(const std::string& name, const TensorRef& t) {
  ParamInfo p;
  p.name = name;
  p.shape = t.sizes;
  p.dtype = t.dtype;
  p.nbytes = t.nbytes();
  // HeavyBall keyed by param.shape, and a DTensor's shape is the global one:
  // matching must compare what the optimizer saw, not this rank's shard.
  if (t.is_dtensor) {
    p.shard().local_shape = t.sizes;
    p.shard().placements = t.placements();
    p.shard().mesh_shape = t.mesh_shape();
    p.shard().mesh_coordinate = t.mesh_coordinate();
    if (t.explicit_block()) {
      p.shard().explicit_block = true;
      if (!t.holds_no_block()) p.shard().block_offsets = t.block_offsets();
    }
    p.shape = t.global_sizes();
    uint64_t numel = 1;
    for (int64_t d : t.global_sizes()) numel *= static_cast<uint64_t>(d);
    p.nbytes = numel * GetDTypeInfo(t.dtype).element_size;
  }
  return p;
}

// FSDP1 with use_orig_params=False: the optimizer steps this rank's piece of
// the flat parameter as one 1-D tensor, padded so that every rank's piece is
// ceil(numel / world size) long; the ShardedTensor's block leaves the padding
// out (49 elements of a 99-element flat parameter on rank 1 of 2, whose
// optimizer state has 50).
ParamInfo FlatParamShard(const std::string& name, const TensorRef& t) {
  ParamInfo p = InfoOf(name, t);
  const std::vector<int64_t>& world = t.mesh_shape();
  if (t.global_sizes().size() != 1 || world.size() != 1 || world[0] <= 0) return p;
  int64_t piece = (t.global_sizes()[0] + world[0] - 1) / world[0];
  ParamInfo local;
  local.name = name;
  local.dtype = t.dtype;
  local.shape = {piece};
  local.nbytes = static_cast<uint64_t>(piece) * GetDTypeInfo(t.dtype).element_size;
  return local;
}

}  // namespace

StatusOr<NodeId> LocateModelStateDict(const Checkpoint& cp, const std::string& path, std::string* found_at,
                                      const OptimizerState* state) {
  const ObjectGraph& g = cp.graph;
  if (!path.empty()) {
    std::optional<NodeId> node = FindPath(g, g.root, path);
    if (!node) return NotFoundError("no object at path '" + path + "'");
    if (!IsTensorDict(g, *node)) {
      return InvalidArgumentError("the object at '" + path + "' is a " + TypeName(g, *node) +
                                  ", not a model state_dict {name: tensor}");
    }
    *found_at = path;
    return *node;
  }
  if (IsModuleStateDict(g, g.root)) {
    *found_at = "";
    return g.root;
  }
  for (const char* key : kModelEntries) {
    NodeId v = g.at(g.root).kind == NodeKind::kDict ? DictLookup(g, g.root, key) : kNoNode;
    if (v != kNoNode && IsModuleStateDict(g, v)) {
      *found_at = key;
      return v;
    }
  }
  if (state != nullptr && g.at(g.root).kind == NodeKind::kDict && state->param_count > 0) {
    size_t found = 0;
    for (const std::vector<NodeId>& group : state->group_params) {
      for (NodeId id : group) {
        if (g.at(id).kind != NodeKind::kStr) continue;
        NodeId v = DictLookup(g, g.root, g.at(id).text);
        found += v != kNoNode && g.at(v).kind == NodeKind::kTensor;
      }
    }
    if (found == state->param_count) {
      *found_at = "";
      return g.root;
    }
  }
  return NotFoundError("no model state_dict: the root is no {name: tensor} dict (every value a tensor) and has "
                       "no 'model', 'model_state_dict' or 'state_dict' entry that is one; name it with --model-key");
}

std::optional<std::string_view> Fsdp1FlatParamUnit(std::string_view name) {
  constexpr std::string_view kFlat = "_flat_param";
  if (!name.ends_with(kFlat)) return std::nullopt;
  std::string_view prefix = name.substr(0, name.size() - kFlat.size());
  if (!prefix.empty() && prefix.back() != '.') return std::nullopt;
  return prefix;
}

ModelParams ParamsOfModel(const Checkpoint& model, NodeId dict) {
  const ObjectGraph& g = model.graph;
  ModelParams out;
  // Tensors that may be parameters, in module order. A tied duplicate views
  // the same storage at the same offset, sizes and strides as an earlier one:
  // found by sorting on that, 16 bytes a tensor (a map keyed by it held
  // ~250 bytes a parameter, 25 MB at 10^5).
  struct Candidate {
    const TensorRef* tensor;
    NodeId key;
  };
  std::vector<Candidate> candidates;
  candidates.reserve(g.at(dict).entries.size());
  for (auto [k, v] : g.at(dict).entries) {
    if (g.at(v).kind != NodeKind::kTensor) continue;  // _extra_state and other non-tensors
    const TensorRef* t = &model.tensors[g.at(v).tensor];
    if (IsKnownBufferName(g.at(k).text) || !CanBeParameter(t->dtype)) {
      out.buffers.push_back(g.at(k).text);
      continue;
    }
    candidates.push_back({t, k});
  }
  auto view_of = [&](size_t i) {
    const TensorRef& t = *candidates[i].tensor;
    return std::tie(t.storage, t.storage_offset, t.sizes, t.strides);
  };
  std::vector<uint32_t> by_view(candidates.size());
  for (uint32_t i = 0; i < by_view.size(); ++i) by_view[i] = i;
  std::stable_sort(by_view.begin(), by_view.end(), [&](uint32_t a, uint32_t b) { return view_of(a) < view_of(b); });
  std::vector<int64_t> tied_to(candidates.size(), -1);  // the first candidate with the same view
  for (size_t i = 1; i < by_view.size(); ++i) {
    uint32_t here = by_view[i], before = by_view[i - 1];
    // Empty tensors share every view of nothing (FSDP1's LOCAL_STATE_DICT gives
    // a rank's absent parameters one empty storage): no evidence of tying.
    if (candidates[here].tensor->storage >= 0 && candidates[here].tensor->numel() > 0 &&
        view_of(here) == view_of(before)) {
      tied_to[here] = tied_to[before] >= 0 ? tied_to[before] : before;
    }
  }
  // FSDP1's LOCAL_STATE_DICT holds each unit's flat parameter as a
  // ShardedTensor named <unit prefix>_flat_param. With use_orig_params=True
  // the unit's own parameters are listed too, as views of it, and are what the
  // optimizer steps: the flat parameter is no parameter of its own then.
  auto has_own_views = [&](std::string_view prefix) {
    for (const Candidate& c : candidates) {
      std::string_view other = g.at(c.key).text.view();
      if (other.starts_with(prefix) && !Fsdp1FlatParamUnit(other)) return true;
    }
    return false;
  };
  out.params.reserve(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string name = g.at(candidates[i].key).text;
    const TensorRef& t = *candidates[i].tensor;
    std::optional<std::string_view> prefix = t.explicit_block() ? Fsdp1FlatParamUnit(name) : std::nullopt;
    if (prefix && has_own_views(*prefix)) {
      out.tied.push_back(name + " (FSDP1's flat parameter: its unit's parameters, listed, are views of it)");
    } else if (prefix) {
      out.params.push_back(FlatParamShard(name, t));
    } else if (tied_to[i] >= 0) {
      out.tied.push_back(name + " (tied to " + g.at(candidates[static_cast<size_t>(tied_to[i])].key).text + ")");
    } else {
      out.params.push_back(InfoOf(name, *candidates[i].tensor));
    }
  }
  out.order = "module order (tied duplicates and buffers dropped)";
  return out;
}

StatusOr<ModelParams> ParamsFromModel(const Checkpoint& model, NodeId dict, const Checkpoint& checkpoint,
                                      const OptimizerState& state) {
  const ObjectGraph& g = model.graph;
  std::map<std::string, const TensorRef*> by_name;
  for (auto [k, v] : g.at(dict).entries) {
    if (g.at(v).kind == NodeKind::kTensor) by_name.emplace(g.at(k).text, &model.tensors[g.at(v).tensor]);
  }
  ModelParams out;

  // DSD's layout names the parameters in param_groups: nothing to derive.
  const ObjectGraph& og = checkpoint.graph;
  size_t named = 0;
  for (const std::vector<NodeId>& group : state.group_params) {
    for (NodeId id : group) named += og.at(id).kind == NodeKind::kStr;
  }
  if (named > 0 && named == state.param_count) {
    for (size_t gi = 0; gi < state.group_params.size(); ++gi) {
      for (NodeId id : state.group_params[gi]) {
        const std::string& name = og.at(id).text;
        auto it = by_name.find(name);
        if (it == by_name.end()) {
          return InvalidArgumentError("param_groups[" + std::to_string(gi) + "] names '" + name +
                                      "', which the model state_dict does not have");
        }
        out.params.push_back(InfoOf(name, *it->second));
      }
    }
    out.order = "param_groups' order (it lists names)";
    return out;
  }

  // Module order, without what cannot be a trained parameter.
  ModelParams module = ParamsOfModel(model, dict);
  out.tied = std::move(module.tied);
  out.buffers = std::move(module.buffers);
  std::vector<ParamInfo> candidates = std::move(module.params);
  std::string dropped = Count(candidates.size(), "parameter") + " once " + Count(out.tied.size(), "tied duplicate") +
                        " and " + Count(out.buffers.size(), "buffer") + " are dropped";
  if (model.container.format == ContainerFormat::kSafetensors) {
    if (candidates.size() != state.param_count) {
      return InvalidArgumentError("the model has " + dropped + ", but param_groups lists " +
                                  std::to_string(state.param_count) + ": frozen parameters or unrecognised buffers");
    }
    return OrderByStateShapes(std::move(candidates), checkpoint, state, std::move(out));
  }
  if (state.group_params.size() == 1 && candidates.size() == state.param_count) {
    out.params = std::move(candidates);
    out.order = "model order (one param group; " + dropped + ")";
    return out;
  }
  if (candidates.size() < state.param_count) {
    return InvalidArgumentError("the model has " + dropped + ", but param_groups lists " +
                                std::to_string(state.param_count) +
                                ": unrecognised buffers, or this state was saved for another model; "
                                "write a manifest from the training script (README) and pass --manifest");
  }
  return OrderByGroups(std::move(candidates), checkpoint, state, dropped, std::move(out));
}

namespace {

// The shape and dtype of a state entry's first tensor other than `step`.
void TakeStateShape(const Checkpoint& checkpoint, NodeId entry, ParamInfo& p) {
  const ObjectGraph& g = checkpoint.graph;
  if (g.at(entry).kind != NodeKind::kDict) return;
  for (auto [name, v] : g.at(entry).entries) {
    if (g.at(v).kind != NodeKind::kTensor) continue;
    if (g.at(name).kind == NodeKind::kStr && g.at(name).text == "step") continue;
    const TensorRef& t = checkpoint.tensors[g.at(v).tensor];
    p.shape = t.whole_sizes();
    p.dtype = t.dtype;
    uint64_t numel = 1;
    for (int64_t d : p.shape) numel *= static_cast<uint64_t>(d);
    p.nbytes = numel * GetDTypeInfo(t.dtype).element_size;
    return;
  }
}

}  // namespace

ModelParams ParamsOfState(const Checkpoint& checkpoint, const OptimizerState& state) {
  const ObjectGraph& g = checkpoint.graph;
  ModelParams out;
  // DSD's layout names each parameter in param_groups; torch.optim's numbers them.
  std::map<std::string, size_t> by_name;
  for (const std::vector<NodeId>& group : state.group_params) {
    for (NodeId id : group) {
      ParamInfo p;
      p.dtype = DType::kFloat32;
      if (g.at(id).kind == NodeKind::kStr) {
        p.name = g.at(id).text;
        by_name.emplace(p.name, out.params.size());
      } else {
        p.name = "index " + std::to_string(out.params.size());
      }
      out.params.push_back(std::move(p));
    }
  }
  for (const StateKey& k : state.keys) {
    if (k.kind == KeyKind::kFqn) {
      auto it = by_name.find(k.fqn);
      if (it != by_name.end()) TakeStateShape(checkpoint, k.value, out.params[it->second]);
    } else if ((k.kind == KeyKind::kIndex || k.kind == KeyKind::kStringIndex) && k.index >= 0 &&
               static_cast<size_t>(k.index) < out.params.size()) {
      TakeStateShape(checkpoint, k.value, out.params[static_cast<size_t>(k.index)]);
    }
  }
  out.order = "param_groups' order; shapes and dtypes are the state's own (no model or manifest), so nothing was "
              "checked against a model";
  return out;
}

std::vector<std::string> CanonicalFqns(const std::vector<std::string>& names) {
  bool ddp = !names.empty();
  for (const std::string& n : names) ddp &= n.starts_with("module.");
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const std::string& n : names) {
    std::string fqn;
    size_t start = ddp ? 7 : 0;
    while (start <= n.size()) {
      size_t dot = n.find('.', start);
      std::string segment = n.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (segment != "_orig_mod" && segment != "_fsdp_wrapped_module" && segment != "_checkpoint_wrapped_module") {
        fqn += (fqn.empty() ? "" : ".") + segment;
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    out.push_back(fqn);
  }
  return out;
}

size_t RenameToCanonicalFqns(Checkpoint& cp, NodeId dict) {
  if (dict == kNoNode || cp.graph.at(dict).kind != NodeKind::kDict) return 0;
  std::vector<std::string> names;
  for (auto [k, v] : cp.graph.at(dict).entries) {
    if (cp.graph.at(k).kind != NodeKind::kStr) return 0;  // not a state dict of names
    names.push_back(cp.graph.at(k).text);
  }
  const std::vector<std::string> fqns = CanonicalFqns(names);
  GraphBuilder b(cp);
  size_t renamed = 0;
  for (size_t i = 0; i < fqns.size(); ++i) {
    if (fqns[i] == names[i]) continue;
    NodeId key = b.Str(fqns[i]);
    cp.graph.at(dict).entries[i].first = key;
    ++renamed;
  }
  return renamed;
}

}  // namespace optstate
