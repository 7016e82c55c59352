// Files in and out, with the two guarantees users rely on:
//   - inputs are opened read-only and never modified;
//   - an output appears at its final path complete, or not at all.
//
// MappedFile maps an input read-only so that tensor bytes are paged in only when
// read (a 40 GB checkpoint costs nothing until its data is touched).
// AtomicFileWriter writes to a temporary file in the target's own directory (so
// the final rename never crosses a filesystem), fsyncs it, and renames it over
// the target on Commit(). Destroying an uncommitted writer removes the temporary.
// The temporary is unnamed (O_TMPFILE) where the filesystem allows, so a run
// killed outright leaves nothing; it gets a name only for the final rename.
#ifndef OPTSTATE_FILE_IO_H_
#define OPTSTATE_FILE_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "optstate/status.h"

namespace optstate {

// Bytes in memory.
using ByteSpan = std::span<const std::byte>;

// Views a string's bytes (for tests and small in-memory inputs).
inline ByteSpan AsBytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
inline std::string_view AsChars(ByteSpan b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Bytes of an open file: what copy_file_range needs.
struct FileRange {
  int fd = -1;
  uint64_t offset = 0;
};

// One part of a record written from several places (a DCP tensor from its chunks).
struct RecordPiece {
  ByteSpan data;                    // the bytes, written from memory unless copied by the kernel
  std::optional<uint32_t> crc;      // their CRC-32 when already known (from the zip they come from)
  std::optional<FileRange> source;  // where they lie in a file: with `crc`, the kernel copies them
};

class MappedFile {
 public:
  // Maps `path` read-only. Errors: kNotFound, kIoError (with errno text), and
  // kInvalidArgument for a directory.
  static StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  ByteSpan bytes() const { return {static_cast<const std::byte*>(addr_), size_}; }
  // Tells the kernel the pages of `range` (within bytes()) will not be needed
  // again soon, so copying a 40 GB file does not leave 40 GB resident. The
  // mapping is read-only and private: dropped pages are re-read if touched.
  void ReleasePages(ByteSpan range) const;
  // Unmaps every page within `margin` bytes of `range`, partial ones included.
  // For a small read (a zip local header) next to data the kernel copies: the
  // page cache holds that data in large folios (up to 2 MiB with an 8 MiB
  // readahead), and touching one byte of a folio maps all of it, so 196 header
  // reads left ~220 MiB resident. Always safe: the mapping is read-only.
  void ReleasePagesAround(ByteSpan range, uint64_t margin) const;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The read-only descriptor behind the mapping, for in-kernel copies.
  int fd() const { return fd_; }

 private:
  MappedFile(std::string path, int fd, void* addr, uint64_t size)
      : path_(std::move(path)), fd_(fd), addr_(addr), size_(size) {}
  void Release();

  std::string path_;
  int fd_ = -1;
  void* addr_ = nullptr;  // nullptr for an empty file
  uint64_t size_ = 0;
};

// The largest page-cache folio a fault may map whole (a PMD on x86-64).
constexpr uint64_t kLargeFolioBytes = 2u << 20;

// The most zip records a checkpoint may hold (ReadOptions::max_zip_entries): a
// torch.save of 10^6 parameters with Adam state holds 4 * 10^6; each takes at
// least 46 bytes of central directory, checked before anything is kept.
constexpr uint64_t kDefaultMaxZipEntries = 16'000'000;

// The input pages many small reads went through (records of a few hundred
// bytes, 4 * 10^5 of them in a save of 10^5 parameters), released a stretch
// at a time (one madvise per 8 MiB rather than one per read) so that resident
// memory stays bounded whatever the number of records. `Input` is a
// MappedFile or anything with its ReleasePagesAround.
template <typename Input>
class ReleaseInBatches {
 public:
  explicit ReleaseInBatches(const Input& input) : input_(input) {}
  ReleaseInBatches(const ReleaseInBatches&) = delete;
  ReleaseInBatches& operator=(const ReleaseInBatches&) = delete;
  ~ReleaseInBatches() { Flush(); }

  void Add(ByteSpan read) {
    const std::byte* lo = read.data();
    const std::byte* hi = read.data() + read.size();
    // Reads usually follow each other in the file; one that does not starts a new stretch.
    if (lo_ != nullptr && (lo + kStretch < lo_ || hi > hi_ + kStretch)) Flush();
    if (lo_ == nullptr) {
      lo_ = lo;
      hi_ = hi;
    }
    lo_ = lo < lo_ ? lo : lo_;
    hi_ = hi > hi_ ? hi : hi_;
    if (static_cast<uint64_t>(hi_ - lo_) >= kStretch) Flush();
  }
  void Flush() {
    if (lo_ == nullptr) return;
    input_.ReleasePagesAround(ByteSpan(lo_, static_cast<size_t>(hi_ - lo_)), kLargeFolioBytes);
    lo_ = hi_ = nullptr;
  }

 private:
  static constexpr uint64_t kStretch = 8u << 20;
  const Input& input_;
  const std::byte* lo_ = nullptr;
  const std::byte* hi_ = nullptr;
};

// Where writers put bytes: an atomic file, or a compressor in front of one.
// position() counts the bytes given to Write (before any compression), which is
// what zip offsets refer to.
class OutputStream {
 public:
  virtual ~OutputStream() = default;
  virtual Status Write(ByteSpan data) = 0;
  // Appends `length` bytes of the file `fd` from `offset` without passing them
  // through user space (copy_file_range). Returns how many bytes it appended:
  // fewer than `length` (0 where the stream or filesystem cannot) means the
  // caller writes the rest itself.
  virtual StatusOr<uint64_t> CopyFromFile(int /*fd*/, uint64_t /*offset*/, uint64_t /*length*/) { return 0; }
  virtual uint64_t position() const = 0;
  // Completes the output; after an error nothing is left at the final path.
  virtual Status Commit() = 0;
};

// Compresses everything written with zstd (level 3, checksummed frames) into
// `sink`. The decompressed content equals what was written.
StatusOr<std::unique_ptr<OutputStream>> MakeZstdOutput(std::unique_ptr<OutputStream> sink);

// Removes every temporary output this process has open (AtomicFileWriter
// temporaries, staging directories) without running their owners' code: for
// a signal handler, so an interrupted run leaves nothing behind. Only
// async-signal-safe calls; the process must end right after.
void RemoveTemporaryOutputs();

// Stopping long work on request, for a program that runs jobs in-process (the
// Python package on KeyboardInterrupt): after RequestCancellation() every
// output write, every block of tensor values read, and every 2^16 pickle
// opcodes or zip directory records read fails with kCancelled,
// so the job ends through its ordinary failure path and leaves no output.
// Process-wide; ClearCancellation() before the next job.
void RequestCancellation();
void ClearCancellation();
bool CancellationRequested();

// kSynced: the output is on disk before it takes the final name, so a crash
// leaves the old file or the complete new one. kUnsynced (--no-sync, for
// scratch outputs): still renamed only when complete, but the kernel writes it
// back whenever it likes, so a crash soon after may leave a partial file.
enum class Durability { kSynced, kUnsynced };

class AtomicFileWriter : public OutputStream {
 public:
  // Creates the temporary next to `final_path`: unnamed where O_TMPFILE works,
  // else "<dir>/.<name>.tmp-XXXXXX" (which a SIGKILL would leave behind).
  static StatusOr<std::unique_ptr<AtomicFileWriter>> Create(const std::string& final_path,
                                                            Durability durability = Durability::kSynced);
  ~AtomicFileWriter() override;  // removes the temporary unless committed

  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Every 64 MiB, asks the kernel to start writing back what came before, so
  // that dirty pages stay bounded and Commit's fsync has little left to do.
  Status Write(ByteSpan data) override;
  StatusOr<uint64_t> CopyFromFile(int fd, uint64_t offset, uint64_t length) override;
  uint64_t bytes_written() const { return written_; }
  uint64_t position() const override { return written_; }
  // fsync, close, rename over final_path, fsync the directory (no fsyncs when
  // kUnsynced). After an error the temporary is removed and final_path is untouched.
  Status Commit() override;

  const std::string& final_path() const { return final_path_; }

 private:
  AtomicFileWriter(std::string final_path, std::string temp_path, int fd, Durability durability)
      : final_path_(std::move(final_path)), temp_path_(std::move(temp_path)), fd_(fd), durability_(durability) {}
  void Abandon();
  void StartWriteBack();
  Status NameUnnamedFile();

  std::string final_path_;
  std::string temp_path_;  // empty while the temporary is unnamed
  int fd_ = -1;
  int cleanup_slot_ = -1;  // in the registry RemoveTemporaryOutputs reads
  uint64_t written_ = 0;
  uint64_t flushed_ = 0;  // bytes handed to write-back so far
  Durability durability_ = Durability::kSynced;
  bool committed_ = false;
};

// Outputs that must appear together or not at all (one file per rank): each
// is written complete under a hidden name beside its final path
// ("<dir>/.<name>.group-pending"), and Commit() renames them all into place
// (fsyncing their directories when kSynced). Destroying the group removes
// every pending file not committed. A kill between two renames can leave the
// first in place; nothing else is ever half there.
class OutputGroup {
 public:
  OutputGroup() = default;
  OutputGroup(const OutputGroup&) = delete;
  OutputGroup& operator=(const OutputGroup&) = delete;
  ~OutputGroup();

  // The path to write `final_path`'s content to.
  std::string Pending(const std::string& final_path);
  Status Commit(Durability durability);

 private:
  std::vector<std::pair<std::string, std::string>> files_;  // pending, final
  size_t committed_ = 0;
};

// For a SIGBUS handler: a file truncated or replaced while it is mapped (a
// trainer still writing it, a checkpoint rotated away) makes the next read of a
// vanished page raise SIGBUS; the handler asks here which file and offset the
// fault hit, so it can say so and exit 2 instead of dying with the signal.
// Async-signal-safe: the path of the mapping holding `address` (NUL-terminated,
// at most 511 bytes, cut if longer) and the offset of `address` in that file.
bool FindMappedRange(const void* address, const char** path, uint64_t* offset);

class StagingDirectory;  // lib/io/staging_directory.h

// A file to be made in a scratch directory of its own (`directory_name` plus a
// unique suffix), the directory removed with the last copy of this: a DCP or
// ZeRO directory consolidated for a command that reads one torch.save file.
struct ScratchFile {
  std::shared_ptr<StagingDirectory> directory;
  std::string path;  // `file_name` in it, not yet written
  static StatusOr<ScratchFile> Create(const std::string& directory_name, const std::string& file_name);
};

}  // namespace optstate

#endif  // OPTSTATE_FILE_IO_H_
