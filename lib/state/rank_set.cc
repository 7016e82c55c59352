#include "optstate/collisions.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "torch/shard_layout.h"
#include "state/param_loading.h"

namespace optstate {
namespace {

// The N of the last "rank<N>" in a file's name, or -1.
int64_t RankInName(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  int64_t found = -1;
  for (size_t at = name.find("rank"); at != std::string::npos; at = name.find("rank", at + 1)) {
    size_t i = at + 4, n = 0;
    int64_t v = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' && n < 9) v = v * 10 + (name[i++] - '0'), ++n;
    if (n > 0) found = v;
  }
  return found;
}

std::string RankText(size_t r, const std::string& file) { return file + " (rank " + std::to_string(r) + ")"; }

// "whole" for a tensor that is not a DTensor.
std::string PlacedText(const std::vector<std::string>& placements) {
  return placements.empty() ? "whole" : PlacementsText(placements);
}
std::string PlacedText(const ParamInfo& p) {
  return p.explicit_block() ? "in ShardedTensor blocks" : PlacedText(p.placements());
}

// DTensor parameters: the same global shape, placements and mesh on every
// rank, and shards that tile the whole once at the ranks' mesh coordinates
// (shard_layout.h; FSDP2 alone, TP alone, FSDP2 + TP).
Status CheckDTensorTiling(const RankSetMatch& set, size_t p) {
  const ParamInfo& p0 = set.ranks[0].params[p];
  for (size_t r = 1; r < set.ranks.size(); ++r) {
    const ParamInfo& pr = set.ranks[r].params[p];
    if (pr.shape != p0.shape || pr.placements() != p0.placements() || pr.mesh_shape() != p0.mesh_shape() ||
        pr.explicit_block() != p0.explicit_block()) {
      return InvalidArgumentError(RankText(r, set.files[r]) + ": parameter " + p0.name + " is " +
                                  ShapeText(pr.shape) + " placed " + PlacedText(pr) + " on mesh " +
                                  ShapeText(pr.mesh_shape()) + ", but " + ShapeText(p0.shape) + " placed " +
                                  PlacedText(p0) + " on mesh " + ShapeText(p0.mesh_shape()) +
                                  " on rank 0");
    }
  }
  if (p0.placements().empty() && !p0.explicit_block()) return Status();  // a whole tensor on every rank
  std::vector<int64_t> mesh = p0.mesh_shape();
  if (mesh.empty()) mesh.push_back(static_cast<int64_t>(set.ranks.size()));  // a mesh tensor we did not read
  std::vector<ShardView> views;
  for (size_t r = 0; r < set.ranks.size(); ++r) {
    const ParamInfo& pr = set.ranks[r].params[p];
    views.push_back({pr.local_shape(), pr.mesh_coordinate(),
                     RankText(r, set.models.empty() ? set.files[r] : set.models[r]), pr.block_offsets()});
  }
  StatusOr<ShardTiling> tiling = p0.explicit_block() ? TileExplicitBlocks(p0.shape, views)
                                                     : TileShards(p0.shape, p0.placements(), mesh, views);
  if (!tiling.ok()) {
    return std::move(tiling).status().WithContext("parameter " + p0.name + " " + ShapeText(p0.shape) + " placed " +
                                                   PlacedText(p0));
  }
  return Status();
}

// `.to_local()` files: whole shapes as FSDP2's Shard(0) would give them, used
// when they explain more of the state's shape keys than the local shapes.
void InferGlobalShapes(RankSetMatch& set) {
  std::vector<ParamInfo>& p0 = set.ranks[0].params;
  std::vector<std::vector<int64_t>> summed(p0.size());
  for (size_t p = 0; p < p0.size(); ++p) {
    summed[p] = p0[p].shape;
    if (summed[p].empty()) continue;
    bool fits = true;
    for (size_t r = 1; r < set.ranks.size(); ++r) {
      const std::vector<int64_t>& s = set.ranks[r].params[p].shape;
      fits &= s.size() == summed[p].size() && std::equal(s.begin() + 1, s.end(), summed[p].begin() + 1);
      if (fits) summed[p][0] += s[0];
    }
    if (!fits) summed[p] = p0[p].shape;
  }
  std::set<std::vector<int64_t>> local, global;
  for (size_t p = 0; p < p0.size(); ++p) local.insert(p0[p].shape), global.insert(summed[p]);
  size_t keys = 0, local_hits = 0, global_hits = 0;
  for (const StateKey& k : set.ranks[0].state.keys) {
    if (k.kind != KeyKind::kPtrShape) continue;
    ++keys;
    local_hits += local.count(k.shape);
    global_hits += global.count(k.shape);
  }
  std::string n = std::to_string(set.ranks.size());
  if (global_hits <= local_hits) {
    set.global_shapes = "the model files' own shapes (" + std::to_string(local_hits) + " of " + std::to_string(keys) +
                        " shape keys match them; summing the " + n + " ranks' rows would match " +
                        std::to_string(global_hits) + ")";
    return;
  }
  for (MatchedState& m : set.ranks) {
    for (size_t p = 0; p < m.params.size(); ++p) {
      ParamInfo& info = m.params[p];
      if (info.shape == summed[p]) continue;
      info.shard().local_shape = info.shape;
      info.shard().placements = {"Shard(dim=0)"};
      uint64_t per_row = info.shape[0] > 0 ? info.nbytes / static_cast<uint64_t>(info.shape[0]) : 0;
      info.shape = summed[p];
      info.nbytes = per_row * static_cast<uint64_t>(summed[p][0]);
    }
  }
  set.global_shapes = "inferred from the " + n + " ranks' local shards, stacked along dim 0 as FSDP2 shards them (" +
                      std::to_string(global_hits) + " of " + std::to_string(keys) +
                      " shape keys match; the local shapes would match " + std::to_string(local_hits) + ")";
}

// Index or FQN keys, which torch.optim maps itself: each names its parameter,
// so ranks may hold state for different parameters (FSDP1 with
// use_orig_params: a parameter with no elements on a rank is never stepped
// there) and still be one save.
bool NamesItsParameter(const OptimizerState& s) {
  return !s.mixed && (s.scheme == KeyKind::kIndex || s.scheme == KeyKind::kFqn);
}

// HeavyBall's pointer keys hold the address each process saw. Under FSDP2
// every DTensor's is 0, so the ranks' keys agree; under FSDP1 each rank steps
// real tensors of its own (pieces of the flat parameter, 1-D, some empty), so
// the same save's ranks hold different keys, and different numbers of them.
// True when every rank's keys are pointers, no parameter is a DTensor or
// ShardedTensor, and the ranks' keys differ.
// The same keys, printed alike, in the same order.
bool SameKeys(const OptimizerState& a, const OptimizerState& b) {
  if (a.keys.size() != b.keys.size()) return false;
  for (size_t k = 0; k < a.keys.size(); ++k) {
    if (a.keys[k].text != b.keys[k].text) return false;
  }
  return true;
}

bool PointersPerProcess(const RankSetMatch& set) {
  auto pointers = [](const OptimizerState& s) {
    return !s.mixed && (s.scheme == KeyKind::kPtrShape || s.scheme == KeyKind::kBarePtr);
  };
  auto sharded = [](const ParamInfo& p) { return !p.local_shape().empty() || p.explicit_block(); };
  bool differ = false;
  for (const MatchedState& m : set.ranks) {
    if (!pointers(m.state) || std::any_of(m.params.begin(), m.params.end(), sharded)) return false;
    differ |= !SameKeys(m.state, set.ranks[0].state);
  }
  return differ;
}

Status CheckStatesAgree(const RankSetMatch& set) {
  const OptimizerState& s0 = set.ranks[0].state;
  for (size_t r = 1; r < set.ranks.size(); ++r) {
    const OptimizerState& s = set.ranks[r].state;
    if (s.param_count == s0.param_count && s.scheme == s0.scheme && NamesItsParameter(s) && NamesItsParameter(s0)) {
      continue;
    }
    if (s.param_count != s0.param_count || s.keys.size() != s0.keys.size()) {
      return InvalidArgumentError(RankText(r, set.files[r]) + ": " + std::to_string(s.keys.size()) +
                                  " state entries for " + std::to_string(s.param_count) + " parameters, rank 0 has " +
                                  std::to_string(s0.keys.size()) + " for " + std::to_string(s0.param_count) +
                                  ": not the same save");
    }
    for (size_t k = 0; k < s.keys.size(); ++k) {
      // A (Parameter, i) key prints its rank's own shard; kind and view index are what must agree.
      bool same = s.keys[k].kind == KeyKind::kParamView
                      ? s0.keys[k].kind == KeyKind::kParamView && s.keys[k].view == s0.keys[k].view
                      : s.keys[k].text == s0.keys[k].text;
      if (!same) {
        return InvalidArgumentError(RankText(r, set.files[r]) + ": state entry " + std::to_string(k) + " is " +
                                    s.keys[k].text + " where rank 0 has " + s0.keys[k].text);
      }
    }
  }
  return Status();
}

}  // namespace

StatusOr<std::vector<std::string>> OrderByRank(const std::vector<std::string>& files) {
  std::map<int64_t, std::string> by_rank;
  for (const std::string& f : files) {
    int64_t r = RankInName(f);
    if (r < 0) return files;
    if (!by_rank.emplace(r, f).second) {
      return InvalidArgumentError(f + " and " + by_rank[r] + " both name rank " + std::to_string(r));
    }
  }
  if (by_rank.rbegin()->first != static_cast<int64_t>(files.size()) - 1) return files;  // not 0..n-1
  std::vector<std::string> out;
  for (auto& [r, f] : by_rank) out.push_back(f);
  return out;
}

StatusOr<RankSetMatch> OpenAndMatchRankSet(const RankSetSource& source, const std::string& state_key,
                                           const ReadOptions& read, const MatchOptions& match) {
  RankSetMatch set;
  if (source.files.empty()) return InvalidArgumentError("no checkpoint files");
  OPTSTATE_ASSIGN_OR_RETURN(set.files, OrderByRank(source.files));
  if (!source.models.empty()) {
    OPTSTATE_ASSIGN_OR_RETURN(set.models, OrderByRank(source.models));
    if (set.models.size() != set.files.size()) {
      return InvalidArgumentError(std::to_string(set.files.size()) + " optimizer files but " +
                                  std::to_string(set.models.size()) +
                                  (set.models.size() == 1 ? " --model file" : " --model files") +
                                  ": give one per rank");
    }
  }
  for (size_t r = 0; r < set.files.size(); ++r) {
    MatchedState m;
    OPTSTATE_ASSIGN_OR_RETURN(m.file, OpenCheckpoint(set.files[r], read));
    StatusOr<OptimizerState> st = LocateOptimizerState(m.file->checkpoint(), state_key);
    if (!st.ok()) return std::move(st).status().WithContext(RankText(r, set.files[r]));
    m.state = std::move(*st);
    ParamSource ps{source.manifest, set.models.empty() ? "" : set.models[r], source.model_key};
    OPTSTATE_RETURN_IF_ERROR(LoadParams(set.files[r], ps, read, m));
    set.ranks.push_back(std::move(m));
  }
  const std::vector<ParamInfo>& p0 = set.ranks[0].params;
  for (size_t r = 1; r < set.ranks.size(); ++r) {
    const std::vector<ParamInfo>& pr = set.ranks[r].params;
    if (pr.size() != p0.size()) {
      return InvalidArgumentError(RankText(r, set.files[r]) + ": " + std::to_string(pr.size()) +
                                  " parameters, rank 0 has " + std::to_string(p0.size()));
    }
    for (size_t p = 0; p < p0.size(); ++p) {
      if (pr[p].name != p0[p].name) {
        return InvalidArgumentError(RankText(r, set.files[r]) + ": parameter " + std::to_string(p) + " is '" +
                                    pr[p].name + "' where rank 0 has '" + p0[p].name + "'");
      }
    }
  }
  const bool own_pointers = PointersPerProcess(set);
  set.ranks_differ = own_pointers;
  for (size_t r = 1; r < set.ranks.size() && NamesItsParameter(set.ranks[0].state); ++r) {
    set.ranks_differ |= !SameKeys(set.ranks[r].state, set.ranks[0].state);
  }
  if (!own_pointers) OPTSTATE_RETURN_IF_ERROR(CheckStatesAgree(set));
  bool dtensors = std::any_of(p0.begin(), p0.end(), [](const ParamInfo& p) { return !p.local_shape().empty(); });
  if (own_pointers) {
    set.global_shapes = "none: every rank's parameters are its own pieces and its pointer keys its own process's "
                        "addresses (FSDP1), so each rank is matched on its own";
  } else if (!source.manifest.empty()) {
    set.global_shapes = "the manifest's shapes";
  } else if (dtensors) {
    for (size_t p = 0; p < p0.size(); ++p) OPTSTATE_RETURN_IF_ERROR(CheckDTensorTiling(set, p));
    set.global_shapes = "the DTensors' global shapes, shards tiling each once at the ranks' mesh coordinates";
  } else if (set.ranks.size() > 1) {
    InferGlobalShapes(set);
  } else {
    set.global_shapes = "the model file's own shapes";
  }
  // Where keys name their parameters, ranks may hold different ones: the same
  // entry is found on rank 0 by name, not by position.
  std::map<std::string_view, size_t> on_rank0;
  for (size_t k = 0; NamesItsParameter(set.ranks[0].state) && k < set.ranks[0].state.keys.size(); ++k) {
    on_rank0.emplace(set.ranks[0].state.keys[k].text.view(), k);
  }
  for (size_t r = 0; r < set.ranks.size(); ++r) {
    MatchedState& m = set.ranks[r];
    MatchOptions options = match;
    OPTSTATE_RETURN_IF_ERROR(PrepareContentMatch(m, options).WithContext(RankText(r, set.files[r])));
    StatusOr<MatchReport> report = MatchState(m.file->checkpoint(), m.state, m.params, options);
    if (!report.ok()) return std::move(report).status().WithContext(RankText(r, set.files[r]));
    m.match = std::move(*report);
    // The same entry on every rank meets the same fate (under own pointers the
    // ranks' entries are not the same entries).
    if (own_pointers) continue;
    const bool by_name = r > 0 && NamesItsParameter(m.state) && NamesItsParameter(set.ranks[0].state);
    for (size_t k = 0; r > 0 && k < m.match.keys.size(); ++k) {
      size_t k0 = k;
      if (by_name) {
        auto it = on_rank0.find(m.state.keys[k].text.view());
        if (it == on_rank0.end()) continue;
        k0 = it->second;
      }
      const KeyMatch& a = set.ranks[0].match.keys[k0];
      const KeyMatch& b = m.match.keys[k];
      if (a.fate != b.fate || set.ranks[0].match.CandidatesOf(k0) != m.match.CandidatesOf(k)) {
        return InvalidArgumentError(RankText(r, set.files[r]) + ": state entry " + m.state.keys[k].text + " is " +
                                    std::string(KeyFateName(b.fate)) + " here but " +
                                    std::string(KeyFateName(a.fate)) + " on rank 0");
      }
    }
  }
  return set;
}

}  // namespace optstate
