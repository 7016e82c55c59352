#include "optstate/dcp_export.h"

#include <algorithm>
#include <cstring>

#include "box_copy.h"
#include "optstate/checkpoint_writer.h"
#include "optstate/graph_builder.h"
#include "optstate/graph_walk.h"

namespace optstate {
namespace {

// The box of rows [begin, end) of a tensor of shape `size` (the whole 0-d tensor).
Box RowsBox(const std::vector<int64_t>& size, int64_t begin, int64_t end) {
  Box b{std::vector<int64_t>(size.size(), 0), size};
  if (!size.empty()) {
    b.offsets[0] = begin;
    b.sizes[0] = end - begin;
  }
  return b;
}

// Rows [begin, end) of a tensor whose chunks hold whole rows, as parts of the
// chunks' own records (see DcpCheckpoint::ChunkPiece); empty when the layout
// does not allow it, and the rows go through memory instead.
StatusOr<std::vector<RecordPiece>> RowPieces(const DcpCheckpoint& input, const DcpEntry& e, int64_t begin,
                                             int64_t end, const ReadOptions& read) {
  std::vector<RecordPiece> pieces;
  if (e.size.empty()) {  // a 0-d value: its one chunk, whole
    OPTSTATE_ASSIGN_OR_RETURN(std::optional<RecordPiece> whole, input.ChunkPiece(e, e.chunks.at(0), read));
    if (whole) pieces.push_back(*whole);
    return pieces;
  }
  if (!e.HoldsWholeRows()) return pieces;
  uint64_t row = GetDTypeInfo(e.dtype).element_size;
  for (size_t d = 1; d < e.size.size(); ++d) row *= static_cast<uint64_t>(e.size[d]);
  std::vector<const DcpChunk*> order;
  for (const DcpChunk& c : e.chunks) {
    if (c.sizes[0] > 0 && c.offsets[0] < end && c.offsets[0] + c.sizes[0] > begin) order.push_back(&c);
  }
  std::sort(order.begin(), order.end(), [](const DcpChunk* a, const DcpChunk* b) { return a->offsets[0] < b->offsets[0]; });
  for (const DcpChunk* c : order) {
    OPTSTATE_ASSIGN_OR_RETURN(std::optional<RecordPiece> whole, input.ChunkPiece(e, *c, read));
    if (!whole) return std::vector<RecordPiece>();
    int64_t from = std::max(begin, c->offsets[0]), to = std::min(end, c->offsets[0] + c->sizes[0]);
    uint64_t skip = static_cast<uint64_t>(from - c->offsets[0]) * row;
    uint64_t length = static_cast<uint64_t>(to - from) * row;
    RecordPiece p = *whole;
    if (skip != 0 || length != p.data.size()) {  // part of the record: its CRC is not known
      p.data = p.data.subspan(skip, length);
      p.crc.reset();
      p.source->offset += skip;
    }
    pieces.push_back(p);
  }
  return pieces;
}

// ---- torch.save file -> flat entries -------------------------------------

// Rows [begin, end) of a contiguous tensor as one piece of its storage's zip
// record (with the record's CRC when the rows are all of it); empty when the
// tensor is laid out otherwise or the file is decompressed in memory.
StatusOr<std::vector<RecordPiece>> StoragePieces(const CheckpointFile& file, const Checkpoint& cp, const TensorRef& t,
                                                 int64_t begin, int64_t end) {
  std::vector<RecordPiece> pieces;
  if (t.strides != ContiguousStrides(t.sizes) && t.numel() > 1) return pieces;
  uint64_t elem = GetDTypeInfo(t.dtype).element_size, row = elem;
  for (size_t d = 1; d < t.sizes.size(); ++d) row *= static_cast<uint64_t>(t.sizes[d]);
  const StorageRef& s = cp.storages[t.storage];
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan storage, StorageBytes(file.bytes(), cp, s));
  uint64_t at = t.storage_offset * elem + static_cast<uint64_t>(begin) * row;
  uint64_t length = static_cast<uint64_t>(end - begin) * row;
  if (at > storage.size() || length > storage.size() - at) return CorruptError("the tensor reaches past its storage");
  RecordPiece p;
  p.data = storage.subspan(at, length);
  p.source = file.FileRangeOf(p.data);
  if (!p.source) return pieces;
  if (at == 0 && length == storage.size() && s.zip_entry >= 0) {
    const ZipEntry& z = cp.container.zip.entries[static_cast<size_t>(s.zip_entry)];
    if (z.method == 0 && z.size == length) p.crc = z.crc32;
  }
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
      const Checkpoint& cp = cp_;
      e.rows = [&file, &cp, t](int64_t begin, int64_t end, std::byte* out) -> Status {
        uint64_t elem = GetDTypeInfo(t.dtype).element_size;
        uint64_t row = elem;
        for (size_t d = 1; d < t.sizes.size(); ++d) row *= static_cast<uint64_t>(t.sizes[d]);
        if (t.strides == ContiguousStrides(t.sizes)) {
          OPTSTATE_ASSIGN_OR_RETURN(ByteSpan storage, StorageBytes(file.bytes(), cp, cp.storages[t.storage]));
          uint64_t at = t.storage_offset * elem + static_cast<uint64_t>(begin) * row;
          uint64_t length = static_cast<uint64_t>(end - begin) * row;
          if (at > storage.size() || length > storage.size() - at) return CorruptError("the tensor reaches past its storage");
          std::memcpy(out, storage.data() + at, length);
          file.ReleasePages(storage.subspan(at, length));
          return Status();
        }
        OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::byte> whole, ReadTensorBytes(file.bytes(), cp, t));
        std::memcpy(out, whole.data() + static_cast<uint64_t>(begin) * row, static_cast<uint64_t>(end - begin) * row);
        return Status();
      };
      e.pieces = [&file, &cp, t](int64_t begin, int64_t end) { return StoragePieces(file, cp, t, begin, end); };
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
      e.rows = [&input, src, &read](int64_t begin, int64_t end, std::byte* out) -> Status {
        Box want = RowsBox(src->size, begin, end);
        size_t elem = GetDTypeInfo(src->dtype).element_size;
        std::vector<std::byte> scratch;
        for (const DcpChunk& c : src->chunks) {
          if (!src->size.empty() && (c.offsets[0] >= end || c.offsets[0] + c.sizes[0] <= begin)) continue;
          OPTSTATE_ASSIGN_OR_RETURN(ByteSpan data, input.ChunkBytes(*src, c, scratch, read));
          CopyIntersection(Box{c.offsets, c.sizes}, data.data(), want, out, elem);
          input.ReleasePages(data);  // keeps resident memory at one chunk, whatever the checkpoint's size
        }
        return Status();
      };
      e.pieces = [&input, src, &read](int64_t begin, int64_t end) { return RowPieces(input, *src, begin, end, read); };
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
