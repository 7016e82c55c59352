#include "io/shared_output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "io/posix_status.h"
#include "io/staging_directory.h"
#include "io/temporary_outputs.h"

namespace optstate {
namespace {

// Writes smaller than this gather in one buffer (local headers, descriptors,
// small records: a checkpoint of 10^5 parameters has 4 * 10^5 records).
constexpr size_t kPassThrough = 64 << 10;
constexpr size_t kBuffer = 1 << 20;

}  // namespace

SharedOutputFile::SharedOutputFile(std::string final_path, std::string temp_path, int fd, bool owner,
                                   Durability durability)
    : final_path_(std::move(final_path)),
      temp_path_(std::move(temp_path)),
      fd_(fd),
      owner_(owner),
      durability_(durability),
      identity_(IdentityOf(fd_)) {
  if (owner_) cleanup_slot_ = RememberTemporaryOutput(temp_path_, /*is_directory=*/false);
}

StatusOr<std::unique_ptr<SharedOutputFile>> SharedOutputFile::Create(const std::string& final_path,
                                                                     Durability durability) {
  const std::string temp = StagingDirectory::SharedPath(final_path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0 && errno == EEXIST) return StagingDirectory::OutputBusyError(temp, final_path);
  if (fd < 0) return ErrnoStatus(temp, "cannot create", errno);
  return std::unique_ptr<SharedOutputFile>(new SharedOutputFile(final_path, temp, fd, true, durability));
}

StatusOr<std::unique_ptr<SharedOutputFile>> SharedOutputFile::Open(const std::string& final_path,
                                                                   Durability durability) {
  const std::string temp = StagingDirectory::SharedPath(final_path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(temp, "cannot open the file process 0 created", errno);
  return std::unique_ptr<SharedOutputFile>(new SharedOutputFile(final_path, temp, fd, false, durability));
}

SharedOutputFile::~SharedOutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (owner_ && !published_) ::unlink(temp_path_.c_str());
  ForgetTemporaryOutput(cleanup_slot_);
}

void SharedOutputFile::set_writing(bool writing) { writing_ = writing; }

Status SharedOutputFile::Fail(Status status) {
  pending_.clear();
  return status;
}

Status SharedOutputFile::WriteAt(ByteSpan data, uint64_t at) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(ErrnoStatus(temp_path_, "write failed", n < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(n);
  }
  return Status();
}

Status SharedOutputFile::Flush() {
  if (pending_.empty()) return Status();
  Status s = WriteAt(ByteSpan(pending_.data(), pending_.size()), pending_at_);
  pending_.clear();
  return s;
}

Status SharedOutputFile::Write(ByteSpan data) {
  if (CancellationRequested()) return Fail(CancelledError(final_path_ + ": cancelled; nothing written"));
  const uint64_t at = position_;
  position_ += data.size();
  if (!writing_ || data.empty()) return Status();
  if (!pending_.empty() && pending_at_ + pending_.size() != at) OPTSTATE_RETURN_IF_ERROR(Flush());
  if (pending_.empty()) pending_at_ = at;
  if (data.size() < kPassThrough) {
    pending_.insert(pending_.end(), data.begin(), data.end());
    return pending_.size() >= kBuffer ? Flush() : Status();
  }
  OPTSTATE_RETURN_IF_ERROR(Flush());
  return WriteAt(data, at);
}

StatusOr<uint64_t> SharedOutputFile::CopyFromFile(int fd, uint64_t offset, uint64_t length) {
  if (!writing_) {
    position_ += length;
    return length;
  }
  if (CancellationRequested()) return Fail(CancelledError(final_path_ + ": cancelled; nothing written"));
  OPTSTATE_RETURN_IF_ERROR(Flush());
  RangeCopy copy = CopyFileRange(fd, offset, fd_, &position_, length);
  if (copy.error != 0) return Fail(ErrnoStatus(temp_path_, "copy failed", copy.error));
  return copy.copied;  // 0 when unsupported: the caller writes instead
}

Status SharedOutputFile::Commit() {
  OPTSTATE_RETURN_IF_ERROR(Flush());
  if (durability_ == Durability::kSynced && ::fsync(fd_) != 0) return ErrnoStatus(temp_path_, "fsync failed", errno);
  return Status();
}

Status SharedOutputFile::Publish() {
  if (!owner_) return InternalError(final_path_ + ": only the process that created it publishes it");
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) return ErrnoStatus(final_path_, "rename failed", errno);
  published_ = true;
  ForgetTemporaryOutput(cleanup_slot_);
  cleanup_slot_ = -1;
  if (durability_ == Durability::kSynced) SyncDirectoryAfterRename(DirName(final_path_));
  return Status();
}

}  // namespace optstate
