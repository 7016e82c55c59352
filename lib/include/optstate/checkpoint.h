// A torch.save checkpoint, read without loading tensor data.
//
// OpenCheckpoint maps a file (or decompresses a .zst, up to a cap) and parses it:
// the container (zip or legacy), the pickle into an object graph, torch's objects
// (storages located in the file, tensors as views of them), and a security scan.
// ParseCheckpoint does the same for bytes already in memory, e.g. one item of a
// DCP .distcp file, whose offsets are then reported relative to that file.
//
// Tensor bytes are never read during parsing; ReadTensorBytes reads one tensor
// on request.
#ifndef OPTSTATE_CHECKPOINT_H_
#define OPTSTATE_CHECKPOINT_H_

#include <bitset>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/file_io.h"
#include "optstate/pickle_graph.h"
#include "optstate/status.h"
#include "optstate/torch_objects.h"

namespace optstate {

struct ZipArchive;  // lib/zip/zip_archive.h

// The container: what kind of file a checkpoint is, and its facts that can be
// had without parsing the pickle (the first layer of `optstate inspect`).
//   zip     torch.save since 1.6: records under one directory (see zip_archive.h)
//   legacy  torch.save before 1.6 or with _use_new_zipfile_serialization=False:
//           a sequence of pickles starting with a fixed magic number
//   zstd    a zstd-compressed file (the inner format is peeked at, not unpacked)
enum class ContainerFormat { kZip, kLegacy, kZstd, kSafetensors };

std::string_view ContainerFormatName(ContainerFormat format);  // "zip", "legacy", "zstd", "safetensors"

struct ContainerInfo {
  ContainerFormat format = ContainerFormat::kZip;
  uint64_t file_size = 0;

  // zip only.
  std::shared_ptr<const ZipArchive> zip;  // its directory (lib-internal)
  int pickle_protocol = -1;              // of data.pkl; -1 when it has no PROTO opcode
  std::optional<std::string> version;    // content of the 'version' record, trimmed
  std::optional<std::string> byteorder;  // 'byteorder' record (torch >= 2.1)
  std::optional<std::string> serialization_id;  // '.data/serialization_id' (torch >= 2.1)
  uint64_t storage_records = 0;          // records under data/
  uint64_t storage_bytes = 0;            // their total size
  bool crc_checked = false;              // CRCs of every record were verified

  // zstd only.
  std::optional<uint64_t> zstd_content_size;       // when the frame header declares it
  std::optional<ContainerFormat> zstd_inner_format;  // from the first decompressed bytes
};

// A zip checkpoint's directory as listings show it (`inspect --records`).
struct ZipRecordView {
  std::string_view name;
  uint64_t size = 0;              // uncompressed
  uint64_t data_offset = 0;       // where its data starts, when data_offset_known
  bool data_offset_known = false;  // ReadOptions::resolve_offsets reads every local header
  uint32_t crc32 = 0;             // from the central directory
  uint16_t method = 0;            // 0 stored, 8 deflated, ...
};
struct ZipListing {
  std::string_view prefix;        // the archive's top directory
  bool zip64 = false;
  std::vector<ZipRecordView> records;  // central directory order
};
// Empty for the other formats. Views into `info`, valid while it lives.
ZipListing ListZipRecords(const ContainerInfo& info);
// How many records ListZipRecords would list, without listing them (48 bytes
// each: 190 MB at 10^6 parameters).
size_t ZipRecordCount(const ContainerInfo& info);

// What a checkpoint would make Python do on an ordinary torch.load, judged
// without doing it (the scans are lib/torch/security.h).
enum class Severity { kInfo, kWarning, kError };
std::string_view SeverityName(Severity s);  // "info", "warning", "error"

struct Finding {
  Severity severity = Severity::kWarning;
  std::string code;     // stable id: "dangerous-global", "global-not-allowlisted", ...
  std::string where;    // "data.pkl offset 1203", or a path in the object tree
  std::string message;  // what it means for the user
  std::string global;   // "module.name" for findings about one global, else ""
};

// For a file that cannot be read as a checkpoint: what torch.load
// (weights_only=False) would still have run before failing. A zip's data.pkl
// records (every one so named) or, for anything else, the pickles of torch's
// legacy path, each read up to where torch would stop, with its globals judged
// as ScanGlobals judges them. Nested pickles are not looked at: a failed load
// hands no bytes value to anyone.
struct UnreadableScan {
  std::vector<Finding> findings;
  std::string scanned;                   // "2 pickles of a pickle stream (torch.load's legacy path)"
  std::string stopped_at;                // where torch.load stops, when it does before the end
  std::vector<std::string> not_scanned;  // what could not be looked at, and why
};

// ScanWhatTorchLoadWouldRunOf: the same for the file at `path`, which failed to
// open as a checkpoint with `read_error`. nullopt when nothing torch.load runs can be judged: the error
// says the file itself could not be read (missing, unreadable, a directory),
// or it is zstd-compressed (torch.load reads no zstd).
std::optional<UnreadableScan> ScanWhatTorchLoadWouldRunOf(const std::string& path, const Status& read_error,
                                                          const PickleLimits& limits);


struct ReadOptions {
  PickleLimits pickle;
  uint64_t max_zip_entries = kDefaultMaxZipEntries;  // zip records, checked before anything is kept
  bool verify_crc = false;                          // recompute every zip record's CRC
  bool resolve_offsets = false;                     // read every zip local header (listings)
  std::function<void(ByteSpan)> done_with;          // see ContainerOptions::done_with
  // Given stored records whose bytes reading the local headers brought in
  // anyway (ResolveZipDataOffsets' record_read), when that read runs beside
  // the pickle's parse: called on that second thread, before Open returns.
  std::function<void(ByteSpan where, ByteSpan bytes)> record_bytes_read;
  uint64_t max_storage_bytes = 1ull << 40;          // one storage (1 TiB)
  uint64_t max_decompressed_bytes = 16ull << 30;    // a .zst's content (16 GiB)
  uint32_t max_nested_pickle_depth = 3;             // pickles inside bytes inside pickles
};

struct Checkpoint {
  ContainerInfo container;
  std::string pickle_record;    // "archive/data.pkl", or "main pickle" (legacy)
  int pickle_protocol = 0;
  std::bitset<256> pickle_opcodes;  // of every pickle torch.load unpickles (legacy: all five)
  uint64_t pickle_bytes = 0;
  ObjectGraph graph;
  std::vector<GlobalRef> globals;
  std::vector<StorageRef> storages;
  std::vector<TensorRef> tensors;
  std::vector<Finding> findings;
};

// Owns the bytes a Checkpoint's offsets refer to.
class CheckpointFile {
 public:
  const Checkpoint& checkpoint() const { return checkpoint_; }
  Checkpoint& checkpoint() { return checkpoint_; }
  ByteSpan bytes() const;
  const std::string& path() const { return path_; }
  // Drops resident pages of a mapped input once a range has been copied (a no-op
  // for decompressed .zst content, which lives in memory).
  void ReleasePages(ByteSpan range) const {
    if (mapped_) mapped_->ReleasePages(range);
  }
  void ReleasePagesAround(ByteSpan range, uint64_t margin) const {
    if (mapped_) mapped_->ReleasePagesAround(range, margin);
  }
  // Where `range` (within bytes()) lies in the input file, for in-kernel
  // copies; nullopt for decompressed .zst content.
  std::optional<FileRange> FileRangeOf(ByteSpan range) const;

 private:
  friend StatusOr<std::unique_ptr<CheckpointFile>> OpenCheckpoint(const std::string&,
                                                                   const ReadOptions&);
  std::string path_;
  std::unique_ptr<MappedFile> mapped_;
  std::vector<std::byte> buffer_;  // decompressed .zst content
  Checkpoint checkpoint_;
};

// Errors carry the path and, below it, the record and byte offset.
StatusOr<std::unique_ptr<CheckpointFile>> OpenCheckpoint(const std::string& path,
                                                         const ReadOptions& options = {});

// The content of zstd frames, refused with kLimitExceeded as soon as it would
// pass `max_bytes` (a bomb costs at most that much memory).
StatusOr<std::vector<std::byte>> DecompressZstd(ByteSpan compressed, uint64_t max_bytes);

// The bytes of one storage within `bytes` (the buffer the checkpoint was parsed
// from), checked against its bounds.
StatusOr<ByteSpan> StorageBytes(ByteSpan bytes, const Checkpoint& checkpoint, const StorageRef& storage);

// The CRC-32 the zip directory records for a storage's record, when that
// record is stored (not compressed) and holds exactly the storage's bytes;
// nullopt otherwise (legacy format, decompressed .zst content, no zip entry).
std::optional<uint32_t> StorageRecordCrc(const Checkpoint& checkpoint, const StorageRef& storage);

// The tensor's elements where they lie in `bytes`, when they already form one
// run in C order (a contiguous tensor, or at most one element): no copy. nullopt
// when they must be gathered (ReadTensorBytes does); meta tensors have none.
StatusOr<std::optional<ByteSpan>> TensorBytesInPlace(ByteSpan bytes, const Checkpoint& checkpoint,
                                                     const TensorRef& tensor);

// A float32, bfloat16 or float16 tensor's elements as float (exact), in C order;
// kUnsupported for other dtypes.
StatusOr<std::vector<float>> ReadTensorAsFloat(ByteSpan bytes, const Checkpoint& checkpoint, const TensorRef& t);

// The tensor's elements in C order (what `tensor.contiguous()` holds), read from
// `bytes` (the buffer the checkpoint was parsed from). Meta tensors have none.
StatusOr<std::vector<std::byte>> ReadTensorBytes(ByteSpan bytes, const Checkpoint& checkpoint,
                                                 const TensorRef& tensor);

}  // namespace optstate

#endif  // OPTSTATE_CHECKPOINT_H_
