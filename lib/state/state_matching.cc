#include "optstate/collisions.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "io/enum_names.h"
#include "optstate/params.h"
#include "state/param_loading.h"
#include "state/split_views.h"
#include "state/matcher.h"

namespace optstate {
namespace match_internal {

Matcher::Matcher(const Checkpoint& cp, const OptimizerState& st, const std::vector<ParamInfo>& params,
                 const MatchOptions& o)
    : cp_(cp), st_(st), params_(params), opt_(o) {
  r_.keys.resize(st.keys.size());
  r_.params.resize(params.size());
  IndexParams();
}

StatusOr<MatchReport> Matcher::Run() {
  if (params_.size() != st_.param_count) {
    return InvalidArgumentError(std::to_string(params_.size()) + " parameters were given, but param_groups lists " +
                                std::to_string(st_.param_count));
  }
  std::vector<size_t> pointer_keys;
  for (size_t i = 0; i < st_.keys.size(); ++i) {
    const StateKey& k = st_.keys[i];
    switch (k.kind) {
      case KeyKind::kIndex:
      case KeyKind::kStringIndex:
        if (k.index >= 0 && static_cast<size_t>(k.index) < params_.size()) {
          Assign(i, static_cast<size_t>(k.index), Confidence::kExact);
        } else {
          Orphan(i, "index " + std::to_string(k.index) + " is beyond the " + std::to_string(params_.size()) +
                        " parameters");
        }
        break;
      case KeyKind::kFqn: MatchByName(i, k.fqn); break;
      case KeyKind::kPtrShape:
      case KeyKind::kBarePtr: pointer_keys.push_back(i); break;
      case KeyKind::kParamView: MatchParamView(i); break;
      default: Orphan(i, "a key of no known scheme"); break;
    }
  }
  OPTSTATE_RETURN_IF_ERROR(MatchPointers(pointer_keys));
  Finish();
  return std::move(r_);
}

void Matcher::Assign(size_t key, size_t param, Confidence c) {
  r_.keys[key].fate = KeyFate::kAssigned;
  r_.keys[key].params = {param};
  r_.keys[key].confidence = c;
  r_.params[param].keys.push_back(key);
  if (c > r_.params[param].confidence) r_.params[param].confidence = c;
}

void Matcher::Orphan(size_t key, std::string reason) {
  r_.keys[key].fate = KeyFate::kOrphan;
  r_.keys[key].reason = std::move(reason);
}

// Every lookup below goes through these, built once: matching 10^5 keys
// against 10^5 parameters is n log n, not a scan of the parameters per key.
void Matcher::IndexParams() {
  for (size_t p = 0; p < params_.size(); ++p) {
    by_name_.emplace(params_[p].name, p);  // the first of a name, as a scan in order finds
    by_shape_[params_[p].shape].push_back(p);
    if (params_[p].data_ptr) by_address_.push_back(p);
  }
  std::stable_sort(by_address_.begin(), by_address_.end(),
                   [&](size_t a, size_t b) { return *params_[a].data_ptr < *params_[b].data_ptr; });
  // Ranges that overlap (a manifest listing one storage twice) keep the scan
  // in parameter order, which gives the first parameter holding a pointer.
  uint64_t end = 0;
  for (size_t p : by_address_) {
    if (params_[p].nbytes == 0) continue;
    if (*params_[p].data_ptr < end) ranges_overlap_ = true;
    end = std::max(end, *params_[p].data_ptr + params_[p].nbytes);
  }
}

const std::vector<size_t>& Matcher::ParamsOfShape(const std::vector<int64_t>& shape) const {
  static const std::vector<size_t> kNone;
  auto it = by_shape_.find(shape);
  return it == by_shape_.end() ? kNone : it->second;
}

void Matcher::MatchByName(size_t key, const std::string& name) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return Assign(key, it->second, Confidence::kExact);
  Orphan(key, "no parameter is named '" + name + "'");
}

// (Parameter, view_idx): the Parameter pickled in the key shares its storage
// with the model's tensor of the same name when both were saved in one file.
void Matcher::MatchParamView(size_t key) {
  if (names_by_storage_.empty()) IndexNamedTensors();
  const TensorRef& t = cp_.tensors[static_cast<size_t>(st_.keys[key].tensor)];
  auto it = names_by_storage_.find({t.storage, t.storage_offset});
  if (it != names_by_storage_.end()) return MatchByName(key, it->second);
  if (opt_.key_content && !params_.empty() && params_.front().content_hash) return MatchByContent(key, t);
  Orphan(key, "its Parameter shares storage with no named tensor in this file; save the model in "
              "the same file, or give the model saved at the same step with --model");
}

// The key's copy of its Parameter against the model's tensors: the one
// parameter of its shape with the same bytes owns it.
void Matcher::MatchByContent(size_t key, const TensorRef& t) {
  std::optional<uint64_t> h = opt_.key_content(st_.keys[key].tensor);
  std::vector<size_t> same;
  for (size_t p : ParamsOfShape(t.sizes)) {
    if (h && params_[p].content_hash == h) same.push_back(p);
  }
  if (same.size() == 1) return Assign(key, same[0], Confidence::kExact);
  if (same.empty()) {
    Orphan(key, std::string("its Parameter's bytes equal no ") + ShapeText(t.sizes) +
                    " parameter of the model: a model saved at another step, or of another run?");
    return;
  }
  std::string reason = std::to_string(same.size()) + " parameters of shape " + ShapeText(t.sizes) +
                       " hold exactly these bytes (" + params_[same[0]].name + ", " + params_[same[1]].name +
                       (same.size() > 2 ? ", ..." : "") + "): which one owns this state cannot be told";
  HoldBack({key}, t.sizes, std::move(same), reason);
}

// Keys only data_ptr could place: one group holds their candidates.
void Matcher::HoldBack(const std::vector<size_t>& keys, const std::vector<int64_t>& shape,
                       std::vector<size_t> candidates,
              const std::string& reason) {
  int64_t group = -1;
  if (!candidates.empty()) {
    group = static_cast<int64_t>(r_.candidate_groups.size());
    std::vector<size_t> in_state_order = keys;
    std::sort(in_state_order.begin(), in_state_order.end());
    r_.candidate_groups.push_back(CandidateGroup{shape, std::move(candidates), std::move(in_state_order)});
  }
  for (size_t k : keys) {
    r_.keys[k].fate = KeyFate::kAmbiguous;
    r_.keys[k].params.clear();
    r_.keys[k].candidates = group;
    r_.keys[k].reason = reason;
    r_.ambiguous.push_back(k);
  }
}

void Matcher::IndexNamedTensors() {
  const ObjectGraph& g = cp_.graph;
  for (const Node& n : g.nodes) {
    if (n.kind != NodeKind::kDict) continue;
    for (auto [k, v] : n.entries) {
      if (g.at(k).kind == NodeKind::kStr && g.at(v).kind == NodeKind::kTensor) {
        const TensorRef& t = cp_.tensors[g.at(v).tensor];
        names_by_storage_.emplace(std::make_pair(t.storage, t.storage_offset), g.at(k).text);
      }
    }
  }
  names_by_storage_.emplace(std::make_pair(int64_t{-2}, uint64_t{0}), "");  // mark as indexed
}

void Matcher::MatchByShape(const std::vector<size_t>& keys) {
  std::map<std::vector<int64_t>, std::vector<size_t>> by_shape;
  for (size_t i : keys) by_shape[st_.keys[i].shape].push_back(i);
  for (auto& [shape, ks] : by_shape) {
    const std::vector<size_t>& owners = ParamsOfShape(shape);
    std::sort(ks.begin(), ks.end(), [&](size_t a, size_t b) { return st_.keys[a].ptr < st_.keys[b].ptr; });
    if (owners.empty()) {
      // Without pointers a view and a temporary copy look alike: refuse rather than guess.
      const std::string& from = ViewSources(shape);
      const bool fsdp1_piece = shape.size() == 1 && std::any_of(params_.begin(), params_.end(), [](const ParamInfo& p) {
        return p.explicit_block();
      });
      if (from.empty() && shape.size() == 1 && !fsdp1_piece && st_.groups_name_params) {
        // Whole parameters and names in param_groups: FULL_STATE_DICT's
        // FSDP.optim_state_dict, which gathered none of these pieces.
        for (size_t k : ks) {
          Orphan(k, "a 1-D piece of " + std::to_string(shape[0]) + " elements in a state whose param_groups name "
                    "the parameters (FSDP.optim_state_dict): under FSDP1 the saving rank's piece of a flattened "
                    "parameter, passed through unconverted and never gathered (under FULL_STATE_DICT, rank 0's "
                    "alone); the other ranks' pieces are in no file of this save");
        }
      } else if (from.empty() && fsdp1_piece) {
        // FSDP1 steps each rank's own 1-D pieces of its flat parameters, and
        // FSDP.optim_state_dict converts only state keyed by parameters: what
        // else it finds (HeavyBall's pointer keys) it passes through as it is.
        for (size_t k : ks) {
          Orphan(k, "a 1-D piece of " + std::to_string(shape[0]) + " elements beside FSDP1 ShardedTensor parameters: "
                    "the state of a piece of a flattened parameter that this rank stepped, which FSDP.optim_state_dict "
                    "passed through unconverted (it converts state keyed by parameters only); no parameter holds it "
                    "as it is, and placing its elements needs the run's flat layout (a manifest from the training "
                    "process)");
        }
      } else if (from.empty()) {
        for (size_t k : ks) {
          Orphan(k, "no parameter has shape " + ShapeText(shape) + " or could have a view of that shape");
        }
      } else {
        HoldBack(ks, shape, {}, "no parameter has shape " + ShapeText(shape) + "; it may be a view of " + from +
                                    " (split or merged dims) or a temporary copy: data_ptr in a manifest decides");
      }
    } else if (owners.size() == 1 && ks.size() == 1) {
      Assign(ks[0], owners[0], Confidence::kShapeUnique);
    } else {
      // Pairing same-shape keys by pointer order (allocation order) was tried
      // and mapped 4 to 9 of 9 parameters wrongly on real HeavyBall 0.x files:
      // only data_ptr decides.
      HoldBack(ks, shape, owners,
               std::to_string(owners.size()) + (owners.size() == 1 ? " parameter" : " parameters") + " of shape " +
                   ShapeText(shape) + " and " + std::to_string(ks.size()) + " keys: " +
                   "same-shape parameters cannot be told apart without their data_ptr (a manifest)");
    }
  }
}

// The shape of a bare-pointer key's view: that of the first tensor in its
// entry (HeavyBall 0.12 keyed views by data_ptr alone; their state has the
// view's shape). Empty when the entry holds no tensor.
std::vector<int64_t> Matcher::EntryTensorShape(const StateKey& key) const {
  const ObjectGraph& g = cp_.graph;
  if (g.at(key.value).kind != NodeKind::kDict) return {};
  for (auto [name, v] : g.at(key.value).entries) {
    if (g.at(v).kind == NodeKind::kTensor) return cp_.tensors[g.at(v).tensor].sizes;
  }
  return {};
}

void Matcher::Finish() {
  for (size_t p = 0; p < params_.size(); ++p) {
    ParamMatch& m = r_.params[p];
    if (!m.collided) {
      // Views in order: by pointer, or by the (Parameter, i) view index.
      std::sort(m.keys.begin(), m.keys.end(), [&](size_t a, size_t b) {
        const StateKey& x = st_.keys[a];
        const StateKey& y = st_.keys[b];
        return x.kind == KeyKind::kParamView ? x.view < y.view : x.ptr < y.ptr;
      });
      InSplitOrder(params_[p], m.keys);
      for (size_t v = 0; v < m.keys.size(); ++v) r_.keys[m.keys[v]].view = static_cast<int64_t>(v);
    }
    if (m.keys.empty()) r_.without_state.push_back(p);
  }
  for (size_t i = 0; i < r_.keys.size(); ++i) {
    if (r_.keys[i].fate == KeyFate::kOrphan) {
      r_.orphans.push_back(i);
      r_.unattributable_bytes += st_.keys[i].state_bytes;
    }
  }
  for (const CollisionGroup& c : r_.collisions) r_.unattributable_bytes += c.bytes;
  std::sort(r_.ambiguous.begin(), r_.ambiguous.end());  // state dict order, like orphans
  // Report collisions in the order their keys appear in the state dict.
  std::sort(r_.collisions.begin(), r_.collisions.end(),
            [](const CollisionGroup& a, const CollisionGroup& b) { return a.keys.front() < b.keys.front(); });
}

}  // namespace match_internal

namespace {
constexpr EnumNames<Confidence, 2> kConfidenceNames(
    {{{Confidence::kExact, "exact"}, {Confidence::kShapeUnique, "shape-unique"}}}, "exact");
constexpr EnumNames<KeyFate, 4> kKeyFateNames({{{KeyFate::kAssigned, "assigned"}, {KeyFate::kCollided, "collided"},
                                                {KeyFate::kOrphan, "orphan"}, {KeyFate::kAmbiguous, "ambiguous"}}},
                                              "orphan");
}  // namespace

std::string_view ConfidenceName(Confidence c) { return kConfidenceNames.Name(c); }

std::string_view KeyFateName(KeyFate f) { return kKeyFateNames.Name(f); }

bool IsDimMerge(const std::vector<int64_t>& shape, const std::vector<int64_t>& merged) {
  if (merged.empty() || shape.size() <= merged.size()) return false;
  size_t i = 0;
  for (int64_t want : merged) {
    if (want <= 0) return false;
    int64_t product = 1;
    while (i < shape.size() && product < want) product *= shape[i++];
    if (product != want) return false;
    while (i < shape.size() && shape[i] == 1) ++i;
  }
  return i == shape.size();
}

namespace {

StatusOr<MatchedState> MatchOpened(std::unique_ptr<CheckpointFile> file, const std::string& state_key,
                                   const ParamSource& source, const ReadOptions& read, const MatchOptions& match,
                                   std::optional<std::vector<ParamInfo>> manifest) {
  MatchedState m;
  m.file = std::move(file);
  const std::string checkpoint = m.file->path();
  StatusOr<OptimizerState> state = LocateOptimizerState(m.file->checkpoint(), state_key);
  if (!state.ok()) return std::move(state).status().WithContext(checkpoint);
  m.state = std::move(*state);
  OPTSTATE_RETURN_IF_ERROR(LoadParams(checkpoint, source, read, m, std::move(manifest)));
  MatchOptions options = match;
  OPTSTATE_RETURN_IF_ERROR(PrepareContentMatch(m, options));
  StatusOr<MatchReport> report = MatchState(m.file->checkpoint(), m.state, m.params, options);
  if (!report.ok()) return std::move(report).status().WithContext(checkpoint);
  m.match = std::move(*report);
  return m;
}

}  // namespace

StatusOr<MatchedState> OpenAndMatch(const std::string& checkpoint, const std::string& state_key,
                                    const ParamSource& source, const ReadOptions& read, const MatchOptions& match) {
  // A manifest is read first: its JSON document (~500 bytes a parameter while
  // it is parsed, 50 MB at 10^5) is then freed before the checkpoint's graph
  // grows, and its memory reused by it, rather than adding to the graph's peak.
  std::optional<std::vector<ParamInfo>> manifest;
  if (!source.manifest.empty()) {
    OPTSTATE_ASSIGN_OR_RETURN(manifest, ReadParamManifest(source.manifest));
  }
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointFile> file, OpenCheckpoint(checkpoint, read));
  return MatchOpened(std::move(file), state_key, source, read, match, std::move(manifest));
}

StatusOr<MatchedState> MatchCheckpoint(std::unique_ptr<CheckpointFile> file, const std::string& state_key,
                                       const ParamSource& source, const ReadOptions& read, const MatchOptions& match) {
  return MatchOpened(std::move(file), state_key, source, read, match, std::nullopt);
}

StatusOr<MatchReport> MatchState(const Checkpoint& checkpoint, const OptimizerState& state,
                                 const std::vector<ParamInfo>& params, const MatchOptions& options) {
  match_internal::Matcher m(checkpoint, state, params, options);
  return m.Run();
}

}  // namespace optstate
