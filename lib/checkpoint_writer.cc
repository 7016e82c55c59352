#include "optstate/checkpoint_writer.h"

#include "optstate/pickle_writer.h"
#include "optstate/zip_writer.h"

#include <filesystem>

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

StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, NodeId root, const std::string& path,
                                      const WriteOptions& options) {
  return WriteCheckpoint(input, input.checkpoint(), root, path, options);
}

StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, const Checkpoint& cp, NodeId root,
                                      const std::string& path, const WriteOptions& options) {
  auto release = [&input](ByteSpan chunk) { input.ReleasePages(chunk); };
  OPTSTATE_ASSIGN_OR_RETURN(PickleOutput pickle, WriteTorchPickle(cp, root));
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<ZipWriter> zip, ZipWriter::Create(path, ArchiveName(path), options.zstd));
  WriteReport report;
  report.unsafe_globals = pickle.unsafe_globals;
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
    OPTSTATE_RETURN_IF_ERROR(zip->AddRecord("data/" + std::to_string(key), data, release));
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
