// Finding and reading the files of a ZeRO tag directory; placing the
// fragments and checking they add up is zero_layout.cc.
#include "optstate/zero.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "optstate/torch_objects.h"
#include "zero/zero_graph.h"

namespace optstate {
namespace {

struct TagFiles {
  std::map<uint32_t, std::string> optim;        // rank -> path
  std::map<uint32_t, std::string> rank_models;  // stage 3: rank -> path
  std::string model;                            // mp_rank_00_model_states.pt
  std::string optim_prefix;
  std::string other_mp;                         // a file of model-parallel rank > 0, if any
};

// "zero_pp_rank_12_mp_rank_00_optim_states.pt" -> 12 (suffix "_optim_states.pt").
std::optional<uint32_t> RankOf(const std::string& name, const std::string& suffix) {
  const std::string head = "zero_pp_rank_", mp = "_mp_rank_00" + suffix;
  if (!name.starts_with(head) || !name.ends_with(mp)) return std::nullopt;
  std::string digits = name.substr(head.size(), name.size() - head.size() - mp.size());
  if (digits.empty() || digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(std::stoul(digits));
}

TagFiles ListTagFiles(const std::string& dir) {
  TagFiles out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    std::string n = e.path().filename().string();
    std::string base = n.starts_with("bf16_") ? n.substr(5) : n;
    if (n == "mp_rank_00_model_states.pt") {
      out.model = e.path().string();
    } else if (auto r = RankOf(base, "_optim_states.pt")) {
      out.optim[*r] = e.path().string();
      if (base != n) out.optim_prefix = "bf16_";
    } else if (auto m = RankOf(n, "_model_states.pt")) {
      out.rank_models[*m] = e.path().string();
    } else if ((n.starts_with("mp_rank_") || n.find("_mp_rank_") != std::string::npos) &&
               (n.ends_with("_model_states.pt") || n.ends_with("_optim_states.pt"))) {
      out.other_mp = n;
    }
  }
  return out;
}

Status ReadModelStates(const ObjectGraph& g, const std::string& path, ZeroCheckpoint& z) {
  NodeId root = g.root;
  std::set<std::string> names;
  uint64_t total = 0;  // every parameter's elements: bounded, so that offsets summed later cannot overflow
  auto count = [&](const std::vector<int64_t>& shape, const std::string& name) -> Status {
    if (!names.insert(name).second) return CorruptError(path + ": parameter '" + name + "' is listed twice");
    total += ShapeNumel(shape);
    if (total > kMaxZeroNumel) {
      return LimitExceededError(path + ": the parameters up to '" + name + "' hold more than 2^48 elements");
    }
    return Status();
  };
  NodeId shapes = DictLookup(g, root, "param_shapes");
  if (shapes == kNoNode || g.at(shapes).kind != NodeKind::kList) {
    return CorruptError(path + ": no 'param_shapes' list (one {name: shape} per param group): not a DeepSpeed "
                        "model states file");
  }
  for (NodeId group : g.at(shapes).items) {
    if (!IsDictNode(g, group)) return CorruptError(path + ": param_shapes holds a " + TypeName(g, group) + ", not a dict");
    ZeroGroup zg;
    for (const auto& [k, v] : g.at(group).entries) {
      auto shape = ShapeOf(g, v);
      if (g.at(k).kind != NodeKind::kStr || !shape) {
        return CorruptError(path + ": param_shapes entry " + KeyOrType(g, k) + " is no name with a shape");
      }
      OPTSTATE_RETURN_IF_ERROR(count(*shape, g.at(k).text));
      zg.params.push_back(z.params.size());
      z.params.push_back(ZeroParam{g.at(k).text, *shape, ShapeNumel(*shape), static_cast<int64_t>(z.groups.size()), {}});
    }
    z.groups.push_back(std::move(zg));
  }
  NodeId frozen = DictLookup(g, root, "frozen_param_shapes");
  if (frozen != kNoNode && IsDictNode(g, frozen)) {
    for (const auto& [k, v] : g.at(frozen).entries) {
      auto shape = ShapeOf(g, v);
      if (g.at(k).kind != NodeKind::kStr || !shape) {
        return CorruptError(path + ": frozen_param_shapes entry " + KeyOrType(g, k) + " is no name with a shape");
      }
      OPTSTATE_RETURN_IF_ERROR(count(*shape, g.at(k).text));
      z.params.push_back(ZeroParam{g.at(k).text, *shape, ShapeNumel(*shape), -1, {}});
    }
  }
  NodeId buffers = DictLookup(g, root, "buffer_names");
  if (buffers != kNoNode && g.at(buffers).kind == NodeKind::kList) {
    for (NodeId b : g.at(buffers).items) {
      if (g.at(b).kind == NodeKind::kStr) z.buffer_names.push_back(g.at(b).text);
    }
  }
  NodeId shared = DictLookup(g, root, "shared_params");
  if (shared != kNoNode && IsDictNode(g, shared)) {
    for (const auto& [k, v] : g.at(shared).entries) {
      if (g.at(k).kind == NodeKind::kStr && g.at(v).kind == NodeKind::kStr) {
        z.shared_params.emplace_back(g.at(k).text, g.at(v).text);
      }
    }
  }
  if (NodeId v = DictLookup(g, root, "ds_version"); v != kNoNode && g.at(v).kind == NodeKind::kStr) {
    z.ds_version = g.at(v).text;
  }
  return Status();
}

// zero_stage is DeepSpeed's ZeroStageEnum(n) (a call never performed) or a plain int.
std::optional<int64_t> StageOf(const ObjectGraph& g, NodeId n) {
  if (n == kNoNode) return std::nullopt;
  if (auto v = IntOf(g, n)) return v;
  const Node& node = g.at(n);
  if (node.kind == NodeKind::kObject && node.args() != kNoNode && g.at(node.args()).kind == NodeKind::kTuple &&
      g.at(node.args()).items.size() == 1) {
    return IntOf(g, g.at(node.args()).items[0]);
  }
  return std::nullopt;
}

}  // namespace

bool IsZeroTagDirectory(const std::string& dir) {
  TagFiles f = ListTagFiles(dir);
  return !f.optim.empty() && (!f.model.empty() || !f.rank_models.empty());
}

StatusOr<std::unique_ptr<ZeroCheckpoint>> OpenZeroCheckpoint(const std::string& dir, const ReadOptions& read) {
  auto z = std::make_unique<ZeroCheckpoint>();
  z->dir = dir;
  TagFiles files = ListTagFiles(dir);
  if (!files.other_mp.empty()) {
    return UnsupportedError(dir + "/" + files.other_mp + ": a model-parallel rank other than 0 (tensor or "
                            "pipeline parallelism): only mp_rank_00 checkpoints are read");
  }
  if (files.optim.empty()) {
    return NotFoundError(dir + ": no zero_pp_rank_R_mp_rank_00_optim_states.pt: not a DeepSpeed ZeRO checkpoint");
  }
  z->optim_prefix = files.optim_prefix;
  // The first rank file present says the stage and how many ranks there are.
  const auto& [first_rank, first_path] = *files.optim.begin();
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointFile> first, OpenCheckpoint(first_path, read));
  const ObjectGraph& fg = first->checkpoint().graph;
  NodeId osd = DictLookup(fg, fg.root, "optimizer_state_dict");
  std::optional<int64_t> stage = osd == kNoNode ? std::nullopt : StageOf(fg, DictLookup(fg, osd, "zero_stage"));
  if (!stage && osd != kNoNode && DictLookup(fg, osd, "single_partition_of_fp32_groups") != kNoNode &&
      DictLookup(fg, osd, "param_slice_mappings") != kNoNode && DictLookup(fg, osd, "base_optimizer_state") != kNoNode) {
    // BF16_Optimizer's state_dict: ZeRO-1's partition keys, no zero_stage or loss scaler.
    stage = 1;
    z->bf16_optimizer = true;
  }
  if (!stage || *stage < 1 || *stage > 3) {
    return UnsupportedError(first_path + ": no optimizer_state_dict.zero_stage of 1, 2 or 3: not a ZeRO optimizer "
                            "file this version reads");
  }
  z->stage = static_cast<int>(*stage);
  NodeId count = DictLookup(fg, osd, "partition_count");
  int64_t world = 0;
  if (auto n = IntOf(fg, count)) world = *n;
  if (count != kNoNode && IsSequence(fg, count)) {
    for (NodeId c : fg.at(count).items) world = std::max<int64_t>(world, IntOf(fg, c).value_or(0));
  }
  if (world < 1 || world > (1 << 16)) {
    return CorruptError(first_path + ": optimizer_state_dict.partition_count gives no data-parallel world size "
                        "(1 to 65536)");
  }
  z->world_size = static_cast<uint32_t>(world);

  // The model states: one file (stages 1, 2) or rank 0's (stage 3).
  std::string model_path = z->stage == 3 ? (files.rank_models.count(0) ? files.rank_models[0] : "") : files.model;
  if (model_path.empty()) {
    return NotFoundError(dir + ": no " +
                         std::string(z->stage == 3 ? "zero_pp_rank_0_mp_rank_00_model_states.pt"
                                                   : "mp_rank_00_model_states.pt") +
                         ": the parameter names and shapes of a ZeRO-" + std::to_string(z->stage) +
                         " checkpoint are there");
  }
  OPTSTATE_ASSIGN_OR_RETURN(z->model, OpenCheckpoint(model_path, read));
  OPTSTATE_RETURN_IF_ERROR(ReadModelStates(z->model->checkpoint().graph, model_path, *z));

  z->ranks.resize(z->world_size);
  for (auto& [rank, path] : files.optim) {
    if (rank >= z->world_size) {
      z->problems.push_back({"file", path, "rank " + std::to_string(rank) + " is beyond the world size " +
                                               std::to_string(z->world_size) + " that partition_count gives"});
    }
  }
  for (uint32_t r = 0; r < z->world_size; ++r) {
    ZeroRank& rank = z->ranks[r];
    std::string name = z->optim_prefix + "zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_optim_states.pt";
    if (!files.optim.count(r)) {
      z->problems.push_back({"missing-file", dir + "/" + name,
                             "rank " + std::to_string(r) + "'s optimizer partition is missing (" +
                                 std::to_string(z->world_size) + " ranks saved)"});
    } else {
      rank.optim_path = files.optim[r];
      if (r == first_rank) {
        rank.optim = std::move(first);
      } else {
        auto f = OpenCheckpoint(rank.optim_path, read);
        if (!f.ok()) {
          z->problems.push_back({"file", rank.optim_path, f.status().ToString()});
        } else {
          rank.optim = std::move(*f);
        }
      }
    }
    if (z->stage == 3) {
      std::string model_name = "zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_model_states.pt";
      if (!files.rank_models.count(r)) {
        z->problems.push_back({"missing-file", dir + "/" + model_name,
                               "rank " + std::to_string(r) + "'s model states (its frozen parameter pieces) are missing"});
      } else if (r > 0) {
        rank.model_path = files.rank_models[r];
        auto f = OpenCheckpoint(rank.model_path, read);
        if (!f.ok()) {
          z->problems.push_back({"file", rank.model_path, f.status().ToString()});
        } else {
          rank.model = std::move(*f);
        }
      } else {
        rank.model_path = model_path;
      }
    } else {
      rank.model_path = model_path;
    }
  }
  PlaceZeroFragments(*z);
  return z;
}

FrozenTensorRef FindFrozenTensor(const ZeroCheckpoint& z, const std::string& name, uint32_t rank) {
  FrozenTensorRef out;
  out.file = rank == 0 ? z.model.get() : rank < z.ranks.size() ? z.ranks[rank].model.get() : nullptr;
  if (out.file == nullptr) return out;
  const ObjectGraph& g = out.file->checkpoint().graph;
  NodeId frags = DictLookup(g, g.root, "frozen_param_fragments");
  out.node = IsDictNode(g, frags) ? DictLookup(g, frags, name) : kNoNode;
  if (out.node == kNoNode && z.stage != 3) out.node = DictLookup(g, DictLookup(g, g.root, "module"), name);
  return out;
}

NodeId ZeroStateTensor(const ZeroCheckpoint& zero, uint32_t rank, size_t group, const std::string& field) {
  if (rank >= zero.ranks.size() || !zero.ranks[rank].optim) return kNoNode;
  const ZeroRank& zr = zero.ranks[rank];
  const ObjectGraph& g = zr.optim->checkpoint().graph;
  if (zr.optimizer_state_dict == kNoNode) return kNoNode;
  NodeId state = DictLookup(g, zr.optimizer_state_dict, "state");
  if (state == kNoNode || !IsDictNode(g, state)) return kNoNode;
  for (const auto& [k, v] : g.at(state).entries) {
    if (IntOf(g, k) == static_cast<int64_t>(group)) {
      NodeId t = DictLookup(g, v, field);
      return t != kNoNode && g.at(t).kind == NodeKind::kTensor ? t : kNoNode;
    }
  }
  return kNoNode;
}

}  // namespace optstate
