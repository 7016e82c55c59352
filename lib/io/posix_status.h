// Errors of POSIX calls as Status, shared by the io layer's file code.
// Internal to lib/io.
#ifndef OPTSTATE_LIB_IO_POSIX_STATUS_H_
#define OPTSTATE_LIB_IO_POSIX_STATUS_H_

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

}  // namespace optstate

#endif  // OPTSTATE_LIB_IO_POSIX_STATUS_H_
