// MappedFile: a file mapped read-only, its pages released as a reader moves on.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "io/posix_status.h"
#include "optstate/file_io.h"
#include "io/mapped_ranges.h"

namespace optstate {

StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(path, "cannot stat", err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": is a directory, expected a file");
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  void* addr = nullptr;
  if (size > 0) {
    addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(path, "cannot map", err);
    }
    RegisterMappedRange(addr, size, path);  // so a SIGBUS here can be named (mapped_ranges.h)
  }
  return MappedFile(path, fd, addr, size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), addr_(other.addr_), size_(other.size_) {
  other.fd_ = -1;
  other.addr_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
    addr_ = other.addr_;
    size_ = other.size_;
    other.addr_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { Release(); }

void MappedFile::ReleasePages(ByteSpan range) const {
  if (addr_ == nullptr || range.empty()) return;
  const auto* base = static_cast<const std::byte*>(addr_);
  if (range.data() < base || range.data() + range.size() > base + size_) return;
  // Only whole pages inside the range: a neighbouring record may still be in use.
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = (reinterpret_cast<uintptr_t>(range.data()) + page - 1) & ~(page - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(range.data()) + range.size()) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void MappedFile::ReleasePagesAround(ByteSpan range, uint64_t margin) const {
  if (addr_ == nullptr) return;
  const auto* base = static_cast<const std::byte*>(addr_);
  if (range.data() < base || range.data() + range.size() > base + size_) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(base);
  const uintptr_t hi = lo + ((size_ + page - 1) & ~(page - 1));
  uintptr_t begin = reinterpret_cast<uintptr_t>(range.data());
  uintptr_t end = begin + range.size();
  begin = begin - lo > margin ? (begin - margin) & ~(page - 1) : lo;
  end = hi - end > margin ? (end + margin + page - 1) & ~(page - 1) : hi;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void MappedFile::Release() {
  if (addr_ != nullptr) {
    UnregisterMappedRange(addr_);
    ::munmap(addr_, size_);
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  addr_ = nullptr;
  size_ = 0;
}

}  // namespace optstate
