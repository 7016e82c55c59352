// The matcher of state entries to parameters (state_matching.cc: names, views,
// content, shapes and the report; pointer_matching.cc: HeavyBall's data_ptr
// keys, by address range, at pointer 0 and in split order). Internal to lib/state.
#ifndef OPTSTATE_LIB_STATE_MATCHER_H_
#define OPTSTATE_LIB_STATE_MATCHER_H_

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "optstate/collisions.h"

namespace optstate::match_internal {

inline uint64_t ViewBytes(const StateKey& k, const ParamInfo& p) {
  uint64_t n = 1;
  for (int64_t d : k.shape) n *= static_cast<uint64_t>(d);
  return n * GetDTypeInfo(p.dtype).element_size;
}

class Matcher {
 public:
  Matcher(const Checkpoint& cp, const OptimizerState& st, const std::vector<ParamInfo>& params,
          const MatchOptions& o);

  StatusOr<MatchReport> Run();

 private:
  void Assign(size_t key, size_t param, Confidence c);

  void Orphan(size_t key, std::string reason);

  // Every lookup below goes through these, built once: matching 10^5 keys
  // against 10^5 parameters is n log n, not a scan of the parameters per key.
  void IndexParams();

  const std::vector<size_t>& ParamsOfShape(const std::vector<int64_t>& shape) const;

  void MatchByName(size_t key, const std::string& name);

  // (Parameter, view_idx): the Parameter pickled in the key shares its storage
  // with the model's tensor of the same name when both were saved in one file.
  void MatchParamView(size_t key);

  // The key's copy of its Parameter against the model's tensors: the one
  // parameter of its shape with the same bytes owns it.
  void MatchByContent(size_t key, const TensorRef& t);

  // Keys only data_ptr could place: one group holds their candidates.
  void HoldBack(const std::vector<size_t>& keys, const std::vector<int64_t>& shape, std::vector<size_t> candidates,
                const std::string& reason);

  void IndexNamedTensors();

  Status MatchPointers(const std::vector<size_t>& keys);

  void MatchZeroPointer(const std::vector<int64_t>& shape, const std::vector<size_t>& ks);

  void MatchByRange(size_t i);

  // Parameters a key of `shape` could be a view of without being of that shape:
  // a split along dim 0 (same trailing dims, fewer rows) or a reshape (same
  // element count, as HeavyBall's merge_dims made). "emb.weight [16, 8], ...".
  // At most kNamed are listed ("..., and 9,992 more"), and the text is made once
  // per shape: an orphan per key must not cost a pass over every parameter.
  const std::string& ViewSources(const std::vector<int64_t>& shape);

  void MatchByShape(const std::vector<size_t>& keys);

  // The shape of a bare-pointer key's view: that of the first tensor in its
  // entry (HeavyBall 0.12 keyed views by data_ptr alone; their state has the
  // view's shape). Empty when the entry holds no tensor.
  std::vector<int64_t> EntryTensorShape(const StateKey& key) const;

  // Pointer keys of one parameter's split views: HeavyBall's own view order
  // (split_views.h) where their offsets place them as its blocks.
  void InSplitOrder(const ParamInfo& p, std::vector<size_t>& keys) const;

  void Finish();

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

}  // namespace optstate::match_internal

#endif  // OPTSTATE_LIB_STATE_MATCHER_H_
