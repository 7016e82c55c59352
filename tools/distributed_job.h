// One process of a --distributed job (reshard, export, consolidate under
// torchrun or srun), or the whole job when alone: joining the others, telling
// them when interrupted, ending a run left stuck by a fault, agreeing to start.
#ifndef OPTSTATE_TOOLS_DISTRIBUTED_JOB_H_
#define OPTSTATE_TOOLS_DISTRIBUTED_JOB_H_

#include <functional>
#include <string>
#include <string_view>

#include "command.h"
#include "optstate/coordinator.h"

namespace optstate::tools {

struct DistributedJob {
  bool distributed = false;  // --distributed: join the job; else run alone
  std::string name;          // the same in every process of the job ("<command>:<output>")
  std::string_view command;  // for error messages
  bool json = false;         // errors as JSON
};

// Connects when distributed, runs `open` (whose failure in any process fails
// every process), then `work` with the coordinator (null when alone), which
// writes its own report. A failure is reported as the fault that caused it when
// another process's silence or abort did (Coordinator::Fault). Returns the exit code.
int RunJob(const DistributedJob& job, CommandOutput& output, const std::function<Status()>& open,
           const std::function<Status(Coordinator*)>& work);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_DISTRIBUTED_JOB_H_
