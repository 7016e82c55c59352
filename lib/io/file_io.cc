#include "optstate/file_io.h"

#include "io/posix_status.h"
#include "io/temporary_outputs.h"
#include "io/mapped_ranges.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <zstd.h>

namespace optstate {
namespace {

std::atomic<bool> cancellation_requested{false};

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

namespace {

// An unnamed file in `dir` (O_TMPFILE): if the process is killed outright
// (SIGKILL, the OOM killer) it vanishes with the last descriptor, so not even a
// temporary is left. -1 where the filesystem or kernel cannot, or where
// /proc/self/fd (needed to give it a name at Commit) is missing.
int OpenUnnamed(const std::string& dir) {
  if (::access("/proc/self/fd", X_OK) != 0) return -1;
  return ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);  // the umask applies
}

// "<dir>/.<name>.tmp-", where every temporary of final_path is made.
std::string TemporaryPathPrefix(const std::string& final_path) {
  return DirName(final_path) + "/" + TemporaryPrefix(BaseName(final_path));
}

// TemporaryPathPrefix plus six characters that differ from call to call.
std::string TemporaryName(const std::string& final_path, unsigned attempt) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t x = static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^
               static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&final_path)) ^ (uint64_t{attempt} << 40);
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  x ^= static_cast<uint64_t>(now.tv_nsec) * 0xBF58476D1CE4E5B9ull;
  std::string name = TemporaryPathPrefix(final_path);
  for (int i = 0; i < 6; ++i, x /= 62) name += kAlphabet[x % 62];
  return name;
}

}  // namespace

StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(const std::string& final_path,
                                                                     Durability durability) {
  if (final_path.empty() || final_path.back() == '/') {
    return InvalidArgumentError("'" + final_path + "': output path names no file");
  }
  std::string temp_path;  // stays empty for an unnamed file
  int fd = OpenUnnamed(DirName(final_path));
  if (fd < 0 && errno == ENOENT) return ErrnoStatus(final_path, "cannot create a temporary file beside it", errno);
  if (fd < 0) {  // a named temporary instead; SIGKILL then leaves it behind
    std::string pattern = TemporaryPathPrefix(final_path) + "XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    fd = ::mkostemp(buf.data(), O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(final_path, "cannot create a temporary file beside it", errno);
    // mkostemp makes 0600 files; outputs get the usual 0644 (less the umask).
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
    temp_path = buf.data();
  }
  auto* writer = new (std::nothrow) AtomicFileWriter(final_path, temp_path, fd, durability);
  if (writer == nullptr) {
    ::close(fd);
    if (!temp_path.empty()) ::unlink(temp_path.c_str());
    return LimitExceededError(final_path + ": out of memory");
  }
  if (!temp_path.empty()) writer->cleanup_slot_ = RememberTemporaryOutput(temp_path, /*is_directory=*/false);
  return std::unique_ptr<AtomicFileWriter>(writer);
}

// Links the finished unnamed file under a fresh temporary name, so that the
// rename below can replace final_path atomically (linkat cannot replace).
Status AtomicFileWriter::NameUnnamedFile() {
  char proc_path[48];
  std::snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", fd_);
  for (unsigned attempt = 0; attempt < 100; ++attempt) {
    std::string name = TemporaryName(final_path_, attempt);
    // Registered before it exists: a signal in between unlinks a missing name.
    cleanup_slot_ = RememberTemporaryOutput(name, /*is_directory=*/false);
    if (::linkat(AT_FDCWD, proc_path, AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      temp_path_ = std::move(name);
      return Status();
    }
    int err = errno;
    ForgetTemporaryOutput(cleanup_slot_);
    cleanup_slot_ = -1;
    if (err != EEXIST) return ErrnoStatus(final_path_, "cannot give the finished file a name", err);
  }
  return ErrnoStatus(final_path_, "cannot give the finished file a name", EEXIST);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) Abandon();
}

void AtomicFileWriter::Abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
  ForgetTemporaryOutput(cleanup_slot_);
  cleanup_slot_ = -1;
}

void RequestCancellation() { cancellation_requested.store(true, std::memory_order_relaxed); }
void ClearCancellation() { cancellation_requested.store(false, std::memory_order_relaxed); }
bool CancellationRequested() { return cancellation_requested.load(std::memory_order_relaxed); }

Status AtomicFileWriter::Write(ByteSpan data) {
  if (fd_ < 0) return InternalError(final_path_ + ": write after commit or failure");
  if (CancellationRequested()) {
    Abandon();
    return CancelledError(final_path_ + ": cancelled; nothing written");
  }
  const std::byte* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      Abandon();
      const char* source = nullptr;
      uint64_t offset = 0;
      if (err == EFAULT && FindMappedRange(p, &source, &offset)) {
        // The kernel could not read the bytes handed to it: they are a mapped
        // input whose pages vanished (mapped_ranges.h), not a bad output.
        return TruncatedError(std::string(source) + ": the file changed while it was read (truncated or replaced): "
                              "no data at byte offset " + std::to_string(offset) + " (copying it to " + final_path_ +
                              ")");
      }
      return ErrnoStatus(final_path_, "write failed", err);
    }
    p += n;
    left -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  StartWriteBack();
  return Status();
}

StatusOr<uint64_t> AtomicFileWriter::CopyFromFile(int fd, uint64_t offset, uint64_t length) {
  if (fd_ < 0) return InternalError(final_path_ + ": write after commit or failure");
  if (CancellationRequested()) {
    Abandon();
    return CancelledError(final_path_ + ": cancelled; nothing written");
  }
  RangeCopy copy = CopyFileRange(fd, offset, fd_, nullptr, length);
  written_ += copy.copied;
  if (copy.error != 0) {
    Abandon();
    return ErrnoStatus(final_path_, "copy failed", copy.error);
  }
  StartWriteBack();
  return copy.copied;  // 0 when unsupported: the caller writes instead
}

void AtomicFileWriter::StartWriteBack() {
  constexpr uint64_t kWriteBackStep = 64ull << 20;
  if (durability_ == Durability::kSynced && written_ - flushed_ >= kWriteBackStep) {
    // Asynchronous: starts write-back of the finished range and returns.
    ::sync_file_range(fd_, static_cast<off64_t>(flushed_), static_cast<off64_t>(written_ - flushed_),
                      SYNC_FILE_RANGE_WRITE);
    flushed_ = written_;
  }
}

Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return InternalError(final_path_ + ": commit after commit or failure");
  bool sync = durability_ == Durability::kSynced;
  if (sync && ::fsync(fd_) != 0) {
    int err = errno;
    Abandon();
    return ErrnoStatus(final_path_, "fsync failed", err);
  }
  if (temp_path_.empty()) {
    Status named = NameUnnamedFile();
    if (!named.ok()) {
      Abandon();
      return named;
    }
  }
  if (::close(fd_) != 0) {
    int err = errno;
    fd_ = -1;
    Abandon();
    return ErrnoStatus(final_path_, "close failed", err);
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    int err = errno;
    Abandon();
    return ErrnoStatus(final_path_, "rename failed", err);
  }
  committed_ = true;
  ForgetTemporaryOutput(cleanup_slot_);
  cleanup_slot_ = -1;
  if (sync) SyncDirectoryAfterRename(DirName(final_path_));
  return Status();
}

namespace {

class ZstdOutput : public OutputStream {
 public:
  ZstdOutput(std::unique_ptr<OutputStream> sink, ZSTD_CCtx* cctx) : sink_(std::move(sink)), cctx_(cctx) {}
  ~ZstdOutput() override { ZSTD_freeCCtx(cctx_); }

  Status Write(ByteSpan data) override {
    position_ += data.size();
    return Pump(data, ZSTD_e_continue);
  }
  uint64_t position() const override { return position_; }
  Status Commit() override {
    OPTSTATE_RETURN_IF_ERROR(Pump({}, ZSTD_e_end));
    return sink_->Commit();
  }

 private:
  Status Pump(ByteSpan data, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{data.data(), data.size(), 0};
    std::vector<std::byte> buf(ZSTD_CStreamOutSize());
    while (true) {
      ZSTD_outBuffer out{buf.data(), buf.size(), 0};
      size_t left = ZSTD_compressStream2(cctx_, &out, &in, mode);
      if (ZSTD_isError(left)) return InternalError(std::string("zstd: ") + ZSTD_getErrorName(left));
      OPTSTATE_RETURN_IF_ERROR(sink_->Write(ByteSpan(buf.data(), out.pos)));
      bool done = mode == ZSTD_e_end ? left == 0 : in.pos == in.size;
      if (done) return Status();
    }
  }

  std::unique_ptr<OutputStream> sink_;
  ZSTD_CCtx* cctx_;
  uint64_t position_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<OutputStream>> MakeZstdOutput(std::unique_ptr<OutputStream> sink) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (cctx == nullptr) return LimitExceededError("out of memory for a zstd compressor");
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  return std::unique_ptr<OutputStream>(new ZstdOutput(std::move(sink), cctx));
}

std::string OutputGroup::Pending(const std::string& final_path) {
  size_t slash = final_path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : final_path.substr(0, slash + 1);
  std::string pending = dir + "." + BaseName(final_path) + ".group-pending";
  files_.emplace_back(pending, final_path);
  return pending;
}

Status OutputGroup::Commit(Durability durability) {
  for (; committed_ < files_.size(); ++committed_) {
    const auto& [pending, final_path] = files_[committed_];
    if (::rename(pending.c_str(), final_path.c_str()) != 0) {
      int err = errno;
      return ErrnoStatus(final_path, ("rename from " + pending + " failed" +
                                      (committed_ > 0 ? " (the outputs before it are in place)" : ""))
                                         .c_str(),
                         err);
    }
    if (durability == Durability::kSynced) SyncDirectoryAfterRename(DirName(final_path));
  }
  return Status();
}

OutputGroup::~OutputGroup() {
  for (size_t i = committed_; i < files_.size(); ++i) ::unlink(files_[i].first.c_str());
}

}  // namespace optstate
