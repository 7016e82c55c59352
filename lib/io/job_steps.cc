#include "io/job_steps.h"

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

}  // namespace optstate
