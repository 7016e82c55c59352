#include "optstate/unshard.h"

#include <map>
#include <memory>
#include <set>

#include "dcp/box_copy.h"
#include "io/staging_directory.h"
#include "optstate/params.h"
#include "optstate/collisions.h"
#include "torch/shard_layout.h"
#include "pickle/graph_walk.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

// Every DTensor reachable from the root through dicts, lists and tuples, by
// path ("state.3.exp_avg"). A DTensor's own rebuild call is not descended into.
struct TensorsByPath {
  std::map<std::string, NodeId> dtensors;
  std::map<std::string, NodeId> plain;
};

void FindTensors(const Checkpoint& cp, NodeId id, const std::string& path, std::set<NodeId>& seen,
                 TensorsByPath& out, int depth = 0) {
  if (depth > 256 || !seen.insert(id).second) return;
  const Node& n = cp.graph.at(id);
  if (n.kind == NodeKind::kTensor) {
    (cp.tensors[n.tensor].is_dtensor ? out.dtensors : out.plain).emplace(path, id);
    return;
  }
  if (n.kind != NodeKind::kDict && n.kind != NodeKind::kList && n.kind != NodeKind::kTuple) return;
  std::string prefix = path.empty() ? "" : path + ".";
  for (auto [k, v] : n.entries) {
    const Node& key = cp.graph.at(k);
    std::string name = key.kind == NodeKind::kStr ? key.text.str() : ValueText(cp.graph, k, 200);
    FindTensors(cp, v, prefix + name, seen, out, depth + 1);
  }
  for (size_t i = 0; i < n.items.size(); ++i) FindTensors(cp, n.items[i], prefix + std::to_string(i), seen, out, depth + 1);
}

// Plain tensors are taken from rank 0; those whose bytes differ on another
// rank (per-rank values, e.g. preconditioners computed from a local shard)
// are named in the report rather than passed off as the whole.
StatusOr<bool> SameOnEveryRank(const std::vector<std::unique_ptr<CheckpointFile>>& in,
                               const std::vector<TensorsByPath>& found, const std::string& path) {
  const Checkpoint& cp0 = in[0]->checkpoint();
  const TensorRef& t0 = cp0.tensors[cp0.graph.at(found[0].plain.at(path)).tensor];
  OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::byte> b0, ReadTensorBytes(in[0]->bytes(), cp0, t0));
  for (size_t r = 1; r < in.size(); ++r) {
    auto it = found[r].plain.find(path);
    if (it == found[r].plain.end()) return false;
    const Checkpoint& cp = in[r]->checkpoint();
    const TensorRef& t = cp.tensors[cp.graph.at(it->second).tensor];
    if (t.sizes != t0.sizes || t.dtype != t0.dtype) return false;
    OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::byte> b, ReadTensorBytes(in[r]->bytes(), cp, t));
    if (b != b0) return false;
  }
  return true;
}

std::string Where(size_t r, const std::string& file, const std::string& path) {
  return file + " (rank " + std::to_string(r) + "): " + (path.empty() ? "(root)" : path);
}

std::string LayoutText(const TensorRef& t) {
  if (t.explicit_block()) {
    return "ShardedTensor over " + (t.mesh_shape().empty() ? std::string("?") : std::to_string(t.mesh_shape()[0])) +
           " ranks";
  }
  return PlacementsText(t.placements()) + " on mesh " + ShapeText(t.mesh_shape());
}

// One DTensor made whole: every rank's shard and the block of the whole it is.
struct WholeTensor {
  std::string path;
  ShardTiling tiling;
  std::vector<const TensorRef*> shards;   // per rank
  TensorRef whole;
};

// Every rank's file open, every DTensor's shards tiled, every plain tensor
// compared across ranks: all that unsharding checks, before anything is written.
struct UnshardPlan {
  std::vector<std::string> files;  // in rank order
  std::vector<std::unique_ptr<CheckpointFile>> in;
  std::vector<TensorsByPath> found;
  std::vector<WholeTensor> wholes;  // in rank 0's path order
  std::vector<std::string> rank_local;
};

StatusOr<UnshardPlan> PlanUnshard(const std::vector<std::string>& given, const ReadOptions& read,
                                  bool allow_no_dtensors = false) {
  UnshardPlan plan;
  if (given.size() < 2) return InvalidArgumentError("unshard needs the files of at least two ranks");
  OPTSTATE_ASSIGN_OR_RETURN(plan.files, OrderByRank(given));
  std::vector<std::unique_ptr<CheckpointFile>>& in = plan.in;
  std::vector<TensorsByPath>& found = plan.found;
  found.resize(plan.files.size());
  for (size_t r = 0; r < plan.files.size(); ++r) {
    OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointFile> f, OpenCheckpoint(plan.files[r], read));
    std::set<NodeId> seen;
    FindTensors(f->checkpoint(), f->checkpoint().graph.root, "", seen, found[r]);
    in.push_back(std::move(f));
  }
  const size_t ranks = in.size();
  std::vector<std::map<std::string, NodeId>> dtensors;
  for (const TensorsByPath& t : found) dtensors.push_back(t.dtensors);
  if (dtensors[0].empty() && !allow_no_dtensors) {
    return InvalidArgumentError(plan.files[0] + ": holds no DTensor or ShardedTensor: nothing to unshard (for "
                                "`.to_local()` copies the placements are gone)");
  }
  std::vector<WholeTensor> wholes;
  uint64_t largest_mesh = 0;
  for (auto& [path, node0] : dtensors[0]) {
    const Checkpoint& cp0 = in[0]->checkpoint();
    WholeTensor w;
    w.path = path;
    const TensorRef& t0 = cp0.tensors[cp0.graph.at(node0).tensor];
    // LOCAL_STATE_DICT saves each FSDP1 unit's flat parameter, and beside it
    // each rank's own pieces; which elements belong to which parameter is
    // FSDP's run-time metadata, which no file holds.
    if (t0.explicit_block() && Fsdp1FlatParamUnit(path)) {
      return InvalidArgumentError(plan.files[0] + ": " + path + " is an FSDP1 flat parameter (LOCAL_STATE_DICT): the "
                                  "rest of each rank's file is that rank's own pieces of it, and where each "
                                  "parameter's elements lie in it is FSDP's run-time layout, which the files do not "
                                  "hold; save with SHARDED_STATE_DICT (FSDP.optim_state_dict) to make it whole, or "
                                  "check the rank files as they are (collisions, verify, validate)");
    }
    std::vector<ShardView> views;
    for (size_t r = 0; r < ranks; ++r) {
      auto it = dtensors[r].find(path);
      if (it == dtensors[r].end()) {
        return InvalidArgumentError(Where(r, plan.files[r], path) + ": no DTensor here, rank 0 has one");
      }
      const Checkpoint& cp = in[r]->checkpoint();
      const TensorRef& t = cp.tensors[cp.graph.at(it->second).tensor];
      if (t.global_sizes() != t0.global_sizes() || t.dtype != t0.dtype || t.placements() != t0.placements() ||
          t.mesh_shape() != t0.mesh_shape() || t.explicit_block() != t0.explicit_block()) {
        return InvalidArgumentError(Where(r, plan.files[r], path) + ": " + ShapeText(t.global_sizes()) + " " +
                                    LayoutText(t) + ", rank 0 has " + ShapeText(t0.global_sizes()) + " " +
                                    LayoutText(t0) + (t.dtype != t0.dtype ? " (and another dtype)" : ""));
      }
      views.push_back({t.sizes, t.mesh_coordinate(), plan.files[r] + " (rank " + std::to_string(r) + ")", std::nullopt});
      if (t.explicit_block() && !t.holds_no_block()) views.back().block_offsets = t.block_offsets();
      w.shards.push_back(&t);
    }
    std::vector<int64_t> mesh = t0.mesh_shape();
    if (mesh.empty()) mesh.push_back(static_cast<int64_t>(ranks));  // its mesh tensor was not read
    uint64_t positions = 1;
    for (int64_t m : mesh) positions *= static_cast<uint64_t>(std::max<int64_t>(m, 1));
    largest_mesh = std::max(largest_mesh, positions);
    StatusOr<ShardTiling> tiling = t0.explicit_block() ? TileExplicitBlocks(t0.global_sizes(), views)
                                                       : TileShards(t0.global_sizes(), t0.placements(), mesh, views);
    if (!tiling.ok()) {
      return std::move(tiling).status().WithContext(path + " " + ShapeText(t0.global_sizes()) + " " + LayoutText(t0));
    }
    w.tiling = std::move(*tiling);
    wholes.push_back(std::move(w));
  }
  if (!wholes.empty() && largest_mesh != ranks) {
    return InvalidArgumentError(plan.files[0] + ": its largest device mesh has " + std::to_string(largest_mesh) +
                                " positions but " + std::to_string(ranks) +
                                " files were given: give every rank's file of one save, once");
  }
  for (size_t r = 1; r < ranks; ++r) {
    if (dtensors[r].size() != dtensors[0].size()) {
      return InvalidArgumentError(plan.files[r] + " (rank " + std::to_string(r) + "): " +
                                  std::to_string(dtensors[r].size()) + " DTensors, rank 0 has " +
                                  std::to_string(dtensors[0].size()));
    }
  }

  for (auto& [path, node] : found[0].plain) {
    if (wholes.empty()) break;  // not shards: nothing is compared (it would read every byte)
    OPTSTATE_ASSIGN_OR_RETURN(bool same, SameOnEveryRank(in, found, path));
    if (!same) plan.rank_local.push_back(path);
  }
  plan.wholes = std::move(wholes);
  return plan;
}

}  // namespace

StatusOr<RankSetLayout> CheckRankSetLayout(const std::vector<std::string>& files, const ReadOptions& read) {
  OPTSTATE_ASSIGN_OR_RETURN(UnshardPlan plan, PlanUnshard(files, read, /*allow_no_dtensors=*/true));
  RankSetLayout layout;
  layout.files = plan.files;
  layout.rank_local = plan.rank_local;
  layout.plain_tensors = plan.found[0].plain.size();
  for (const WholeTensor& w : plan.wholes) {
    const TensorRef& t0 = *w.shards[0];
    layout.dtensors.push_back({w.path, t0.global_sizes(), t0.placements(), t0.mesh_shape(), t0.dtype, w.tiling.replicas});
  }
  return layout;
}

StatusOr<UnshardReport> UnshardRankFiles(const std::vector<std::string>& given, const std::string& output,
                                         const UnshardOptions& o) {
  OPTSTATE_ASSIGN_OR_RETURN(UnshardPlan plan, PlanUnshard(given, o.read));
  UnshardReport report;
  report.files = plan.files;
  report.rank_local = plan.rank_local;
  std::vector<std::unique_ptr<CheckpointFile>>& in = plan.in;
  std::vector<WholeTensor>& wholes = plan.wholes;
  std::map<std::string, NodeId> dtensors0;
  for (const WholeTensor& w : wholes) dtensors0.emplace(w.path, plan.found[0].dtensors.at(w.path));

  // Rank 0's graph with each DTensor node turned, in place, into a plain tensor
  // with a storage of its own after rank 0's.
  Checkpoint out = in[0]->checkpoint();
  // What one process would have saved has a step per parameter (collisions.h, the remap).
  for (const std::string& path : FindOptimizerStates(out)) {
    StatusOr<OptimizerState> st = ReadOptimizerState(out, path);
    if (st.ok()) report.steps_separated += SeparateSharedSteps(out, DictLookup(out.graph, st->node, "state"));
  }
  const size_t kept_storages = out.storages.size();
  GraphBuilder b(out);
  std::vector<size_t> whole_of_storage;  // storage index - kept_storages -> wholes index
  size_t i = 0;
  for (auto& [path, node0] : dtensors0) {
    const TensorRef t0 = out.tensors[out.graph.at(node0).tensor];  // a copy: Tensor() grows the array
    NodeId fresh = b.Tensor(t0.dtype, t0.global_sizes());
    out.graph.at(node0) = out.graph.at(fresh);
    wholes[i].whole = out.tensors[out.graph.at(fresh).tensor];
    whole_of_storage.push_back(i);
    ++i;
  }
  for (const WholeTensor& w : wholes) report.dtensor_bytes += w.whole.nbytes();
  report.dtensors = wholes.size();

  std::vector<std::byte> assembled, gathered;
  std::vector<std::vector<std::byte>> copies;  // non-contiguous shards, for the current storage
  uint64_t done = 0;
  const CheckpointFile& first = *in[0];
  auto source = [&](size_t storage) -> StatusOr<std::vector<RecordPiece>> {
    copies.clear();
    if (storage < kept_storages) {  // rank 0's own plain tensors, copied as they are
      ++report.plain_tensors;
      const StorageRef& s = out.storages[storage];
      OPTSTATE_ASSIGN_OR_RETURN(ByteSpan bytes, StorageBytes(first.bytes(), out, s));
      RecordPiece p{bytes, StorageRecordCrc(out, s), std::nullopt};
      if (p.crc) p.source = first.FileRangeOf(bytes);
      return std::vector<RecordPiece>{p};
    }
    const WholeTensor& w = wholes[whole_of_storage[storage - kept_storages]];
    std::vector<RecordPiece> pieces;
    auto shard_bytes = [&](size_t r) -> StatusOr<ByteSpan> {
      const Checkpoint& cp = in[r]->checkpoint();
      OPTSTATE_ASSIGN_OR_RETURN(std::optional<ByteSpan> span, TensorBytesInPlace(in[r]->bytes(), cp, *w.shards[r]));
      if (span) return *span;
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::byte> copy, ReadTensorBytes(in[r]->bytes(), cp, *w.shards[r]));
      copies.push_back(std::move(copy));
      return ByteSpan(copies.back().data(), copies.back().size());
    };
    copies.reserve(w.tiling.owners.size());
    if (w.tiling.row_slabs) {  // Replicate, or Shard(0) on any mesh: the owners' bytes one after the other
      for (size_t r : w.tiling.owners) {
        OPTSTATE_ASSIGN_OR_RETURN(ByteSpan span, shard_bytes(r));
        if (!span.empty()) pieces.push_back(RecordPiece{span, std::nullopt, std::nullopt});
      }
    } else {  // blocks along other dims: put together in memory
      assembled.assign(w.whole.nbytes(), std::byte{0});
      size_t elem = GetDTypeInfo(w.whole.dtype).element_size;
      Box dst{std::vector<int64_t>(w.whole.sizes.size(), 0), w.whole.sizes};
      for (size_t r : w.tiling.owners) {
        OPTSTATE_ASSIGN_OR_RETURN(ByteSpan span, shard_bytes(r));
        const ShardBox& block = w.tiling.boxes[r];
        CopyIntersection(Box{block.offsets, block.sizes}, span.data(), dst, assembled.data(), elem);
      }
      report.largest_assembled_bytes = std::max<uint64_t>(report.largest_assembled_bytes, assembled.size());
      pieces.push_back(RecordPiece{ByteSpan(assembled.data(), assembled.size()), std::nullopt, std::nullopt});
    }
    done += w.whole.nbytes();
    if (o.progress) o.progress(done, report.dtensor_bytes);
    return pieces;
  };
  auto release = [&](ByteSpan range) {
    for (const auto& f : in) {
      ByteSpan all = f->bytes();
      if (range.data() >= all.data() && range.data() + range.size() <= all.data() + all.size()) f->ReleasePages(range);
    }
  };
  OPTSTATE_ASSIGN_OR_RETURN(report.write,
                            WriteNewCheckpointFromPieces(out, out.graph.root, output, source, o.write, release));
  return report;
}

UnshardedRankSet::~UnshardedRankSet() = default;

StatusOr<std::unique_ptr<UnshardedRankSet>> UnshardedRankSet::Create(const std::vector<std::string>& files,
                                                                     const std::string& near,
                                                                     const UnshardOptions& options) {
  std::unique_ptr<UnshardedRankSet> set(new UnshardedRankSet);
  std::string base = near;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  OPTSTATE_ASSIGN_OR_RETURN(set->scratch_, StagingDirectory::Create(base + ".unsharded", false));
  UnshardOptions o = options;
  o.write.durability = Durability::kUnsynced;  // scratch, removed when done
  std::string path = set->scratch_->path() + "/unsharded.pt";
  OPTSTATE_ASSIGN_OR_RETURN(set->report_, UnshardRankFiles(files, path, o));
  OPTSTATE_ASSIGN_OR_RETURN(set->file_, OpenCheckpoint(path, options.read));
  return set;
}

}  // namespace optstate
