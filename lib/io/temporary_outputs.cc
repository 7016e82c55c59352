#include "io/temporary_outputs.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "optstate/file_io.h"

namespace optstate {
namespace {

// Fixed storage: the signal handler may not allocate or take locks. A slot is
// claimed (state 1) while its path is copied, and published (state 2) after.
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 live
  bool is_directory = false;
  char path[4096];
};
Slot slots[kSlots];

// Removes the plain files directly inside `dir`, then `dir` (staging
// directories hold no subdirectories). Only async-signal-safe calls.
void RemoveFlatDirectory(const char* dir) {
  int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buf[4096];
    for (;;) {
      long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name
        unsigned short reclen;
        std::memcpy(&reclen, buf + at + 16, sizeof reclen);
        const char* name = buf + at + 19;
        if (std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0) ::unlinkat(fd, name, 0);
        at += reclen;
      }
    }
    ::close(fd);
  }
  ::rmdir(dir);
}

}  // namespace

std::string TemporaryPrefix(const std::string& name) { return "." + name + ".tmp-"; }

int RememberTemporaryOutput(const std::string& path, bool is_directory) {
  if (path.size() >= sizeof(Slot::path)) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].is_directory = is_directory;
    slots[i].state.store(2);
    return i;
  }
  return -1;
}

void ForgetTemporaryOutput(int slot) {
  if (slot >= 0 && slot < kSlots) slots[slot].state.store(0);
}

void RemoveTemporaryOutputs() {
  for (int pass = 0; pass < 2; ++pass) {  // files first: they may sit inside a staging directory
    for (Slot& s : slots) {
      if (s.state.load() != 2 || s.is_directory != (pass == 1)) continue;
      if (s.is_directory) {
        RemoveFlatDirectory(s.path);
      } else {
        ::unlink(s.path);
      }
    }
  }
}

}  // namespace optstate
