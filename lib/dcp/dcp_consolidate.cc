#include "optstate/dcp.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "dcp/flattened_optimizer.h"
#include "io/staging_directory.h"
#include "optstate/params.h"
#include "pickle/graph_walk.h"
#include "torch/checkpoint_share.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

// Rebuilds the nesting that planner_data records, as torch's
// unflatten_state_dict does: a str part is a dict key, an int part a list
// index (lists grow with None up to it).
class NestedBuilder {
 public:
  NestedBuilder(GraphBuilder& b, ObjectGraph& g, size_t max_index) : b_(b), g_(g), max_index_(max_index) {
    root_ = b_.Dict();
    keys_[root_];
  }
  NodeId root() const { return root_; }

  Status Place(const DcpEntry& e, NodeId leaf) {
    if (e.path.front().is_index) return CorruptError("'" + e.fqn + "': its path starts with a list index");
    NodeId node = root_;
    for (size_t i = 0; i < e.path.size(); ++i) {
      const DcpPathPart& part = e.path[i];
      if (part.is_index != (g_.at(node).kind == NodeKind::kList)) {
        return CorruptError("'" + e.fqn + "': its path " + DcpPathText(e.path) + " mixes list indices and keys");
      }
      bool last = i + 1 == e.path.size();
      NodeId child = Lookup(node, part);
      bool free = child == kNoNode || fillers_.count(child);
      if (last) {
        if (!free) return CorruptError("'" + e.fqn + "': another entry already sits at " + DcpPathText(e.path));
        return Assign(node, part, leaf, e);
      }
      if (free) {
        bool list = e.path[i + 1].is_index;
        child = list ? b_.List({}) : b_.Dict();
        if (list) lists_.insert(child); else keys_[child];
        OPTSTATE_RETURN_IF_ERROR(Assign(node, part, child, e));
      } else if (!keys_.count(child) && !lists_.count(child)) {
        return CorruptError("'" + e.fqn + "': its path " + DcpPathText(e.path) +
                            " runs through a value another entry stored");
      }
      node = child;
    }
    return Status();
  }

 private:
  NodeId Lookup(NodeId node, const DcpPathPart& part) {
    if (part.is_index) {
      const auto& items = g_.at(node).items;
      return part.index < static_cast<int64_t>(items.size()) ? items[part.index] : kNoNode;
    }
    auto& keys = keys_[node];
    auto it = keys.find(part.key);
    return it == keys.end() ? kNoNode : it->second;
  }

  Status Assign(NodeId node, const DcpPathPart& part, NodeId value, const DcpEntry& e) {
    if (!part.is_index) {
      NodeId key = b_.Str(part.key);  // before touching g_.at(node): New() may move the arena
      g_.at(node).entries.emplace_back(key, value);
      keys_[node].emplace(part.key, value);
      return Status();
    }
    if (part.index > static_cast<int64_t>(max_index_)) {
      return CorruptError("'" + e.fqn + "': list index " + std::to_string(part.index) +
                          " is beyond the number of entries in the checkpoint");
    }
    while (static_cast<int64_t>(g_.at(node).items.size()) <= part.index) {
      NodeId none = b_.New(NodeKind::kNone);
      fillers_.insert(none);
      g_.at(node).items.push_back(none);
    }
    g_.at(node).items[part.index] = value;
    return Status();
  }

  GraphBuilder& b_;
  ObjectGraph& g_;
  size_t max_index_;
  NodeId root_;
  std::unordered_map<NodeId, std::unordered_map<std::string, NodeId>> keys_;  // dicts made here, by key
  std::unordered_set<NodeId> lists_;    // lists made here
  std::unordered_set<NodeId> fillers_;  // the Nones a list grew with
};

// {"state": {fqn: ...}, "param_groups": [{"params": [fqn, ...]}]} -> int keys.
void RekeyToIndices(Checkpoint& cp, GraphBuilder& b, ConsolidateReport& report) {
  ObjectGraph& g = cp.graph;
  for (const std::string& path : FindOptimizerStates(cp)) {
    std::optional<NodeId> opt = FindPath(g, g.root, path);
    if (!opt) continue;
    NodeId state = DictLookup(g, *opt, "state");
    NodeId groups = DictLookup(g, *opt, "param_groups");
    std::unordered_map<std::string, int64_t> index;
    for (NodeId group : std::vector<NodeId>(g.at(groups).items)) {
      NodeId params = DictLookup(g, group, "params");
      if (params == kNoNode || g.at(params).kind != NodeKind::kList) continue;
      // By position, re-reading the node each time: b.Int() may move the arena.
      for (size_t k = 0; k < g.at(params).items.size(); ++k) {
        NodeId p = g.at(params).items[k];
        if (g.at(p).kind != NodeKind::kStr) continue;
        auto [it, added] = index.emplace(g.at(p).text, static_cast<int64_t>(index.size()));
        NodeId replacement = b.Int(it->second);
        g.at(params).items[k] = replacement;
      }
    }
    for (size_t i = 0; i < g.at(state).entries.size(); ++i) {
      NodeId key = g.at(state).entries[i].first;
      if (g.at(key).kind != NodeKind::kStr) continue;
      auto it = index.find(g.at(key).text);
      if (it == index.end()) {
        report.unlisted_state.push_back((path.empty() ? "" : path + "/") + "state/" + g.at(key).text);
        continue;
      }
      NodeId replacement = b.Int(it->second);
      g.at(state).entries[i].first = replacement;
    }
    ++report.optimizer_states;
  }
}

Status AssembleTensor(const DcpCheckpoint& dcp, const DcpEntry& e, const ReadOptions& read,
                      std::vector<std::byte>& whole) {
  whole.assign(e.numel() * GetDTypeInfo(e.dtype).element_size, std::byte{0});
  return dcp.CopyRows(e, 0, e.size.empty() ? 1 : e.size[0], whole.data(), read);
}

}  // namespace

StatusOr<DcpGraph> BuildDcpGraph(const DcpCheckpoint& dcp, ConsolidateKeys keys, const ReadOptions& read) {
  DcpGraph out;
  Checkpoint& cp = out.checkpoint;
  ConsolidateReport& report = out.counts;
  GraphBuilder b(cp);
  const DcpMetadata& md = dcp.metadata();
  NestedBuilder tree(b, cp.graph, md.entries.size());
  for (const DcpEntry& e : md.entries) {
    NodeId leaf;
    if (e.is_tensor) {
      leaf = b.Tensor(e.dtype, e.size);
      out.storage_entry.push_back(&e);
      uint64_t bytes = e.numel() * GetDTypeInfo(e.dtype).element_size;
      report.tensor_bytes += bytes;
      report.tensors += 1;
      report.chunks += e.chunks.size();
      report.largest_tensor_bytes = std::max(report.largest_tensor_bytes, e.chunks.size() > 1 ? bytes : 0);
    } else {
      OPTSTATE_ASSIGN_OR_RETURN(Checkpoint item, dcp.ParseItem(e.bytes_where, read));
      for (Finding f : item.findings) {
        f.where = DcpLocationText(e.bytes_where) + " (bytes item '" + e.fqn + "') " + f.where;
        cp.findings.push_back(std::move(f));
      }
      StatusOr<NodeId> imported = b.Import(item.graph, item.graph.root);
      if (!imported.ok()) {
        return std::move(imported).status().WithContext(dcp.dir() + "/" + e.bytes_where.relative_path +
                                                        ": bytes item '" + e.fqn + "'");
      }
      leaf = *imported;
      report.bytes_items += 1;
    }
    OPTSTATE_RETURN_IF_ERROR_CTX(tree.Place(e, leaf), dcp.dir() + "/.metadata");
  }
  cp.graph.root = tree.root();
  report.unflattened = UnflattenOptimizers(cp, b);
  if (keys == ConsolidateKeys::kIndex) RekeyToIndices(cp, b, report);
  return out;
}

StatusOr<std::vector<std::byte>> ReadDcpTensor(const DcpCheckpoint& dcp, const DcpGraph& graph, const TensorRef& t,
                                               const ReadOptions& read) {
  if (t.storage < 0 || static_cast<size_t>(t.storage) >= graph.storage_entry.size()) {
    return InvalidArgumentError("not a tensor of this DCP checkpoint");
  }
  std::vector<std::byte> whole;
  OPTSTATE_RETURN_IF_ERROR(AssembleTensor(dcp, *graph.storage_entry[t.storage], read, whole));
  return whole;
}

StatusOr<ConsolidateReport> ConsolidateDcp(const DcpCheckpoint& dcp, const std::string& output,
                                           const ConsolidateOptions& options) {
  OPTSTATE_ASSIGN_OR_RETURN(DcpGraph graph, BuildDcpGraph(dcp, options.keys, options.read));
  for (const Finding& f : graph.checkpoint.findings) {
    if (f.severity == Severity::kError) {
      return UnsupportedError(dcp.dir() + "/" + f.where + ": " + f.message + " Refused; nothing was written.");
    }
  }
  ConsolidateReport report = graph.counts;
  report.largest_tensor_bytes = 0;
  std::vector<std::byte> whole;
  // With several processes, each counts its own share (told before it writes).
  uint64_t done = 0, total = report.tensor_bytes;
  auto source = [&](size_t storage) -> StatusOr<std::vector<RecordPiece>> {
    const DcpEntry& e = *graph.storage_entry[storage];
    // Chunks holding whole rows follow each other in the output: each is a
    // piece the kernel copies, under the CRC its item already records.
    OPTSTATE_ASSIGN_OR_RETURN(std::vector<RecordPiece> pieces,
                              dcp.RowPieces(e, 0, e.size.empty() ? 1 : e.size[0], options.read));
    if (pieces.empty()) {  // other layouts: assembled in memory
      OPTSTATE_RETURN_IF_ERROR(AssembleTensor(dcp, e, options.read, whole));
      report.largest_tensor_bytes = std::max<uint64_t>(report.largest_tensor_bytes, whole.size());
      pieces.push_back(RecordPiece{ByteSpan(whole.data(), whole.size()), std::nullopt, std::nullopt});
    }
    for (const RecordPiece& p : pieces) done += p.data.size();
    if (options.progress) options.progress(done, total);
    return pieces;
  };
  auto release = [&dcp](ByteSpan range) { dcp.ReleasePages(range); };
  const Checkpoint& cp = graph.checkpoint;
  if (options.coordinator && options.coordinator->size() > 1) {
    OPTSTATE_ASSIGN_OR_RETURN(report.write, WriteCheckpointTogether(cp, cp.graph.root, output, options.write, source,
                                                                    release, *options.coordinator, report.unconfirmed,
                                                                    [&total](uint64_t share) { total = share; }));
    return report;
  }
  OPTSTATE_RETURN_IF_ERROR(StagingDirectory::RefuseIfBusy(output));
  OPTSTATE_ASSIGN_OR_RETURN(report.write,
                            WriteNewCheckpointFromPieces(cp, cp.graph.root, output, source, options.write, release));
  return report;
}

StatusOr<ConsolidatedDcp> ConsolidateDcpToScratch(const std::string& dcp_dir, const std::string& scratch_parent,
                                                  const ConsolidateOptions& options) {
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<DcpCheckpoint> dcp, OpenDcpCheckpoint(dcp_dir));
  ConsolidatedDcp out;
  OPTSTATE_ASSIGN_OR_RETURN(out.file, ScratchFile::Create(scratch_parent + "/optstate-consolidated", "consolidated.pt"));
  ConsolidateOptions o = options;
  o.keys = ConsolidateKeys::kFqn;
  o.write.durability = Durability::kUnsynced;  // scratch, removed when done
  OPTSTATE_ASSIGN_OR_RETURN(out.report, ConsolidateDcp(*dcp, out.file.path, o));
  return out;
}

}  // namespace optstate
