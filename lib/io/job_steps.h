// One step of a job of several processes: each says whether its part went
// well, every process hears every other; and how a process that missed the
// last step ('done') tells whether process 0 committed. Internal to lib/.
#ifndef OPTSTATE_IO_JOB_STEPS_H_
#define OPTSTATE_IO_JOB_STEPS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optstate/coordinator.h"
#include "optstate/status.h"

namespace optstate {

// Exchanges `payload` (or `mine`'s error) under `step`: returns every process's
// payload in rank order, or this process's error, or the first other process's
// ("process R of P failed: ...").
StatusOr<std::vector<std::string>> GatherStep(Coordinator& co, const std::string& step, const Status& mine,
                                              const std::string& payload);

// A file's device and inode, which a rename keeps: how a process recognises at
// the final path the file it wrote under a temporary name. `size` is the size
// when it was taken.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  uint64_t size = 0;
  bool SameFileAs(const FileIdentity& other) const { return device == other.device && inode == other.inode; }
};
std::optional<FileIdentity> IdentityOf(const std::string& path);
std::optional<FileIdentity> IdentityOf(int fd);

// Why a job's last step failed: the coordinator's fault when it knows one (a
// process lost, an interrupt), else the step's own error.
std::string WhyStepFailed(Coordinator& co, const Status& step);

// What a process other than 0 reports when it missed process 0's word on the
// commit (`why`) but found it done: `evidence` says what it found.
std::string CommitUnconfirmed(const std::string& why, const std::string& evidence);

// The byte count process 0 sent as its payload of a step (`payloads` as
// GatherStep returns them); kInternal naming `what` when it is not a number.
StatusOr<uint64_t> SizeFromProcessZero(const std::vector<std::string>& payloads, const std::string& what);

}  // namespace optstate

#endif  // OPTSTATE_IO_JOB_STEPS_H_
