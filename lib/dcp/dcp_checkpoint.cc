#include "optstate/dcp.h"

#include <sys/stat.h>

#include <algorithm>

#include "dcp/box_copy.h"
#include "io/byte_cursor.h"
#include "torch/container.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

std::string ChunkText(const DcpEntry& e, const DcpChunk& c) {
  return "'" + e.fqn + "' chunk at offsets " + ShapeText(c.offsets);
}

}  // namespace

std::string DcpLocationText(const DcpLocation& where) {
  return where.relative_path + " bytes " + std::to_string(where.offset) + ".." +
         std::to_string(where.offset + where.length);
}

bool IsDcpDirectory(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return stat((path + "/.metadata").c_str(), &st) == 0;
}

ByteSpan DcpCheckpoint::ItemBytes(const DcpLocation& where) const {
  return FileOf(where).bytes().subspan(where.offset, where.length);
}

FileRange DcpCheckpoint::ItemFileRange(const DcpLocation& where) const {
  return FileRange{FileOf(where).fd(), where.offset};
}

void DcpCheckpoint::ReleasePages(ByteSpan range) const {
  for (const auto& [name, file] : mapped_) {
    ByteSpan all = file->bytes();
    if (!all.empty() && range.data() >= all.data() && range.data() + range.size() <= all.data() + all.size()) {
      std::unique_ptr<ReleaseInBatches<MappedFile>>& batch = released_[file.get()];
      if (!batch) batch = std::make_unique<ReleaseInBatches<MappedFile>>(*file);
      batch->Add(range);
      return;
    }
  }
}

StatusOr<Checkpoint> DcpCheckpoint::ParseItem(const DcpLocation& where, const ReadOptions& options) const {
  ByteCursor item(ItemBytes(where), where.offset);
  StatusOr<Checkpoint> cp = ParseCheckpoint(item, options);
  if (!cp.ok()) return std::move(cp).status().WithContext(dir_ + "/" + where.relative_path);
  return cp;
}

StatusOr<Checkpoint> DcpCheckpoint::ParseChunk(const DcpEntry& e, const DcpChunk& c, const ReadOptions& options,
                                               std::string& context) const {
  context = dir_ + "/" + c.where.relative_path + ": " + ChunkText(e, c) + " (bytes " + std::to_string(c.where.offset) +
            ".." + std::to_string(c.where.offset + c.where.length) + ")";
  OPTSTATE_ASSIGN_OR_RETURN(Checkpoint cp, ParseItem(c.where, options));
  const Node& root = cp.graph.at(cp.graph.root);
  if (root.kind != NodeKind::kTensor) {
    return CorruptError(context + ": the item holds a " + TypeName(cp.graph, cp.graph.root) + ", not a tensor");
  }
  const TensorRef& t = cp.tensors[root.tensor];
  if (t.dtype != e.dtype) {
    return CorruptError(context + ": the item is " + std::string(GetDTypeInfo(t.dtype).name) + ", .metadata says " +
                        std::string(GetDTypeInfo(e.dtype).name));
  }
  if (t.sizes != c.sizes) {
    return CorruptError(context + ": the item's shape is " + ShapeText(t.sizes) + ", .metadata says " +
                        ShapeText(c.sizes));
  }
  if (t.storage < 0) return CorruptError(context + ": the item is a meta tensor without data");
  return cp;
}

StatusOr<ByteSpan> DcpCheckpoint::ChunkBytes(const DcpEntry& e, const DcpChunk& c, std::vector<std::byte>& scratch,
                                             const ReadOptions& options) const {
  std::string context;
  OPTSTATE_ASSIGN_OR_RETURN(Checkpoint cp, ParseChunk(e, c, options, context));
  const TensorRef& t = cp.tensors[cp.graph.at(cp.graph.root).tensor];
  ByteSpan item = ItemBytes(c.where);
  StatusOr<std::optional<ByteSpan>> in_place = TensorBytesInPlace(item, cp, t);
  if (!in_place.ok()) return std::move(in_place).status().WithContext(context);
  if (*in_place) return **in_place;
  StatusOr<std::vector<std::byte>> copy = ReadTensorBytes(item, cp, t);
  if (!copy.ok()) return std::move(copy).status().WithContext(context);
  scratch = std::move(*copy);
  return ByteSpan(scratch.data(), scratch.size());
}

StatusOr<std::optional<RecordPiece>> DcpCheckpoint::ChunkPiece(const DcpEntry& e, const DcpChunk& c,
                                                               const ReadOptions& options) const {
  std::string context;
  OPTSTATE_ASSIGN_OR_RETURN(Checkpoint cp, ParseChunk(e, c, options, context));
  const TensorRef& t = cp.tensors[cp.graph.at(cp.graph.root).tensor];
  const StorageRef& s = cp.storages[t.storage];
  // The chunk must be its storage's whole record, as DCP writes items.
  std::optional<uint32_t> crc = StorageRecordCrc(cp, s);
  if (!crc || t.storage_offset != 0 || t.nbytes() != s.nbytes) return std::optional<RecordPiece>();
  StatusOr<std::optional<ByteSpan>> data = TensorBytesInPlace(ItemBytes(c.where), cp, t);
  if (!data.ok()) return std::move(data).status().WithContext(context);
  if (!*data) return std::optional<RecordPiece>();
  const MappedFile& file = FileOf(c.where);
  // Parsing touched the item's zip headers; the data itself will be copied
  // by the kernel. Drop the pages so memory does not grow with the chunk count.
  ReleasePages(ItemBytes(c.where));
  RecordPiece piece;
  piece.data = **data;
  piece.crc = crc;
  piece.source = FileRange{file.fd(), static_cast<uint64_t>(piece.data.data() - file.bytes().data())};
  return std::optional<RecordPiece>(piece);
}

StatusOr<std::vector<RecordPiece>> DcpCheckpoint::RowPieces(const DcpEntry& e, int64_t begin, int64_t end,
                                                            const ReadOptions& options) const {
  std::vector<RecordPiece> pieces;
  if (e.size.empty()) {  // a 0-d value: its one chunk, whole
    OPTSTATE_ASSIGN_OR_RETURN(std::optional<RecordPiece> whole, ChunkPiece(e, e.chunks.at(0), options));
    if (whole) pieces.push_back(*whole);
    return pieces;
  }
  if (!e.HoldsWholeRows()) return pieces;
  const uint64_t row = e.RowBytes();
  std::vector<const DcpChunk*> order;
  for (const DcpChunk& c : e.chunks) {
    if (c.sizes[0] > 0 && c.offsets[0] < end && c.offsets[0] + c.sizes[0] > begin) order.push_back(&c);
  }
  std::sort(order.begin(), order.end(), [](const DcpChunk* a, const DcpChunk* b) { return a->offsets[0] < b->offsets[0]; });
  for (const DcpChunk* c : order) {
    OPTSTATE_ASSIGN_OR_RETURN(std::optional<RecordPiece> whole, ChunkPiece(e, *c, options));
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

Status DcpCheckpoint::CopyRows(const DcpEntry& e, int64_t begin, int64_t end, std::byte* out,
                               const ReadOptions& options) const {
  Box want{std::vector<int64_t>(e.size.size(), 0), e.size};
  if (!e.size.empty()) {
    want.offsets[0] = begin;
    want.sizes[0] = end - begin;
  }
  const size_t elem = GetDTypeInfo(e.dtype).element_size;
  std::vector<std::byte> scratch;
  for (const DcpChunk& c : e.chunks) {
    // Chunks outside the rows are passed over; empty ones are still read, so a
    // broken item is reported wherever it is.
    if (!e.size.empty() && c.numel() > 0 && (c.offsets[0] >= end || c.offsets[0] + c.sizes[0] <= begin)) continue;
    OPTSTATE_ASSIGN_OR_RETURN(ByteSpan data, ChunkBytes(e, c, scratch, options));
    CopyIntersection(Box{c.offsets, c.sizes}, data.data(), want, out, elem);
    ReleasePages(data);  // keeps resident memory at one chunk, whatever the checkpoint's size
  }
  return Status();
}

StatusOr<std::unique_ptr<DcpCheckpoint>> OpenDcpCheckpoint(const std::string& dir, const DcpMetadataLimits& limits) {
  auto out = std::unique_ptr<DcpCheckpoint>(new DcpCheckpoint());
  out->dir_ = dir;
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return InvalidArgumentError(dir + ": is a file; a DCP checkpoint is a directory holding .metadata and *.distcp");
  }
  std::string meta_path = dir + "/.metadata";
  StatusOr<MappedFile> meta = MappedFile::Open(meta_path);
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kNotFound) {
      return NotFoundError(dir + ": no .metadata file; not a DCP checkpoint directory, or its save did not finish");
    }
    return meta.status();
  }
  out->metadata_bytes_ = meta->size();
  StatusOr<DcpMetadata> parsed = ParseDcpMetadata(meta->bytes(), limits);
  if (!parsed.ok()) return std::move(parsed).status().WithContext(meta_path);
  out->metadata_ = std::move(*parsed);

  auto check = [&](const DcpLocation& where, const std::string& what) -> Status {
    auto it = out->mapped_.find(where.relative_path);
    if (it == out->mapped_.end()) {
      StatusOr<MappedFile> f = MappedFile::Open(dir + "/" + where.relative_path);
      if (!f.ok()) {
        return std::move(f).status().WithContext(meta_path + ": " + what + " is stored in '" + where.relative_path + "'");
      }
      it = out->mapped_.emplace(where.relative_path, std::make_unique<MappedFile>(std::move(*f))).first;
      out->files_.push_back(DcpDataFile{where.relative_path, it->second->size(), 0, 0});
    }
    uint64_t size = it->second->size();
    if (where.offset > size || where.length > size - where.offset) {
      return TruncatedError(meta_path + ": " + what + " is stored at " + DcpLocationText(where) + ", but " +
                            where.relative_path + " has only " + std::to_string(size) + " bytes");
    }
    for (DcpDataFile& f : out->files_) {
      if (f.name == where.relative_path) {
        f.items += 1;
        f.item_bytes += where.length;
      }
    }
    return Status();
  };
  for (const DcpEntry& e : out->metadata_.entries) {
    if (!e.is_tensor) {
      OPTSTATE_RETURN_IF_ERROR(check(e.bytes_where, "bytes item '" + e.fqn + "'"));
      continue;
    }
    for (const DcpChunk& c : e.chunks) OPTSTATE_RETURN_IF_ERROR(check(c.where, ChunkText(e, c)));
  }
  std::sort(out->files_.begin(), out->files_.end(),
            [](const DcpDataFile& a, const DcpDataFile& b) { return a.name < b.name; });
  return out;
}

}  // namespace optstate
