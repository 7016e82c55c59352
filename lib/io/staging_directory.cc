#include "io/staging_directory.h"

#include "io/temporary_outputs.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace optstate {
namespace {

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(dir + ": cannot open directory: " + std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return IoError(dir + ": fsync: " + std::strerror(errno));
  return Status();
}

std::filesystem::path Parent(const std::filesystem::path& p) {
  return p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
}

}  // namespace

std::string StagingDirectory::SharedPath(const std::string& dir) {
  std::filesystem::path p(dir);
  return (Parent(p) / ("." + p.filename().string() + ".partial")).string();
}

Status StagingDirectory::OutputBusyError(const std::string& shared_path, const std::string& output) {
  return InvalidArgumentError(shared_path + ": exists: another run is writing " + output +
                              ", or one was interrupted (then remove it)");
}

Status StagingDirectory::RefuseIfBusy(const std::string& output) {
  const std::string shared_path = SharedPath(output);
  std::error_code ec;
  if (std::filesystem::exists(shared_path, ec)) return OutputBusyError(shared_path, output);
  return Status();
}

std::vector<std::string> StagingDirectory::Leftovers(const std::string& dir, const std::string& own) {
  std::filesystem::path p(dir);
  const std::string prefix = TemporaryPrefix(p.filename().string());
  std::vector<std::string> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(Parent(p), ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (name.size() == prefix.size() + 6 && name.compare(0, prefix.size(), prefix) == 0 &&
        it->is_directory(type_ec) && it->path().string() != own) {
      found.push_back(it->path().string());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

StatusOr<std::unique_ptr<StagingDirectory>> StagingDirectory::Create(const std::string& dir, bool shared) {
  std::filesystem::path final_path(dir);
  std::error_code ec;
  if (final_path.filename().empty()) return InvalidArgumentError("'" + dir + "': give the directory a name");
  if (std::filesystem::exists(final_path, ec)) {
    return InvalidArgumentError(dir + ": already exists; choose a new directory (nothing is overwritten)");
  }
  std::string parent = Parent(final_path).string();
  std::string temp;
  const std::string shared_path = SharedPath(dir);
  auto busy = [&] { return OutputBusyError(shared_path, dir); };
  if (shared) {
    temp = shared_path;
    if (::mkdir(temp.c_str(), 0755) != 0) {
      if (errno == EEXIST) return busy();
      return IoError(temp + ": cannot create: " + std::strerror(errno));
    }
  } else {
    // A leftover of a killed job holds as much as the output: refused too.
    OPTSTATE_RETURN_IF_ERROR(RefuseIfBusy(dir));
    temp = (Parent(final_path) / (TemporaryPrefix(final_path.filename().string()) + "XXXXXX")).string();
    if (::mkdtemp(temp.data()) == nullptr) {
      return IoError(temp + ": cannot create a temporary directory: " + std::strerror(errno));
    }
    // mkdtemp makes 0700 directories; the output gets the usual 0755 (less the umask).
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::chmod(temp.c_str(), 0777 & ~mask);
  }
  auto staging = std::unique_ptr<StagingDirectory>(new StagingDirectory(temp, dir, parent));
  staging->cleanup_slot_ = RememberTemporaryOutput(temp, /*is_directory=*/true);
  return staging;
}

StagingDirectory::~StagingDirectory() {
  std::error_code ec;
  if (!kept_) std::filesystem::remove_all(temp_, ec);
  ForgetTemporaryOutput(cleanup_slot_);
}

Status StagingDirectory::Keep(Durability durability) {
  if (durability == Durability::kSynced) OPTSTATE_RETURN_IF_ERROR(SyncDirectory(temp_));
  if (::rename(temp_.c_str(), final_.c_str()) != 0) {
    return IoError(final_ + ": cannot rename " + temp_ + " into place: " + std::strerror(errno));
  }
  kept_ = true;
  ForgetTemporaryOutput(cleanup_slot_);
  cleanup_slot_ = -1;
  return durability == Durability::kSynced ? SyncDirectory(parent_) : Status();
}

StatusOr<ScratchFile> ScratchFile::Create(const std::string& directory_name, const std::string& file_name) {
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<StagingDirectory> directory, StagingDirectory::Create(directory_name, false));
  ScratchFile file;
  file.path = directory->path() + "/" + file_name;
  file.directory = std::move(directory);
  return file;
}

}  // namespace optstate
