#include "optstate/state_matching.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "optstate/model_params.h"
#include "state/param_loading.h"
#include "state/split_views.h"

namespace optstate {
namespace {

uint64_t ViewBytes(const StateKey& k, const ParamInfo& p) {
  uint64_t n = 1;
  for (int64_t d : k.shape) n *= static_cast<uint64_t>(d);
  return n * GetDTypeInfo(p.dtype).element_size;
}

class Matcher {
 public:
  Matcher(const Checkpoint& cp, const OptimizerState& st, const std::vector<ParamInfo>& params, const MatchOptions& o)
      : cp_(cp), st_(st), params_(params), opt_(o) {
    r_.keys.resize(st.keys.size());
    r_.params.resize(params.size());
    IndexParams();
  }

  StatusOr<MatchReport> Run() {
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

 private:
  void Assign(size_t key, size_t param, Confidence c) {
    r_.keys[key].fate = KeyFate::kAssigned;
    r_.keys[key].params = {param};
    r_.keys[key].confidence = c;
    r_.params[param].keys.push_back(key);
    if (c > r_.params[param].confidence) r_.params[param].confidence = c;
  }

  void Orphan(size_t key, std::string reason) {
    r_.keys[key].fate = KeyFate::kOrphan;
    r_.keys[key].reason = std::move(reason);
  }

  // Every lookup below goes through these, built once: matching 10^5 keys
  // against 10^5 parameters is n log n, not a scan of the parameters per key.
  void IndexParams() {
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

  const std::vector<size_t>& ParamsOfShape(const std::vector<int64_t>& shape) const {
    static const std::vector<size_t> kNone;
    auto it = by_shape_.find(shape);
    return it == by_shape_.end() ? kNone : it->second;
  }

  void MatchByName(size_t key, const std::string& name) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) return Assign(key, it->second, Confidence::kExact);
    Orphan(key, "no parameter is named '" + name + "'");
  }

  // (Parameter, view_idx): the Parameter pickled in the key shares its storage
  // with the model's tensor of the same name when both were saved in one file.
  void MatchParamView(size_t key) {
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
  void MatchByContent(size_t key, const TensorRef& t) {
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
  void HoldBack(const std::vector<size_t>& keys, const std::vector<int64_t>& shape, std::vector<size_t> candidates,
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

  void IndexNamedTensors() {
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

  Status MatchPointers(const std::vector<size_t>& keys) {
    if (keys.empty()) return Status();
    bool have_ptrs = std::all_of(params_.begin(), params_.end(), [](const ParamInfo& p) { return p.data_ptr.has_value(); });
    std::vector<size_t> rest;
    // Pointer 0 is what FSDP's flat parameters reported for every parameter:
    // all parameters of a shape (of any shape, for bare pointers) share one key.
    std::map<std::vector<int64_t>, std::vector<size_t>> zero_keys;
    for (size_t i : keys) {
      if (st_.keys[i].ptr == 0) {
        zero_keys[st_.keys[i].kind == KeyKind::kBarePtr ? std::vector<int64_t>{-1} : st_.keys[i].shape].push_back(i);
      } else {
        rest.push_back(i);
      }
    }
    for (auto& [shape, ks] : zero_keys) MatchZeroPointer(shape, ks);
    if (rest.empty()) return Status();
    if (have_ptrs) {
      for (size_t i : rest) MatchByRange(i);
      return Status();
    }
    for (size_t i : rest) {
      if (st_.keys[i].kind == KeyKind::kBarePtr) {
        return InvalidArgumentError("bare pointer keys carry no shape: matching them needs data_ptr for every "
                                    "parameter in the manifest");
      }
    }
    MatchByShape(rest);
    return Status();
  }

  void MatchZeroPointer(const std::vector<int64_t>& shape, const std::vector<size_t>& ks) {
    bool any_shape = shape == std::vector<int64_t>{-1};
    std::vector<size_t> owners;
    if (any_shape) {
      for (size_t p = 0; p < params_.size(); ++p) owners.push_back(p);
    } else {
      owners = ParamsOfShape(shape);
    }
    bool merged_view = false;
    if (owners.empty() && !any_shape) {
      // HeavyBall's merge_dims keyed the merged view of a parameter: [64, 27]
      // for a [64, 3, 3, 3] conv weight, at pointer 0 like the rest.
      for (const auto& [param_shape, ps] : by_shape_) {
        if (IsDimMerge(param_shape, shape)) owners.insert(owners.end(), ps.begin(), ps.end());
      }
      std::sort(owners.begin(), owners.end());
      merged_view = !owners.empty();
    }
    if (owners.size() == 1 && ks.size() == 1) return Assign(ks[0], owners[0], Confidence::kShapeUnique);
    if (owners.empty()) {
      for (size_t k : ks) Orphan(k, "pointer 0 and no parameter has shape " + ShapeText(shape) +
                                        " or one that merges to it");
      return;
    }
    CollisionGroup c;
    if (!any_shape) c.shape = shape;
    c.params = owners;
    c.keys = ks;
    c.reason = std::to_string(owners.size()) + " parameters" +
               (any_shape ? "" : (merged_view ? " whose dims merge to " : " of shape ") + ShapeText(shape)) +
               " keyed at pointer 0 (FSDP) shared " + (ks.size() == 1 ? "one state entry" : std::to_string(ks.size()) + " entries") +
               ": their moments were merged in training and cannot be split";
    for (size_t k : ks) {
      r_.keys[k].fate = KeyFate::kCollided;
      r_.keys[k].params = owners;
      r_.keys[k].reason = c.reason;
      c.bytes += st_.keys[k].state_bytes;
    }
    for (size_t p : owners) {
      r_.params[p].collided = true;
      r_.params[p].keys.insert(r_.params[p].keys.end(), ks.begin(), ks.end());
    }
    r_.collisions.push_back(std::move(c));
  }

  void MatchByRange(size_t i) {
    const StateKey& k = st_.keys[i];
    auto holds = [&](size_t p) {
      const ParamInfo& info = params_[p];
      uint64_t begin = *info.data_ptr, end = begin + info.nbytes;
      uint64_t extent = k.kind == KeyKind::kPtrShape ? ViewBytes(k, info) : 1;
      return k.ptr >= begin && k.ptr < end && extent <= end - k.ptr;
    };
    if (ranges_overlap_) {
      for (size_t p = 0; p < params_.size(); ++p) {
        if (holds(p)) return Assign(i, p, Confidence::kExact);
      }
    } else {
      // Disjoint ranges: only the last one starting at or before the pointer can hold it.
      auto after = std::upper_bound(by_address_.begin(), by_address_.end(), k.ptr,
                                    [&](uint64_t ptr, size_t p) { return ptr < *params_[p].data_ptr; });
      for (auto it = after; it != by_address_.begin();) {
        size_t p = *--it;
        if (holds(p)) return Assign(i, p, Confidence::kExact);
        if (params_[p].nbytes != 0) break;  // empty ranges hold nothing; look past them
      }
    }
    std::string from = k.kind == KeyKind::kPtrShape ? ViewSources(k.shape) : "";
    Orphan(i, "pointer " + std::to_string(k.ptr) + " lies inside no parameter: state of a temporary " +
                  (from.empty() ? std::string("(HeavyBall keyed reshape copies)")
                                : "(a reshape copy of " + from + "?)") +
                  ", never used by any parameter");
  }

  // Parameters a key of `shape` could be a view of without being of that shape:
  // a split along dim 0 (same trailing dims, fewer rows) or a reshape (same
  // element count, as HeavyBall's merge_dims made). "emb.weight [16, 8], ...".
  // At most kNamed are listed ("..., and 9,992 more"), and the text is made once
  // per shape: an orphan per key must not cost a pass over every parameter.
  const std::string& ViewSources(const std::vector<int64_t>& shape) {
    auto cached = view_sources_.find(shape);
    if (cached != view_sources_.end()) return cached->second;
    auto numel = [](const std::vector<int64_t>& s) {
      uint64_t n = 1;
      for (int64_t d : s) n *= static_cast<uint64_t>(d);
      return n;
    };
    std::vector<size_t> sources;
    for (const auto& [param_shape, ps] : by_shape_) {
      if (param_shape == shape || param_shape.empty() || shape.empty()) continue;
      bool split = param_shape.size() == shape.size() && shape[0] < param_shape[0] &&
                   std::equal(shape.begin() + 1, shape.end(), param_shape.begin() + 1);
      if (split || numel(shape) == numel(param_shape)) sources.insert(sources.end(), ps.begin(), ps.end());
    }
    std::sort(sources.begin(), sources.end());
    constexpr size_t kNamed = 8;
    std::string out;
    for (size_t i = 0; i < sources.size() && i < kNamed; ++i) {
      const ParamInfo& p = params_[sources[i]];
      out += (out.empty() ? "" : ", ") + p.name + " " + ShapeText(p.shape);
    }
    if (sources.size() > kNamed) out += ", and " + std::to_string(sources.size() - kNamed) + " more";
    return view_sources_.emplace(shape, std::move(out)).first->second;
  }

  void MatchByShape(const std::vector<size_t>& keys) {
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
  std::vector<int64_t> EntryTensorShape(const StateKey& key) const {
    const ObjectGraph& g = cp_.graph;
    if (g.at(key.value).kind != NodeKind::kDict) return {};
    for (auto [name, v] : g.at(key.value).entries) {
      if (g.at(v).kind == NodeKind::kTensor) return cp_.tensors[g.at(v).tensor].sizes;
    }
    return {};
  }

  // Pointer keys of one parameter's split views: HeavyBall's own view order
  // (split_views.h) where their offsets place them as its blocks.
  void InSplitOrder(const ParamInfo& p, std::vector<size_t>& keys) const {
    if (keys.size() < 2 || !p.data_ptr) return;
    const uint64_t element = GetDTypeInfo(p.dtype).element_size;
    std::vector<ViewPlacement> views;
    for (size_t k : keys) {
      const StateKey& key = st_.keys[k];
      const bool pointer = key.kind == KeyKind::kPtrShape || key.kind == KeyKind::kBarePtr;
      if (!pointer || key.ptr < *p.data_ptr || (key.ptr - *p.data_ptr) % element != 0) return;
      std::vector<int64_t> shape = key.kind == KeyKind::kPtrShape ? key.shape : EntryTensorShape(key);
      if (shape.empty()) return;
      views.push_back(ViewPlacement{(key.ptr - *p.data_ptr) / element, std::move(shape)});
    }
    std::optional<std::vector<size_t>> order = HeavyBallSplitOrder(p.shape, views);
    if (!order) return;
    std::vector<size_t> sorted;
    for (size_t i : *order) sorted.push_back(keys[i]);
    keys = std::move(sorted);
  }

  void Finish() {
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

  struct PairHash {
    size_t operator()(const std::pair<int64_t, uint64_t>& p) const {
      return std::hash<int64_t>()(p.first) * 31 + std::hash<uint64_t>()(p.second);
    }
  };

  const Checkpoint& cp_;
  const OptimizerState& st_;
  const std::vector<ParamInfo>& params_;
  const MatchOptions& opt_;
  std::unordered_map<std::pair<int64_t, uint64_t>, std::string, PairHash> names_by_storage_;
  std::unordered_map<std::string_view, size_t> by_name_;
  std::map<std::vector<int64_t>, std::vector<size_t>> by_shape_;  // parameter order within a shape
  std::vector<size_t> by_address_;  // parameters with a data_ptr, by it
  bool ranges_overlap_ = false;
  std::map<std::vector<int64_t>, std::string> view_sources_;
  MatchReport r_;
};

}  // namespace

std::string_view ConfidenceName(Confidence c) {
  switch (c) {
    case Confidence::kExact: return "exact";
    case Confidence::kShapeUnique: return "shape-unique";
  }
  return "exact";
}

std::string_view KeyFateName(KeyFate f) {
  switch (f) {
    case KeyFate::kAssigned: return "assigned";
    case KeyFate::kCollided: return "collided";
    case KeyFate::kOrphan: return "orphan";
    case KeyFate::kAmbiguous: return "ambiguous";
  }
  return "orphan";
}

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
  Matcher m(checkpoint, state, params, options);
  return m.Run();
}

}  // namespace optstate
