// A directory that appears complete or not at all: written under a temporary
// name beside its final path, synced, renamed into place by Keep(). Internal to lib/.
#ifndef OPTSTATE_STAGING_DIRECTORY_H_
#define OPTSTATE_STAGING_DIRECTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "optstate/file_io.h"
#include "optstate/status.h"

namespace optstate {

class StagingDirectory {
 public:
  // Refuses an existing `dir`. `shared`: several processes (maybe on several
  // machines sharing the filesystem) write into it, so its name must be one
  // they can all compute: "<parent>/.<name>.partial" rather than a random one.
  static StatusOr<std::unique_ptr<StagingDirectory>> Create(const std::string& dir, bool shared);
  // The name Create(dir, /*shared=*/true) uses: "<parent>/.<name>.partial".
  // SharedOutputFile names its temporary for a file output the same way.
  static std::string SharedPath(const std::string& dir);
  // What a job says when `shared_path` (SharedPath(output)) exists.
  static Status OutputBusyError(const std::string& shared_path, const std::string& output);
  // OutputBusyError when SharedPath(output) exists: a job of several processes
  // is writing `output` now, or one was killed. A single process writing the
  // same output would race it for the name.
  static Status RefuseIfBusy(const std::string& output);
  // Staging directories of `dir` that earlier runs left behind (killed before
  // they could remove them): "<parent>/.<name>.tmp-XXXXXX", sorted, excluding
  // `own`. Reported, never removed: another run may still be writing one.
  static std::vector<std::string> Leftovers(const std::string& dir, const std::string& own);

  ~StagingDirectory();  // removes the directory and its contents unless kept
  StagingDirectory(const StagingDirectory&) = delete;
  StagingDirectory& operator=(const StagingDirectory&) = delete;

  const std::string& path() const { return temp_; }
  // fsync the directory, rename it to the final path, fsync the parent.
  Status Keep(Durability durability);

 private:
  StagingDirectory(std::string temp, std::string final_path, std::string parent)
      : temp_(std::move(temp)), final_(std::move(final_path)), parent_(std::move(parent)) {}
  std::string temp_, final_, parent_;
  bool kept_ = false;
  int cleanup_slot_ = -1;  // see temporary_outputs.h
};

}  // namespace optstate

#endif  // OPTSTATE_STAGING_DIRECTORY_H_
