#include "optstate/checkpoint.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "io/byte_cursor.h"
#include "torch/container.h"
#include "torch/element_values.h"
#include "torch/legacy_format.h"
#include "torch/safetensors_format.h"
#include "torch/security.h"
#include "torch/zip_record_scan.h"

namespace optstate {
namespace {

// data.pkl (at `pickle_offset` of `whole`) into out's graph, tensors and
// storages. Reads of the zip directory: names, sizes and methods only (see
// ParseZipCheckpoint).
Status ParseZipPickle(const ByteCursor& whole, const ReadOptions& options, const ZipEntry* pkl, ByteSpan pickle,
                      uint64_t pickle_offset, Checkpoint& out) {
  const ZipArchive& zip = ZipDirectory(out.container);
  ByteCursor c(pickle, whole.base_offset() + pickle_offset);
  // torch.load unpickles it from an io.BytesIO, which decides what a FRAME trick reads as.
  StatusOr<PickleResult> parsed = ReadPickle(c, options.pickle, nullptr, PickleReadMode::kFileNoPeek);
  if (!parsed.ok()) return std::move(parsed).status().WithContext("record '" + pkl->name + "'");
  ScanPickleStructure(*parsed, pkl->name, whole.size(), out.findings);
  const uint64_t used = parsed->end_offset - c.base_offset();  // torch.load stops at STOP
  ScanBytesAfterStop(pickle.subspan(used), parsed->end_offset, pkl->name, options.pickle, out.findings);
  // The graph holds what it needs of the pickle's bytes (32 MB at 10^5 parameters).
  if (options.done_with) options.done_with(pickle);
  out.pickle_protocol = parsed->protocol;
  out.pickle_opcodes = parsed->opcodes;
  out.pickle_bytes = pickle.size();
  out.graph = std::move(parsed->graph);
  out.globals = std::move(parsed->globals);

  auto locate = [&](StorageRef& s) -> Status {
    if (s.nbytes > options.max_storage_bytes) {
      return LimitExceededError(std::to_string(s.nbytes) + " bytes (limit max_storage_bytes)");
    }
    const ZipEntry* e = zip.Find("data/" + s.key);
    if (e == nullptr) return CorruptError("no record '" + zip.prefix + "/data/" + s.key + "'");
    if (e->method != 0) {
      return UnsupportedError("record '" + e->name + "' is compressed; torch.save stores records");
    }
    // torch writes exactly numel * element size bytes and never checks on load,
    // so a short record would be read past its end by torch itself.
    if (e->size < s.nbytes) {
      return CorruptError("record '" + e->name + "' holds " + std::to_string(e->size) +
                          " bytes, but the storage declares " + std::to_string(s.numel) +
                          " elements of " + std::to_string(s.nbytes / std::max<uint64_t>(s.numel, 1)) +
                          " bytes (" + std::to_string(s.nbytes) + ")");
    }
    const ptrdiff_t index = e - zip.entries.data();
    if (index > std::numeric_limits<int32_t>::max()) {  // only if --max-zip-entries was raised past 2^31
      return LimitExceededError("record '" + e->name + "' is past the 2^31st record of the zip directory");
    }
    s.zip_entry = static_cast<int32_t>(index);
    s.located = true;
    return Status();
  };
  StatusOr<TorchObjects> objects = ResolveTorchObjects(out.graph, locate, options.pickle.max_depth);
  if (!objects.ok()) return std::move(objects).status().WithContext("record '" + pkl->name + "'");
  out.storages = std::move(objects->storages);
  out.tensors = std::move(objects->tensors);
  return Status();
}

// `offsets_fd` >= 0: every record's data offset is still to be resolved, from
// that file. The local headers are then read on a second thread while the
// pickle is parsed, which needs none of them: on a 0.5 GB file of 4 * 10^4
// tensors that read copies most of the file (local_headers.cc) and took a
// seventh of validate's time on the one core. The thread writes only each
// entry's data offset and the archive's tiny records, which nothing reads
// until it is joined, and hands the records it read whole to
// options.record_bytes_read; its error comes first, as when it ran before
// the parse.
Status ParseZipCheckpoint(const ByteCursor& whole, const ReadOptions& options, Checkpoint& out, int offsets_fd) {
  const ZipArchive& zip = ZipDirectory(out.container);
  const ZipEntry* pkl = zip.Find("data.pkl");  // InspectContainer checked it exists
  out.pickle_record = pkl->name;
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan pickle, ZipEntryData(whole, *pkl));
  OPTSTATE_ASSIGN_OR_RETURN(uint64_t pickle_offset, ZipEntryDataOffset(whole, *pkl));
  if (offsets_fd < 0) return ParseZipPickle(whole, options, pkl, pickle, pickle_offset, out);
  // DescribeZip made the archive, not const, and nothing else holds it yet.
  ZipArchive& unresolved = *std::const_pointer_cast<ZipArchive>(out.container.zip);
  Status resolved;
  std::thread beside;
  try {
    beside = std::thread([&] {
      try {
        resolved = ResolveZipDataOffsets(whole, unresolved, nullptr, offsets_fd, options.record_bytes_read);
      } catch (const std::bad_alloc&) {  // an exception would end the process from this thread
        resolved = LimitExceededError("out of memory reading the zip's local headers");
      }
    });
  } catch (const std::system_error&) {  // no second thread: one after the other
    OPTSTATE_RETURN_IF_ERROR(ResolveZipDataOffsets(whole, unresolved, nullptr, offsets_fd, options.record_bytes_read));
  }
  Status parsed = ParseZipPickle(whole, options, pkl, pickle, pickle_offset, out);
  if (beside.joinable()) beside.join();
  OPTSTATE_RETURN_IF_ERROR(resolved);
  return parsed;
}

}  // namespace

StatusOr<Checkpoint> ParseCheckpoint(const ByteCursor& cursor, const ReadOptions& options, int fd) {
  Checkpoint out;
  ContainerOptions copts;
  copts.fd = fd;
  copts.verify_crc = options.verify_crc;
  // With the file at hand (and no CRC pass, which needs them first), data
  // offsets are resolved beside the pickle's parse (ParseZipCheckpoint).
  const bool offsets_beside = options.resolve_offsets && !options.verify_crc && fd >= 0;
  copts.resolve_offsets = options.resolve_offsets && !offsets_beside;
  copts.done_with = options.done_with;
  copts.zip.max_entries = options.max_zip_entries;
  OPTSTATE_ASSIGN_OR_RETURN(out.container, InspectContainer(cursor, copts));
  switch (out.container.format) {
    case ContainerFormat::kZip:
      OPTSTATE_RETURN_IF_ERROR(ParseZipCheckpoint(cursor, options, out, offsets_beside ? fd : -1));
      break;
    case ContainerFormat::kLegacy: OPTSTATE_RETURN_IF_ERROR(ParseLegacyCheckpoint(cursor, options, out)); break;
    case ContainerFormat::kSafetensors:
      OPTSTATE_RETURN_IF_ERROR(ParseSafetensorsCheckpoint(cursor, options, out));
      break;
    case ContainerFormat::kZstd:
      return InvalidArgumentError("zstd content must be decompressed first (OpenCheckpoint does)");
  }
  std::string where = out.container.format == ContainerFormat::kLegacy ? "main pickle" : out.pickle_record;
  const std::set<uint64_t> called = CalledGlobalOffsets(out.graph);
  const std::set<uint64_t> lookups = BoundMethodLookups(out.graph);
  ScanGlobals(out.globals, where, /*nested=*/false, out.findings, &called, &lookups);
  ScanAllocationClaims(out.graph, out.globals, where, cursor.size(), out.findings);
  ScanNestedPickles(out.graph, options.pickle, options.max_nested_pickle_depth, out.findings);
  for (const ZipEntry& e : ZipDirectory(out.container).entries) ScanZipName(e.name, out.findings);
  if (out.container.format == ContainerFormat::kZip) ScanRecordsBesideTheMainPickle(cursor, options.pickle, out);
  ReleaseTensorCalls(out.graph, out.tensors);
  LabelTensors(out.graph, out.tensors, out.storages);
  return out;
}

ByteSpan CheckpointFile::bytes() const {
  if (!buffer_.empty() || !mapped_) return {buffer_.data(), buffer_.size()};
  return mapped_->bytes();
}

StatusOr<std::unique_ptr<CheckpointFile>> OpenCheckpoint(const std::string& path,
                                                         const ReadOptions& options) {
  auto file = std::unique_ptr<CheckpointFile>(new (std::nothrow) CheckpointFile());
  if (!file) return LimitExceededError(path + ": out of memory");
  file->path_ = path;
  StatusOr<MappedFile> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  file->mapped_ = std::make_unique<MappedFile>(std::move(*mapped));
  ContainerInfo outer;
  {
    // Only the first bytes: reading the directory here as well kept two copies
    // of it (70 MB at 4 * 10^5 records) and read it twice.
    if (SniffContainerFormat(file->mapped_->bytes()) != ContainerFormat::kZstd) {
      ReadOptions mapped_options = options;
      ReleaseInBatches<MappedFile> done(*file->mapped_);
      mapped_options.done_with = [&done](ByteSpan range) { done.Add(range); };
      StatusOr<Checkpoint> parsed =
          ParseCheckpoint(ByteCursor(file->mapped_->bytes()), mapped_options, file->mapped_->fd());
      done.Flush();
      if (!parsed.ok()) return std::move(parsed).status().WithContext(path);
      file->checkpoint_ = std::move(*parsed);
      return file;
    }
    StatusOr<ContainerInfo> sniff = InspectContainer(ByteCursor(file->mapped_->bytes()), {});
    if (!sniff.ok()) return std::move(sniff).status().WithContext(path);
    outer = std::move(*sniff);
  }
  StatusOr<std::vector<std::byte>> plain = DecompressZstd(file->mapped_->bytes(), options.max_decompressed_bytes);
  if (!plain.ok()) return std::move(plain).status().WithContext(path);
  file->buffer_ = std::move(*plain);
  file->mapped_.reset();
  StatusOr<Checkpoint> parsed = ParseCheckpoint(ByteCursor(file->bytes()), options);
  if (!parsed.ok()) return std::move(parsed).status().WithContext(path + " (decompressed)");
  file->checkpoint_ = std::move(*parsed);
  file->checkpoint_.container.zstd_content_size = file->buffer_.size();
  file->checkpoint_.container.zstd_inner_format = file->checkpoint_.container.format;
  file->checkpoint_.container.file_size = outer.file_size;
  file->checkpoint_.container.format = ContainerFormat::kZstd;
  return file;
}

std::optional<FileRange> CheckpointFile::FileRangeOf(ByteSpan range) const {
  if (!mapped_ || mapped_->fd() < 0) return std::nullopt;
  ByteSpan all = mapped_->bytes();
  if (range.data() < all.data() || range.data() + range.size() > all.data() + all.size()) return std::nullopt;
  return FileRange{mapped_->fd(), static_cast<uint64_t>(range.data() - all.data())};
}

StatusOr<ByteSpan> StorageBytes(ByteSpan bytes, const Checkpoint& checkpoint, const StorageRef& s) {
  if (!s.located) return CorruptError("storage '" + s.key + "' has no data");
  uint64_t offset = s.data_offset;
  if (s.zip_entry >= 0) {
    const ZipEntry& e = ZipDirectory(checkpoint.container).entries[static_cast<size_t>(s.zip_entry)];
    OPTSTATE_ASSIGN_OR_RETURN(offset, ZipEntryDataOffset(ByteCursor(bytes), e));
  }
  if (offset > bytes.size() || s.nbytes > bytes.size() - offset) {
    return CorruptError("storage '" + s.key + "' lies outside the checkpoint bytes");
  }
  return bytes.subspan(static_cast<size_t>(offset), static_cast<size_t>(s.nbytes));
}

std::optional<uint32_t> StorageRecordCrc(const Checkpoint& checkpoint, const StorageRef& s) {
  if (s.zip_entry < 0) return std::nullopt;
  const ZipEntry& e = ZipDirectory(checkpoint.container).entries[static_cast<size_t>(s.zip_entry)];
  if (e.method != 0 || e.size != s.nbytes) return std::nullopt;
  return e.crc32;
}

namespace {

// C order in memory: every dimension longer than one has the stride the sizes
// after it give (torch's is_contiguous; size-1 dimensions may have any stride).
bool IsContiguous(const TensorRef& t) {
  if (t.numel() <= 1) return true;
  int64_t expected = 1;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    if (t.sizes[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.sizes[d];
  }
  return true;
}

}  // namespace

StatusOr<std::optional<ByteSpan>> TensorBytesInPlace(ByteSpan bytes, const Checkpoint& checkpoint,
                                                     const TensorRef& t) {
  if (t.storage < 0 || !IsContiguous(t)) return std::optional<ByteSpan>();
  const StorageRef& s = checkpoint.storages[static_cast<size_t>(t.storage)];
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan storage, StorageBytes(bytes, checkpoint, s));
  if (t.nbytes() == 0) return std::optional<ByteSpan>(storage.first(0));
  uint64_t begin = t.storage_offset * GetDTypeInfo(t.dtype).element_size;
  if (begin > storage.size() || t.nbytes() > storage.size() - begin) {
    return CorruptError("a tensor reaches past the end of storage '" + s.key + "'");
  }
  return std::optional<ByteSpan>(storage.subspan(begin, t.nbytes()));
}

StatusOr<std::vector<std::byte>> ReadTensorBytes(ByteSpan bytes, const Checkpoint& checkpoint,
                                                 const TensorRef& t) {
  if (t.storage < 0) return std::vector<std::byte>{};
  OPTSTATE_ASSIGN_OR_RETURN(std::optional<ByteSpan> in_place, TensorBytesInPlace(bytes, checkpoint, t));
  std::vector<std::byte> out;
  try {
    out.resize(t.nbytes());
  } catch (const std::bad_alloc&) {
    return LimitExceededError("out of memory for a tensor of " + std::to_string(t.nbytes()) + " bytes");
  }
  if (out.empty()) return out;
  if (in_place) {  // one run already: a single copy instead of element by element
    std::copy(in_place->begin(), in_place->end(), out.begin());
    return out;
  }
  const StorageRef& s = checkpoint.storages[static_cast<size_t>(t.storage)];
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan storage, StorageBytes(bytes, checkpoint, s));
  const std::byte* base = storage.data();
  const size_t elem = GetDTypeInfo(t.dtype).element_size;
  // Odometer over the index space in C order; the extent was checked against the
  // storage when the tensor was resolved, so every element read is in bounds.
  std::vector<int64_t> index(t.sizes.size(), 0);
  uint64_t offset = t.storage_offset;
  for (size_t i = 0, n = t.numel(); i < n; ++i) {
    std::copy_n(base + offset * elem, elem, out.data() + i * elem);
    for (size_t d = t.sizes.size(); d-- > 0;) {
      if (++index[d] < t.sizes[d]) {
        offset += static_cast<uint64_t>(t.strides[d]);
        break;
      }
      offset -= static_cast<uint64_t>(t.strides[d]) * static_cast<uint64_t>(t.sizes[d] - 1);
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace optstate

namespace optstate {

StatusOr<std::vector<float>> ReadTensorAsFloat(ByteSpan bytes, const Checkpoint& checkpoint, const TensorRef& t) {
  if (t.dtype != DType::kFloat32 && t.dtype != DType::kBFloat16 && t.dtype != DType::kFloat16) {
    return UnsupportedError(std::string(GetDTypeInfo(t.dtype).name) + " is not a float32, bfloat16 or float16 tensor");
  }
  OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::byte> raw, ReadTensorBytes(bytes, checkpoint, t));
  size_t elem = GetDTypeInfo(t.dtype).element_size;
  std::vector<float> out;
  try {
    out.resize(raw.size() / elem);
  } catch (const std::bad_alloc&) {
    return LimitExceededError("out of memory for a tensor of " + std::to_string(raw.size()) + " bytes");
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = LoadAsFloat(raw.data(), t.dtype, i);
  return out;
}

}  // namespace optstate
