// One output file written by several processes at once (consolidate
// --distributed): its layout is planned up front, so each process writes its
// byte ranges where they belong with pwrite, into a temporary every process can
// name, "<dir>/.<name>.partial" (StagingDirectory::SharedPath); rank 0 creates
// it and renames it into place once everybody has written. Internal to lib/.
#ifndef OPTSTATE_SHARED_OUTPUT_FILE_H_
#define OPTSTATE_SHARED_OUTPUT_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/job_steps.h"
#include "optstate/file_io.h"
#include "optstate/status.h"

namespace optstate {

class SharedOutputFile : public OutputStream {
 public:
  // Rank 0: creates the temporary, refusing one that exists (another job is
  // writing this output, or one was killed: the message says to remove it).
  static StatusOr<std::unique_ptr<SharedOutputFile>> Create(const std::string& final_path, Durability durability);
  // The other ranks, once rank 0 has created it.
  static StatusOr<std::unique_ptr<SharedOutputFile>> Open(const std::string& final_path, Durability durability);
  ~SharedOutputFile() override;  // the creator removes the temporary unless committed

  SharedOutputFile(const SharedOutputFile&) = delete;
  SharedOutputFile& operator=(const SharedOutputFile&) = delete;

  // While not writing, Write and CopyFromFile only move the position: the
  // bytes there are another process's. Every process lays out the whole file.
  void set_writing(bool writing);
  bool writing() const { return writing_; }
  // Skips `length` bytes (another process's).
  void Skip(uint64_t length) { position_ += length; }

  Status Write(ByteSpan data) override;
  StatusOr<uint64_t> CopyFromFile(int fd, uint64_t offset, uint64_t length) override;
  uint64_t position() const override { return position_; }
  // Writes out what is buffered; with kSynced also fsyncs. Every process calls
  // this before saying it has written its part.
  Status Commit() override;
  // Rank 0, after every process has committed its part: renames the temporary
  // over the final path (and syncs the directory when kSynced).
  Status Publish();

  // Device and inode of the temporary, which the rename keeps: a process that
  // misses rank 0's word can still tell whether its bytes were published.
  const std::optional<FileIdentity>& identity() const { return identity_; }
  const std::string& final_path() const { return final_path_; }

 private:
  SharedOutputFile(std::string final_path, std::string temp_path, int fd, bool owner, Durability durability);
  Status WriteAt(ByteSpan data, uint64_t at);
  Status Flush();
  Status Fail(Status status);

  std::string final_path_, temp_path_;
  int fd_;
  bool owner_;
  Durability durability_;
  int cleanup_slot_ = -1;
  std::optional<FileIdentity> identity_;
  bool writing_ = true;
  bool published_ = false;
  uint64_t position_ = 0;
  uint64_t pending_at_ = 0;         // file offset of pending_[0]
  std::vector<std::byte> pending_;  // contiguous small writes, written together
};

}  // namespace optstate

#endif  // OPTSTATE_SHARED_OUTPUT_FILE_H_
