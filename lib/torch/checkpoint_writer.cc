#include "optstate/checkpoint_writer.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "io/shared_output_file.h"
#include "torch/checkpoint_share.h"
#include "torch/container.h"
#include "torch/pickle_writer.h"
#include "zip/zip_writer.h"

namespace optstate {
namespace {

std::string ArchiveName(const std::string& path) {
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  if (base.ends_with(".zst")) base.resize(base.size() - 4);
  size_t dot = base.rfind('.');
  if (dot != std::string::npos && dot > 0) base = base.substr(0, dot);
  return base.empty() ? "archive" : base;
}

}  // namespace

std::string WeightsOnlyVerdict(const WriteReport& report) {
  if (report.unsafe_globals.empty()) return "accepts it";
  if (report.loadable_after_dtensor_import) return "accepts it once torch.distributed.tensor is imported";
  std::string out = "refuses it: the input already references";
  for (const std::string& g : report.unsafe_globals) out += " " + g;
  return out;
}

StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, NodeId root, const std::string& path,
                                      const WriteOptions& options) {
  return WriteCheckpoint(input, input.checkpoint(), root, path, options);
}

namespace {

// One storage's bytes for the zip writer, and what it may know about them.
struct StorageData {
  ByteSpan bytes;
  std::optional<uint32_t> crc;        // when the record is copied whole from a zip
  std::optional<FileRange> source;    // where the bytes lie in a file
  std::function<void(ByteSpan)> release;
  std::vector<RecordPiece> pieces;    // instead of `bytes`: the record is these, in order
};
using StorageDataFn = std::function<StatusOr<StorageData>(const StorageRef&, size_t index)>;

// The storages one process writes when several write one file: a contiguous
// run of about 1/processes of the bytes, in file order.
struct StorageShare {
  SharedOutputFile* file;
  int process, processes;
  std::vector<uint32_t>* written;  // zip records this process wrote
  const std::function<void(uint64_t)>* planned;  // told this process's bytes (may be empty)

  std::vector<bool> Mine(const Checkpoint& cp, const std::vector<size_t>& storages) const {
    uint64_t total = 0;
    for (size_t s : storages) total += cp.storages[s].nbytes;
    std::vector<bool> mine(storages.size());
    uint64_t before = 0, own = 0;
    for (size_t key = 0; key < storages.size(); ++key) {
      // The process whose share of the bytes this storage starts in.
      auto owner = total == 0 ? 0 : static_cast<int>((static_cast<unsigned __int128>(before) * processes) / total);
      mine[key] = std::min(owner, processes - 1) == process;
      before += cp.storages[storages[key]].nbytes;
      own += mine[key] ? cp.storages[storages[key]].nbytes : 0;
    }
    if (planned && *planned) (*planned)(own);
    return mine;
  }
};

// data.pkl, byteorder, the storages in pickle order, version; then, unless
// `share` leaves that to later, the central directory.
StatusOr<WriteReport> WriteRecords(ZipWriter& zip, const Checkpoint& cp, NodeId root, const StorageDataFn& data_of,
                                   const StorageShare* share = nullptr) {
  if (share) share->file->set_writing(share->process == 0);
  // data.pkl goes into the zip as it is made: whole, it was 37 MB at 10^5
  // parameters, held beside the graph it was made from.
  OPTSTATE_RETURN_IF_ERROR(zip.BeginRecord("data.pkl"));
  OPTSTATE_ASSIGN_OR_RETURN(PickleOutput pickle, WriteTorchPickle(cp, root, [&zip](std::string_view piece) {
                              return zip.AppendToRecord(AsBytes(piece));
                            }));
  OPTSTATE_RETURN_IF_ERROR(zip.EndRecord());
  WriteReport report;
  report.unsafe_globals = pickle.unsafe_globals;
  report.loadable_after_dtensor_import = pickle.only_dtensor_globals_unsafe;
  OPTSTATE_RETURN_IF_ERROR(zip.AddRecord("byteorder", AsBytes("little")));
  const std::vector<bool> mine = share ? share->Mine(cp, pickle.storages) : std::vector<bool>();
  for (size_t key = 0; key < pickle.storages.size(); ++key) {
    const StorageRef& s = cp.storages[pickle.storages[key]];
    ++report.storages;
    report.storage_bytes += s.nbytes;
    if (share && !mine[key]) {
      OPTSTATE_RETURN_IF_ERROR(zip.AddSkippedRecord("data/" + std::to_string(key), s.nbytes));
      continue;
    }
    if (share) {
      share->file->set_writing(true);
      share->written->push_back(static_cast<uint32_t>(zip.record_count()));
    }
    if (s.zero_fill) {
      OPTSTATE_RETURN_IF_ERROR(zip.AddZeroRecord("data/" + std::to_string(key), s.nbytes));
      continue;
    }
    OPTSTATE_ASSIGN_OR_RETURN(StorageData d, data_of(s, pickle.storages[key]));
    if (!d.pieces.empty()) {
      uint64_t total = 0;
      for (const RecordPiece& p : d.pieces) total += p.data.size();
      if (total != s.nbytes) return InternalError("storage '" + s.key + "': pieces do not add up");
      OPTSTATE_RETURN_IF_ERROR(zip.AddRecordPieces("data/" + std::to_string(key), d.pieces, d.release));
      continue;
    }
    if (d.bytes.size() != s.nbytes) {
      return InternalError("storage '" + s.key + "': " + std::to_string(d.bytes.size()) + " bytes for " +
                           std::to_string(s.nbytes));
    }
    OPTSTATE_RETURN_IF_ERROR(zip.AddRecord("data/" + std::to_string(key), d.bytes, d.release, d.crc, d.source));
  }
  if (share) share->file->set_writing(share->process == 0);
  OPTSTATE_RETURN_IF_ERROR(zip.AddRecord("version", AsBytes("3\n")));
  if (share) return report;
  OPTSTATE_RETURN_IF_ERROR(zip.Finish());
  report.bytes = zip.bytes_written();
  return report;
}

StatusOr<WriteReport> WriteWith(const Checkpoint& cp, NodeId root, const std::string& path,
                                const WriteOptions& options, const StorageDataFn& data_of) {
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<ZipWriter> zip,
                            ZipWriter::Create(path, ArchiveName(options.named_after.empty() ? path : options.named_after),
                                              options.zstd, options.durability));
  OPTSTATE_ASSIGN_OR_RETURN(WriteReport report, WriteRecords(*zip, cp, root, data_of));
  std::error_code ec;
  report.bytes = std::filesystem::file_size(path, ec);
  return report;
}

StorageDataFn FromSource(const StorageSource& source) {
  return [&source](const StorageRef&, size_t index) -> StatusOr<StorageData> {
    StorageData d;
    OPTSTATE_ASSIGN_OR_RETURN(d.bytes, source(index));
    return d;
  };
}

}  // namespace

StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, const Checkpoint& cp, NodeId root,
                                      const std::string& path, const WriteOptions& options) {
  return WriteCheckpoint(input, cp, root, path, nullptr, options);
}

// Records smaller than this are written from the mapping into the zip writer's
// buffer: a kernel copy costs a system call per record, and a save of 10^5
// parameters has 4 * 10^5 records of a few hundred bytes.
constexpr uint64_t kSmallRecordBytes = 64u << 10;

StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, const Checkpoint& cp, NodeId root,
                                      const std::string& path, const StorageSource& computed,
                                      const WriteOptions& options) {
  auto release = [&input](ByteSpan chunk) { input.ReleasePages(chunk); };
  ReleaseInBatches<CheckpointFile> small_records(input);
  auto release_small = [&small_records](ByteSpan chunk) { small_records.Add(chunk); };
  return WriteWith(cp, root, path, options, [&](const StorageRef& s, size_t index) -> StatusOr<StorageData> {
    StorageData d;
    if (s.computed) {
      if (!computed) return InternalError("storage '" + s.key + "' is computed but nothing computes it");
      OPTSTATE_ASSIGN_OR_RETURN(d.bytes, computed(index));
      return d;
    }
    OPTSTATE_ASSIGN_OR_RETURN(d.bytes, StorageBytes(input.bytes(), cp, s));
    // A stored record copied whole keeps the CRC the input's directory gives it,
    // so the bytes are read once, by the kernel where it can. (A wrong CRC stays
    // as wrong as it was; --verify-crc checks the input first.) CRC 0 is what
    // torch writes where it computed none (set_crc32_options(False)): summed here.
    if (s.zip_entry >= 0) {
      const ZipEntry& e = ZipDirectory(cp.container).entries[static_cast<size_t>(s.zip_entry)];
      if (e.method == 0 && e.size == d.bytes.size() && e.crc32 != 0) d.crc = e.crc32;
    }
    if (d.bytes.size() < kSmallRecordBytes) {
      d.release = release_small;
      return d;
    }
    if (d.crc) d.source = input.FileRangeOf(d.bytes);
    // The kernel copies this record; its local header, just read through the
    // mapping, pulled in the large page-cache folio around it (file_io.h).
    if (d.source) input.ReleasePagesAround(d.bytes.first(0), kLargeFolioBytes);
    d.release = release;
    return d;
  });
}

StatusOr<WriteReport> WriteNewCheckpoint(const Checkpoint& checkpoint, NodeId root, const std::string& path,
                                         const StorageSource& source, const WriteOptions& options) {
  return WriteWith(checkpoint, root, path, options, FromSource(source));
}

StorageDataFn FromPieces(const StoragePiecesSource& source, const std::function<void(ByteSpan)>& release) {
  return [&source, &release](const StorageRef&, size_t index) -> StatusOr<StorageData> {
    StorageData d;
    d.release = release;
    OPTSTATE_ASSIGN_OR_RETURN(d.pieces, source(index));
    return d;
  };
}

StatusOr<WriteReport> WriteNewCheckpointFromPieces(const Checkpoint& checkpoint, NodeId root,
                                                   const std::string& path, const StoragePiecesSource& source,
                                                   const WriteOptions& options,
                                                   const std::function<void(ByteSpan)>& release) {
  return WriteWith(checkpoint, root, path, options, FromPieces(source, release));
}

StatusOr<WriteReport> WriteEmbeddedCheckpointFromPieces(const Checkpoint& checkpoint, NodeId root, OutputStream& out,
                                                        const StoragePiecesSource& source,
                                                        const std::function<void(ByteSpan)>& release) {
  std::unique_ptr<ZipWriter> zip = ZipWriter::CreateEmbedded(out, "archive");
  return WriteRecords(*zip, checkpoint, root, FromPieces(source, release));
}

StatusOr<WriteReport> WriteEmbeddedCheckpoint(const Checkpoint& checkpoint, NodeId root, OutputStream& out,
                                              const StorageSource& source) {
  std::unique_ptr<ZipWriter> zip = ZipWriter::CreateEmbedded(out, "archive");
  return WriteRecords(*zip, checkpoint, root, FromSource(source));
}

StatusOr<CheckpointShare> WriteCheckpointShare(const Checkpoint& cp, NodeId root, SharedOutputFile& file,
                                               const std::string& named_after, int process, int processes,
                                               const StoragePiecesSource& source,
                                               const std::function<void(ByteSpan)>& release,
                                               const std::function<void(uint64_t)>& share_planned) {
  CheckpointShare out;
  out.zip = ZipWriter::CreateShared(file, ArchiveName(named_after));
  StorageShare share{&file, process, processes, &out.written, &share_planned};
  OPTSTATE_ASSIGN_OR_RETURN(out.report, WriteRecords(*out.zip, cp, root, FromPieces(source, release), &share));
  return out;
}

}  // namespace optstate
