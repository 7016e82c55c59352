#include "optstate/unshard.h"

#include <map>
#include <memory>
#include <set>

#include "dcp/box_copy.h"
#include "optstate/rank_set.h"
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
    std::string name = key.kind == NodeKind::kStr ? key.text : ValueText(cp.graph, k, 200);
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

// One DTensor made whole: which ranks' shards, in order, along which dim.
struct WholeTensor {
  std::string path;
  int64_t dim = kReplicated;              // or the Shard dim
  std::vector<const TensorRef*> shards;   // per rank
  TensorRef whole;
};

}  // namespace

StatusOr<UnshardReport> UnshardRankFiles(const std::vector<std::string>& given, const std::string& output,
                                         const UnshardOptions& o) {
  UnshardReport report;
  if (given.size() < 2) return InvalidArgumentError("unshard needs the files of at least two ranks");
  OPTSTATE_ASSIGN_OR_RETURN(report.files, OrderByRank(given));
  std::vector<std::unique_ptr<CheckpointFile>> in;
  std::vector<TensorsByPath> found(report.files.size());
  for (size_t r = 0; r < report.files.size(); ++r) {
    OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointFile> f, OpenCheckpoint(report.files[r], o.read));
    std::set<NodeId> seen;
    FindTensors(f->checkpoint(), f->checkpoint().graph.root, "", seen, found[r]);
    in.push_back(std::move(f));
  }
  const size_t ranks = in.size();
  std::vector<std::map<std::string, NodeId>> dtensors;
  for (const TensorsByPath& t : found) dtensors.push_back(t.dtensors);
  if (dtensors[0].empty()) {
    return InvalidArgumentError(report.files[0] + ": holds no DTensor: nothing to unshard (for `.to_local()` "
                                "copies the placements are gone)");
  }
  std::vector<WholeTensor> wholes;
  for (auto& [path, node0] : dtensors[0]) {
    const Checkpoint& cp0 = in[0]->checkpoint();
    WholeTensor w;
    w.path = path;
    const TensorRef& t0 = cp0.tensors[cp0.graph.at(node0).tensor];
    if (t0.placements.size() != 1) {
      return UnsupportedError(Where(0, report.files[0], path) + ": a DTensor on a " +
                              std::to_string(t0.placements.size()) +
                              "-D mesh; only 1-D meshes (FSDP2 alone, or TP alone) are unsharded");
    }
    if (!t0.mesh_shape.empty() && t0.mesh_shape[0] != static_cast<int64_t>(ranks)) {
      return InvalidArgumentError(Where(0, report.files[0], path) + ": its mesh has " +
                                  std::to_string(t0.mesh_shape[0]) + " ranks but " + std::to_string(ranks) +
                                  " files were given");
    }
    w.dim = ShardDim(t0.placements[0]);
    if (w.dim == kOtherPlacement) {
      return UnsupportedError(Where(0, report.files[0], path) + ": placement " + t0.placements[0] +
                              " cannot be made whole from the shards alone");
    }
    if (w.dim >= static_cast<int64_t>(t0.global_sizes.size())) {
      return InvalidArgumentError(Where(0, report.files[0], path) + ": placed " + t0.placements[0] + " but has " +
                                  std::to_string(t0.global_sizes.size()) + " dims");
    }
    int64_t slices = 0;
    for (size_t r = 0; r < ranks; ++r) {
      auto it = dtensors[r].find(path);
      if (it == dtensors[r].end()) {
        return InvalidArgumentError(Where(r, report.files[r], path) + ": no DTensor here, rank 0 has one");
      }
      const Checkpoint& cp = in[r]->checkpoint();
      const TensorRef& t = cp.tensors[cp.graph.at(it->second).tensor];
      if (t.global_sizes != t0.global_sizes || t.dtype != t0.dtype || t.placements != t0.placements) {
        return InvalidArgumentError(Where(r, report.files[r], path) + ": " + ShapeText(t.global_sizes) + " " +
                                    t.placements[0] + ", rank 0 has " + ShapeText(t0.global_sizes) + " " +
                                    t0.placements[0] + (t.dtype != t0.dtype ? " (and another dtype)" : ""));
      }
      for (size_t d = 0; d < t.sizes.size(); ++d) {
        if (static_cast<int64_t>(d) != w.dim && (t.sizes.size() != t0.global_sizes.size() ||
                                                 t.sizes[d] != t0.global_sizes[d])) {
          return InvalidArgumentError(Where(r, report.files[r], path) + ": shard " + ShapeText(t.sizes) +
                                      " does not fit " + ShapeText(t0.global_sizes) + " placed " + t0.placements[0]);
        }
      }
      if (w.dim >= 0) slices += t.sizes[static_cast<size_t>(w.dim)];
      w.shards.push_back(&t);
    }
    if (w.dim >= 0 && slices != t0.global_sizes[static_cast<size_t>(w.dim)]) {
      return InvalidArgumentError(report.files[0] + ": " + path + " " + ShapeText(t0.global_sizes) + ": the " +
                                  std::to_string(ranks) + " ranks' shards hold " + std::to_string(slices) + " of " +
                                  std::to_string(t0.global_sizes[static_cast<size_t>(w.dim)]) + " slices along dim " +
                                  std::to_string(w.dim) + ": a rank's file is missing, repeated, or from another save");
    }
    wholes.push_back(std::move(w));
  }
  for (size_t r = 1; r < ranks; ++r) {
    if (dtensors[r].size() != dtensors[0].size()) {
      return InvalidArgumentError(report.files[r] + " (rank " + std::to_string(r) + "): " +
                                  std::to_string(dtensors[r].size()) + " DTensors, rank 0 has " +
                                  std::to_string(dtensors[0].size()));
    }
  }

  for (auto& [path, node] : found[0].plain) {
    OPTSTATE_ASSIGN_OR_RETURN(bool same, SameOnEveryRank(in, found, path));
    if (!same) report.rank_local.push_back(path);
  }

  // Rank 0's graph with each DTensor node turned, in place, into a plain tensor
  // with a storage of its own after rank 0's.
  Checkpoint out = in[0]->checkpoint();
  const size_t kept_storages = out.storages.size();
  GraphBuilder b(out);
  std::vector<size_t> whole_of_storage;  // storage index - kept_storages -> wholes index
  size_t i = 0;
  for (auto& [path, node0] : dtensors[0]) {
    const TensorRef t0 = out.tensors[out.graph.at(node0).tensor];  // a copy: Tensor() grows the array
    NodeId fresh = b.Tensor(t0.dtype, t0.global_sizes);
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
    if (w.dim <= 0) {  // Replicate: rank 0's; Shard(0): the shards one after the other
      size_t last = w.dim < 0 ? 1 : w.shards.size();
      copies.reserve(last);
      for (size_t r = 0; r < last; ++r) {
        OPTSTATE_ASSIGN_OR_RETURN(ByteSpan span, shard_bytes(r));
        if (!span.empty()) pieces.push_back(RecordPiece{span, std::nullopt, std::nullopt});
      }
    } else {  // Shard(d > 0): put together in memory
      assembled.assign(w.whole.nbytes(), std::byte{0});
      size_t elem = GetDTypeInfo(w.whole.dtype).element_size;
      Box dst{std::vector<int64_t>(w.whole.sizes.size(), 0), w.whole.sizes};
      int64_t offset = 0;
      copies.reserve(w.shards.size());
      for (size_t r = 0; r < w.shards.size(); ++r) {
        OPTSTATE_ASSIGN_OR_RETURN(ByteSpan span, shard_bytes(r));
        Box src{std::vector<int64_t>(w.whole.sizes.size(), 0), w.shards[r]->sizes};
        src.offsets[static_cast<size_t>(w.dim)] = offset;
        offset += w.shards[r]->sizes[static_cast<size_t>(w.dim)];
        CopyIntersection(src, span.data(), dst, assembled.data(), elem);
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

}  // namespace optstate
