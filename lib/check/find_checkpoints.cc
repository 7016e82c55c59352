// FindCheckpoints: what `validate --each` checks under the paths it is given
// (a model zoo, a sweep's outputs, every checkpoint-N/ of a run).
#include "optstate/validate.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "optstate/dcp.h"
#include "optstate/file_io.h"
#include "torch/container.h"
#include "torch/tar_format.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

// A file found by walking counts when its first bytes say torch.load (or a
// safetensors reader) would take it. One that cannot be opened counts too, so
// that validate reports why instead of the file passing unseen.
bool LooksLikeCheckpointFile(const std::string& path) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return true;
  ByteSpan bytes = file->bytes();
  return SniffContainerFormat(bytes).has_value() || (bytes.size() >= 512 && IsTarHeader(bytes.first(512)));
}

// A directory taken as one checkpoint.
bool IsCheckpointDirectory(const std::string& dir, const FindCheckpointsOptions& options) {
  if (IsDcpDirectory(dir)) return true;
  auto framework = FindFrameworkFiles(dir);
  return framework.ok() && (options.framework_directories || framework->layout == "deepspeed");
}

Status Walk(const std::string& dir, int depth, const FindCheckpointsOptions& options, CheckpointSearch& out) {
  // Deeper than any training layout; stops a bind-mount loop all the same.
  if (depth > 32) return InvalidArgumentError(dir + ": more than 32 directories deep");
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) return IoError(dir + ": cannot list: " + ec.message());
  std::sort(entries.begin(), entries.end(),
            [](const fs::directory_entry& a, const fs::directory_entry& b) { return a.path() < b.path(); });
  for (const fs::directory_entry& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".")) continue;  // .git, .cache, a DCP directory's .metadata seen from outside
    const std::string path = entry.path().string();
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) {
      if (IsCheckpointDirectory(path, options)) {
        out.checkpoints.push_back(path);
      } else {
        OPTSTATE_RETURN_IF_ERROR(Walk(path, depth + 1, options, out));
      }
    } else if (entry.is_regular_file(ec)) {
      (LooksLikeCheckpointFile(path) ? out.checkpoints : out.skipped).push_back(path);
    }
  }
  return Status();
}

}  // namespace

StatusOr<CheckpointSearch> FindCheckpoints(const std::vector<std::string>& paths,
                                           const FindCheckpointsOptions& options) {
  CheckpointSearch out;
  for (const std::string& path : paths) {
    std::error_code ec;
    fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) return NotFoundError(path + ": no such file or directory");
    if (fs::is_directory(st) && !IsCheckpointDirectory(path, options)) {
      const size_t before = out.checkpoints.size();
      OPTSTATE_RETURN_IF_ERROR(Walk(path, 0, options, out));
      if (out.checkpoints.size() == before) {
        out.empty_directories.push_back(path);
      }
    } else {
      out.checkpoints.push_back(path);
    }
  }
  return out;
}

}  // namespace optstate
