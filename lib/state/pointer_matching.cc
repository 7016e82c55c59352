// Matching HeavyBall's pointer keys ((data_ptr, shape)) to parameters: by the
// address range each parameter's storage covers, split views in HeavyBall's
// split order, and keys at pointer 0 (FSDP2's DTensors) by shape alone.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "state/matcher.h"
#include "state/split_views.h"

namespace optstate {

namespace match_internal {

Status Matcher::MatchPointers(const std::vector<size_t>& keys) {
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

void Matcher::MatchZeroPointer(const std::vector<int64_t>& shape, const std::vector<size_t>& ks) {
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

void Matcher::MatchByRange(size_t i) {
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
const std::string& Matcher::ViewSources(const std::vector<int64_t>& shape) {
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

// Pointer keys of one parameter's split views: HeavyBall's own view order
// (split_views.h) where their offsets place them as its blocks.
void Matcher::InSplitOrder(const ParamInfo& p, std::vector<size_t>& keys) const {
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

}  // namespace match_internal

}  // namespace optstate
