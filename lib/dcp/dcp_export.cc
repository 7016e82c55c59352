#include "optstate/dcp.h"

#include <cstring>

#include "optstate/checkpoint_writer.h"
#include "pickle/graph_walk.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

// ---- torch.save file -> flat entries -------------------------------------

// Rows [begin, end) of a contiguous tensor (rows of `row` bytes) as one piece
// of its storage's zip record, with the record's CRC when the rows are all of
// it; empty when the tensor is laid out otherwise or the file is decompressed
// in memory.
StatusOr<std::vector<RecordPiece>> StoragePieces(const CheckpointFile& file, const TensorRef& t, uint64_t row,
                                                 int64_t begin, int64_t end) {
  std::vector<RecordPiece> pieces;
  const Checkpoint& cp = file.checkpoint();
  OPTSTATE_ASSIGN_OR_RETURN(std::optional<ByteSpan> in_place, TensorBytesInPlace(file.bytes(), cp, t));
  if (!in_place) return pieces;
  uint64_t skip = static_cast<uint64_t>(begin) * row, length = static_cast<uint64_t>(end - begin) * row;
  RecordPiece p;
  p.data = in_place->subspan(skip, length);
  p.source = file.FileRangeOf(p.data);
  if (!p.source) return pieces;
  const StorageRef& s = cp.storages[t.storage];
  if (t.storage_offset == 0 && skip == 0 && length == s.nbytes) p.crc = StorageRecordCrc(cp, s);
  pieces.push_back(p);
  return pieces;
}

class Flattener {
 public:
  Flattener(const CheckpointFile& file, std::vector<DcpOutEntry>& out)
      : file_(file), cp_(file.checkpoint()), g_(cp_.graph), out_(out) {}

  Status Root() {
    NodeId root = g_.root;
    if (g_.at(root).kind != NodeKind::kDict) {
      return InvalidArgumentError("the checkpoint's root is a " + TypeName(g_, root) +
                                  "; DCP saves a dict (a state dict)");
    }
    return Visit(root, {}, 0);
  }

 private:
  bool IsContainer(NodeId id) const {
    NodeKind k = g_.at(id).kind;
    return k == NodeKind::kDict || k == NodeKind::kList;
  }
  // torch's _is_terminal: a list holding a tensor, a dict, or a non-terminal list is descended.
  bool Terminal(NodeId id, uint32_t depth) const {
    const Node& n = g_.at(id);
    if (n.kind == NodeKind::kDict) return false;
    if (n.kind != NodeKind::kList || depth > 200) return true;
    for (NodeId item : n.items) {
      if (IsContainer(item) && !Terminal(item, depth + 1)) return false;
      if (g_.at(item).kind == NodeKind::kTensor) return false;
    }
    return true;
  }

  Status Visit(NodeId id, std::vector<DcpPathPart> path, uint32_t depth) {
    if (depth > 200) return UnsupportedError(DcpPathText(path) + ": nested deeper than 200 levels");
    const Node& n = g_.at(id);
    if (n.kind == NodeKind::kDict) {
      for (auto [k, v] : std::vector<std::pair<NodeId, NodeId>>(n.entries)) {
        std::vector<DcpPathPart> child = path;
        child.push_back(DcpPathPart{false, KeyText(g_, k), 0});
        OPTSTATE_RETURN_IF_ERROR(Visit(v, std::move(child), depth + 1));
      }
      return Status();
    }
    if (!Terminal(id, 0)) {
      for (size_t i = 0; i < n.items.size(); ++i) {
        std::vector<DcpPathPart> child = path;
        child.push_back(DcpPathPart{true, "", static_cast<int64_t>(i)});
        OPTSTATE_RETURN_IF_ERROR(Visit(n.items[i], std::move(child), depth + 1));
      }
      return Status();
    }
    return Leaf(id, std::move(path));
  }

  Status Leaf(NodeId id, std::vector<DcpPathPart> path) {
    DcpOutEntry e;
    for (const DcpPathPart& p : path) {
      if (!e.fqn.empty()) e.fqn += '.';
      e.fqn += p.is_index ? std::to_string(p.index) : p.key;
    }
    e.path = std::move(path);
    const Node& n = g_.at(id);
    if (n.kind == NodeKind::kTensor) {
      const TensorRef& t = cp_.tensors[n.tensor];
      if (t.is_dtensor) return UnsupportedError("'" + e.fqn + "' is a DTensor (one rank's shard); export whole tensors");
      if (t.storage < 0) return UnsupportedError("'" + e.fqn + "' is a meta tensor without data");
      e.is_tensor = true;
      e.dtype = t.dtype;
      e.size = t.sizes;
      const CheckpointFile& file = file_;
      const uint64_t row = e.RowBytes();
      e.rows = [&file, t, row](int64_t begin, int64_t end, std::byte* out) -> Status {
        uint64_t skip = static_cast<uint64_t>(begin) * row, length = static_cast<uint64_t>(end - begin) * row;
        OPTSTATE_ASSIGN_OR_RETURN(std::optional<ByteSpan> in_place,
                                  TensorBytesInPlace(file.bytes(), file.checkpoint(), t));
        if (in_place) {
          ByteSpan rows = in_place->subspan(skip, length);
          std::memcpy(out, rows.data(), length);
          file.ReleasePages(rows);
          return Status();
        }
        OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::byte> whole, ReadTensorBytes(file.bytes(), file.checkpoint(), t));
        std::memcpy(out, whole.data() + skip, length);
        return Status();
      };
      e.pieces = [&file, t, row](int64_t begin, int64_t end) { return StoragePieces(file, t, row, begin, end); };
      e.release = [&file](ByteSpan range) { file.ReleasePages(range); };
    } else {
      auto item = std::make_shared<Checkpoint>();
      GraphBuilder b(*item);
      StatusOr<NodeId> root = b.Import(g_, id);
      if (!root.ok()) return std::move(root).status().WithContext("'" + e.fqn + "'");
      NodeId r = *root;
      e.write_item = [item, r](OutputStream& out) -> Status {
        auto none = [](size_t) -> StatusOr<ByteSpan> { return InternalError("a bytes item has no storages"); };
        return WriteEmbeddedCheckpoint(*item, r, out, none).status();
      };
    }
    out_.push_back(std::move(e));
    return Status();
  }

  const CheckpointFile& file_;
  const Checkpoint& cp_;
  const ObjectGraph& g_;
  std::vector<DcpOutEntry>& out_;
};

}  // namespace

StatusOr<DcpWriteReport> ReshardDcp(const DcpCheckpoint& input, const std::string& dir,
                                    const DcpWriteOptions& options, const ReadOptions& read,
                                    Coordinator* coordinator) {
  std::vector<DcpOutEntry> entries;
  for (const DcpEntry& in : input.metadata().entries) {
    DcpOutEntry e;
    static_cast<DcpEntry&>(e) = in;  // key, path, kind, dtype, size (chunks are rewritten)
    const DcpEntry* src = &in;
    if (in.is_tensor) {
      e.rows = [&input, src, &read](int64_t begin, int64_t end, std::byte* out) {
        return input.CopyRows(*src, begin, end, out, read);
      };
      e.pieces = [&input, src, &read](int64_t begin, int64_t end) { return input.RowPieces(*src, begin, end, read); };
      e.release = [&input](ByteSpan range) { input.ReleasePages(range); };
    } else {
      e.write_item = [&input, src](OutputStream& out) { return out.Write(input.ItemBytes(src->bytes_where)); };
    }
    entries.push_back(std::move(e));
  }
  return WriteDcp(entries, dir, options, coordinator);
}

StatusOr<DcpWriteReport> ExportToDcp(const CheckpointFile& input, const std::string& dir,
                                     const DcpWriteOptions& options, Coordinator* coordinator) {
  std::vector<DcpOutEntry> entries;
  Flattener f(input, entries);
  OPTSTATE_RETURN_IF_ERROR_CTX(f.Root(), input.path());
  return WriteDcp(entries, dir, options, coordinator);
}

}  // namespace optstate
