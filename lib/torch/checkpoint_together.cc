// Several processes write one torch.save file (consolidate --distributed).
//
// Steps, each a GatherStep every process takes part in: 'start' (process 0 has
// created "<dir>/.<name>.partial"), 'written' (each has written and synced its
// share, and says the CRC of every record it wrote), 'done' (process 0 has
// written the central directory and renamed the file into place). A failure
// before 'done' fails every process and process 0 removes the temporary, so
// nothing appears and an older file at the path stays as it was.
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "io/job_steps.h"
#include "io/shared_output_file.h"
#include "torch/checkpoint_share.h"

namespace optstate {
namespace {

// "record:crc,..." of the records this process wrote.
std::string EncodeCrcs(const CheckpointShare& share) {
  std::string out;
  const std::vector<uint32_t> crcs = share.zip->RecordCrcs();
  for (uint32_t record : share.written) {
    out += std::to_string(record) + ":" + std::to_string(crcs[record]) + ",";
  }
  return out;
}

// Reads what EncodeCrcs wrote (another process's message) into `zip`; returns
// how many records it covered.
StatusOr<size_t> SetCrcs(ZipWriter& zip, std::string_view from, int process) {
  size_t records = 0;
  for (; !from.empty(); ++records) {
    uint64_t record = 0;
    uint32_t crc = 0;
    auto [colon, e1] = std::from_chars(from.data(), from.data() + from.size(), record);
    bool ok = e1 == std::errc() && colon < from.data() + from.size() && *colon == ':';
    const char* comma = colon;
    if (ok) {
      std::from_chars_result r = std::from_chars(colon + 1, from.data() + from.size(), crc);
      comma = r.ptr;
      ok = r.ec == std::errc() && comma < from.data() + from.size() && *comma == ',';
    }
    if (!ok) return InternalError("process " + std::to_string(process) + " sent CRCs that do not parse");
    OPTSTATE_RETURN_IF_ERROR(zip.SetRecordCrc(record, crc));
    from.remove_prefix(static_cast<size_t>(comma + 1 - from.data()));
  }
  return records;
}

}  // namespace

StatusOr<WriteReport> WriteCheckpointTogether(const Checkpoint& cp, NodeId root, const std::string& path,
                                              const WriteOptions& options, const StoragePiecesSource& source,
                                              const std::function<void(ByteSpan)>& release, Coordinator& co,
                                              std::string& unconfirmed,
                                              const std::function<void(uint64_t)>& share_planned) {
  if (options.zstd) return InvalidArgumentError(path + ": several processes write a plain zip; compress it afterwards");
  std::unique_ptr<SharedOutputFile> file;
  Status made;
  if (co.rank() == 0) {
    auto created = SharedOutputFile::Create(path, options.durability);
    if (created.ok()) {
      file = std::move(*created);
    } else {
      made = created.status();
    }
  }
  OPTSTATE_RETURN_IF_ERROR(GatherStep(co, "start", made, "").status());
  Status wrote;
  if (!file) {
    auto opened = SharedOutputFile::Open(path, options.durability);
    if (opened.ok()) {
      file = std::move(*opened);
    } else {
      wrote = opened.status();
    }
  }
  CheckpointShare share;
  if (wrote.ok()) {
    auto written = WriteCheckpointShare(cp, root, *file, options.named_after.empty() ? path : options.named_after,
                                        co.rank(), co.size(), source, release, share_planned);
    if (written.ok()) {
      share = std::move(*written);
    } else {
      wrote = written.status();
    }
  }
  if (wrote.ok()) wrote = file->Commit();  // this process's bytes, synced
  OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::string> crcs,
                            GatherStep(co, "written", wrote, wrote.ok() ? EncodeCrcs(share) : ""));
  WriteReport report = share.report;
  Status done;
  if (co.rank() == 0) {
    done = [&]() -> Status {
      size_t covered = share.written.size();
      for (size_t r = 1; r < crcs.size(); ++r) {
        OPTSTATE_ASSIGN_OR_RETURN(size_t records, SetCrcs(*share.zip, crcs[r], static_cast<int>(r)));
        covered += records;
      }
      // Every storage record has its CRC: a share nobody wrote would be a hole of zeros.
      if (covered != report.storages) {
        return InternalError(path + ": " + std::to_string(covered) + " storage records written of " +
                             std::to_string(report.storages));
      }
      file->set_writing(true);
      OPTSTATE_RETURN_IF_ERROR(share.zip->Finish());
      report.bytes = file->position();
      OPTSTATE_RETURN_IF_ERROR(file->Commit());
      return file->Publish();
    }();
  }
  auto finished = GatherStep(co, "done", done, std::to_string(report.bytes));
  if (finished.ok()) {
    OPTSTATE_ASSIGN_OR_RETURN(report.bytes, SizeFromProcessZero(*finished, path));
    return report;
  }
  const std::string why = WhyStepFailed(co, finished.status());
  if (co.rank() == 0 && done.ok()) {
    unconfirmed = why;  // every part was written and the file is in place
    return report;
  }
  // Process 0 may have published the file and been lost before it could say
  // so: the file at `path` is then the very one this process wrote into.
  std::optional<FileIdentity> now = co.rank() != 0 ? IdentityOf(path) : std::nullopt;
  if (now && file->identity() && now->SameFileAs(*file->identity())) {
    report.bytes = now->size;
    unconfirmed = CommitUnconfirmed(why, path + " is the file this process wrote into");
    return report;
  }
  return finished.status();
}

}  // namespace optstate
