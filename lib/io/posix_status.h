// Errors of POSIX calls as Status, and a directory sync, shared by the io
// layer's file code.
// Internal to lib/io.
#ifndef OPTSTATE_LIB_IO_POSIX_STATUS_H_
#define OPTSTATE_LIB_IO_POSIX_STATUS_H_

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace optstate

#endif  // OPTSTATE_LIB_IO_POSIX_STATUS_H_
