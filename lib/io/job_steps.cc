#include "io/job_steps.h"

#include <sys/stat.h>

#include <charconv>

namespace optstate {

StatusOr<std::vector<std::string>> GatherStep(Coordinator& co, const std::string& step, const Status& mine,
                                              const std::string& payload) {
  OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            co.AllGather(step, mine.ok() ? "+" + payload : "!" + std::string(mine.ToString())));
  if (!mine.ok()) return mine;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty() || all[r][0] != '+') {
      return IoError("process " + std::to_string(r) + " of " + std::to_string(all.size()) +
                     " failed: " + (all[r].empty() ? "" : all[r].substr(1)));
    }
    all[r].erase(0, 1);
  }
  return all;
}

namespace {
FileIdentity IdentityFromStat(const struct stat& st) {
  return FileIdentity{st.st_dev, st.st_ino, static_cast<uint64_t>(st.st_size)};
}
}  // namespace

std::optional<FileIdentity> IdentityOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return IdentityFromStat(st);
}

std::optional<FileIdentity> IdentityOf(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return IdentityFromStat(st);
}

std::string WhyStepFailed(Coordinator& co, const Status& step) {
  std::string fault = co.Fault();
  return fault.empty() ? std::string(step.ToString()) : fault;
}

std::string CommitUnconfirmed(const std::string& why, const std::string& evidence) {
  return "process 0 did not confirm the commit (" + why + "); " + evidence + ", so it committed";
}

StatusOr<uint64_t> SizeFromProcessZero(const std::vector<std::string>& payloads, const std::string& what) {
  const std::string sent = payloads.empty() ? std::string() : payloads[0];
  uint64_t size = 0;
  std::from_chars_result r = std::from_chars(sent.data(), sent.data() + sent.size(), size);
  if (sent.empty() || r.ec != std::errc() || r.ptr != sent.data() + sent.size()) {
    return InternalError(what + ": process 0 sent '" + sent + "' for its size");
  }
  return size;
}

}  // namespace optstate
