// The parameter list a match needs, from a manifest, a model file or the
// checkpoint's own model entry, and the content hashes that match (Parameter,
// i) keys of an optimizer saved alone by their parameters' bytes.
#include "state/param_loading.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "optstate/params.h"

namespace optstate {

Status LoadParams(const std::string& checkpoint, const ParamSource& source, const ReadOptions& read,
                  MatchedState& m, std::optional<std::vector<ParamInfo>> manifest) {
  if (!source.manifest.empty()) {
    if (!manifest) {
      OPTSTATE_ASSIGN_OR_RETURN(manifest, ReadParamManifest(source.manifest));
    }
    m.params = std::move(*manifest);
    m.params_from = "manifest " + source.manifest;
    m.order = "the manifest's order";
    return Status();
  }
  std::unique_ptr<CheckpointFile> own;
  const Checkpoint* model = &m.file->checkpoint();
  const std::string& path = source.model.empty() ? checkpoint : source.model;
  if (!source.model.empty()) {
    OPTSTATE_ASSIGN_OR_RETURN(own, OpenCheckpoint(source.model, read));
    model = &own->checkpoint();
  }
  std::string found_at;
  StatusOr<NodeId> dict = LocateModelStateDict(*model, source.model_key, &found_at, &m.state);
  if (!dict.ok()) {
    Status s = std::move(dict).status();
    const bool none_given = source.model.empty() && source.model_key.empty() && s.code() == StatusCode::kNotFound;
    const bool index_keys = (m.state.scheme == KeyKind::kIndex || m.state.scheme == KeyKind::kFqn) &&
                            !m.state.mixed;
    if (none_given && source.state_shapes_when_none && index_keys) {
      ModelParams own_shapes = ParamsOfState(m.file->checkpoint(), m.state);
      m.params = std::move(own_shapes.params);
      m.order = std::move(own_shapes.order);
      m.params_from = "the state's own shapes";
      m.params_from_state = true;
      return Status();
    }
    if (none_given) {
      s = NotFoundError("no parameter list: pass --manifest FILE or --model FILE (this checkpoint has no "
                        "'model', 'model_state_dict' or 'state_dict' entry; --model-key names another)");
    }
    return s.WithContext(path);
  }
  StatusOr<ModelParams> params = ParamsFromModel(*model, *dict, m.file->checkpoint(), m.state);
  if (!params.ok()) return std::move(params).status().WithContext(path);
  m.params = std::move(params->params);
  m.order = std::move(params->order);
  m.order_ambiguous = std::move(params->order_ambiguous);
  m.tied = std::move(params->tied);
  m.buffers = std::move(params->buffers);
  m.frozen = std::move(params->frozen);
  m.params_from = (source.model.empty() ? "" : "model state_dict ") +
                  (found_at.empty() ? path : "'" + found_at + "' in " + path);
  m.model_file = std::move(own);
  m.model_dict = *dict;
  return Status();
}

uint64_t ContentHash(ByteSpan bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) h = (h ^ static_cast<uint64_t>(b)) * 0x100000001b3ull;
  return h;
}

Status PrepareContentMatch(ByteSpan checkpoint_bytes, const Checkpoint& checkpoint, const OptimizerState& state,
                           const CheckpointFile& model, NodeId model_dict, std::vector<ParamInfo>& params,
                           MatchOptions& options) {
  bool param_views = std::any_of(state.keys.begin(), state.keys.end(),
                                 [](const StateKey& k) { return k.kind == KeyKind::kParamView; });
  if (!param_views || model_dict == kNoNode) return Status();
  const Checkpoint& mc = model.checkpoint();
  for (ParamInfo& p : params) {
    NodeId v = DictLookup(mc.graph, model_dict, p.name);
    if (v == kNoNode || mc.graph.at(v).kind != NodeKind::kTensor) continue;
    StatusOr<std::vector<std::byte>> bytes = ReadTensorBytes(model.bytes(), mc, mc.tensors[mc.graph.at(v).tensor]);
    if (!bytes.ok()) return std::move(bytes).status().WithContext(model.path() + ": " + p.name);
    p.content_hash = ContentHash(ByteSpan(bytes->data(), bytes->size()));
  }
  const Checkpoint* cp = &checkpoint;
  options.key_content = [checkpoint_bytes, cp](int64_t tensor) -> std::optional<uint64_t> {
    if (tensor < 0 || static_cast<size_t>(tensor) >= cp->tensors.size()) return std::nullopt;
    StatusOr<std::vector<std::byte>> bytes =
        ReadTensorBytes(checkpoint_bytes, *cp, cp->tensors[static_cast<size_t>(tensor)]);
    if (!bytes.ok()) return std::nullopt;
    return ContentHash(ByteSpan(bytes->data(), bytes->size()));
  };
  return Status();
}

Status PrepareContentMatch(MatchedState& m, MatchOptions& options) {
  const CheckpointFile* model = m.model();
  if (model == nullptr || model == m.file.get()) return Status();  // one file: shared storage decides
  return PrepareContentMatch(m.file->bytes(), m.file->checkpoint(), m.state, *model, m.model_dict, m.params, options);
}

}  // namespace optstate
