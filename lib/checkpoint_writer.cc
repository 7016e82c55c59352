#include "optstate/checkpoint_writer.h"

#include <algorithm>
#include <filesystem>

#include "optstate/pickle_writer.h"
#include "optstate/torch_objects.h"
#include "optstate/zip_writer.h"

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

StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, const Checkpoint& cp, NodeId root,
                                      const std::string& path, const WriteOptions& options) {
  auto release = [&input](ByteSpan chunk) { input.ReleasePages(chunk); };
  OPTSTATE_ASSIGN_OR_RETURN(PickleOutput pickle, WriteTorchPickle(cp, root));
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<ZipWriter> zip, ZipWriter::Create(path, ArchiveName(path), options.zstd, options.durability));
  WriteReport report;
  report.unsafe_globals = pickle.unsafe_globals;
  report.loadable_after_dtensor_import =
      !report.unsafe_globals.empty() &&
      std::all_of(report.unsafe_globals.begin(), report.unsafe_globals.end(), [](const std::string& g) {
        size_t dot = g.rfind('.');
        return dot != std::string::npos &&
               IsAllowedOnceDistributedTensorImported(std::string_view(g).substr(0, dot), std::string_view(g).substr(dot + 1));
      });
  OPTSTATE_RETURN_IF_ERROR(zip->AddRecord("data.pkl", AsBytes(pickle.bytes)));
  OPTSTATE_RETURN_IF_ERROR(zip->AddRecord("byteorder", AsBytes("little")));
  for (size_t key = 0; key < pickle.storages.size(); ++key) {
    const StorageRef& s = cp.storages[pickle.storages[key]];
    if (s.zero_fill) {
      OPTSTATE_RETURN_IF_ERROR(zip->AddZeroRecord("data/" + std::to_string(key), s.nbytes));
      ++report.storages;
      report.storage_bytes += s.nbytes;
      continue;
    }
    OPTSTATE_ASSIGN_OR_RETURN(ByteSpan data, StorageBytes(input.bytes(), cp, s));
    // A stored record copied whole keeps the CRC the input's directory gives it,
    // so the bytes are read once. (A wrong CRC stays as wrong as it was; remap
    // --verify-crc checks the input first.)
    std::optional<uint32_t> crc;
    if (s.zip_entry >= 0) {
      const ZipEntry& e = cp.container.zip.entries[static_cast<size_t>(s.zip_entry)];
      if (e.method == 0 && e.size == data.size()) crc = e.crc32;
    }
    OPTSTATE_RETURN_IF_ERROR(zip->AddRecord("data/" + std::to_string(key), data, release, crc,
                                            crc ? input.FileRangeOf(data) : std::nullopt));
    ++report.storages;
    report.storage_bytes += data.size();
  }
  OPTSTATE_RETURN_IF_ERROR(zip->AddRecord("version", AsBytes("3\n")));
  OPTSTATE_RETURN_IF_ERROR(zip->Finish());
  std::error_code ec;
  report.bytes = std::filesystem::file_size(path, ec);
  return report;
}

}  // namespace optstate
