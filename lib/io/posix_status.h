// Errors of POSIX calls as Status, a directory sync, the copy_file_range loop
// and the parent of a path, shared by the io layer's file code.
// Internal to lib/io.
#ifndef OPTSTATE_LIB_IO_POSIX_STATUS_H_
#define OPTSTATE_LIB_IO_POSIX_STATUS_H_

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "optstate/status.h"

namespace optstate {

// "<path>: <action>: <strerror>", kNotFound for ENOENT, else kIoError.
inline Status ErrnoStatus(const std::string& path, const char* action, int err) {
  std::string msg = path + ": " + action + ": " + std::strerror(err);
  if (err == ENOENT) return NotFoundError(std::move(msg));
  return IoError(std::move(msg));
}

// fsync of a directory after a rename into it, so the rename itself is durable.
// A failure here leaves a complete file in place, so it is not reported.
inline void SyncDirectoryAfterRename(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// The directory a path names its file in: "." for a bare name.
inline std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// What CopyFileRange did: `copied` bytes (fewer than asked when the input ended
// early), or `error` (an errno) after them. `unsupported`: the kernel cannot copy
// between these two files at all (another filesystem, a pipe...), nothing was
// copied and the caller writes the bytes itself.
struct RangeCopy {
  uint64_t copied = 0;
  int error = 0;
  bool unsupported = false;
};

// copy_file_range of `length` bytes of `in` from `in_offset` to `out`, at
// `*out_offset` (advanced) or, when it is null, at out's file position.
inline RangeCopy CopyFileRange(int in, uint64_t in_offset, int out, uint64_t* out_offset, uint64_t length) {
  RangeCopy result;
  auto in_at = static_cast<off64_t>(in_offset);
  off64_t out_at = out_offset != nullptr ? static_cast<off64_t>(*out_offset) : 0;
  while (result.copied < length) {
    ssize_t n =
        ::copy_file_range(in, &in_at, out, out_offset != nullptr ? &out_at : nullptr, length - result.copied, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && result.copied == 0 &&
        (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP || errno == EBADF)) {
      result.unsupported = true;
      break;
    }
    if (n < 0) {
      result.error = errno;
      break;
    }
    if (n == 0) break;
    result.copied += static_cast<uint64_t>(n);
  }
  if (out_offset != nullptr) *out_offset = static_cast<uint64_t>(out_at);
  return result;
}

}  // namespace optstate

#endif  // OPTSTATE_LIB_IO_POSIX_STATUS_H_
