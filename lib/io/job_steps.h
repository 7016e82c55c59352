// One step of a job of several processes: each says whether its part went
// well, every process hears every other. Internal to lib/.
#ifndef OPTSTATE_IO_JOB_STEPS_H_
#define OPTSTATE_IO_JOB_STEPS_H_

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

}  // namespace optstate

#endif  // OPTSTATE_IO_JOB_STEPS_H_
