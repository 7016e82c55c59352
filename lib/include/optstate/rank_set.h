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
#ifndef OPTSTATE_RANK_SET_H_
#define OPTSTATE_RANK_SET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "optstate/state_matching.h"

namespace optstate {

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

}  // namespace optstate

#endif  // OPTSTATE_RANK_SET_H_
