// --each (validate, inspect): many checkpoints in one run (a model zoo, a
// sweep's outputs, every checkpoint-N/ of a run), run on several threads.
// Reports come out in the order the checkpoints were found whatever order the
// threads finish in, so the output of -j 1 and -j 8 is the same bytes.
#ifndef OPTSTATE_TOOLS_EACH_CHECKPOINT_H_
#define OPTSTATE_TOOLS_EACH_CHECKPOINT_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "command.h"
#include "optstate/validate.h"

namespace CLI {
class App;
}

namespace optstate::tools {

// --each (its help: what each path is searched for and shown as) and -j,--jobs;
// `what` is what a job does to a checkpoint ("checked", "read").
void AddEachFlags(CLI::App& cmd, bool& each, unsigned& jobs, std::string_view each_help, std::string_view what);

struct EachOptions {
  std::string_view command;  // "validate": error messages
  std::vector<std::string> paths;
  FindCheckpointsOptions find;
  unsigned jobs = 0;  // at once; 0: one per core
  bool json = false;
  bool gate = false;  // exit 1 means the checkpoint failed (validate): the summary counts them
};

// FindCheckpoints, then `run_one(path, output)` (the command as it runs on one
// path, writing to `output`) on each checkpoint found. Text: each one's output
// in the order found, then a summary naming what failed or could not be read.
// JSON: one document, {"passed", "checkpoints": [{"path", "exit_code",
// "result"}], "summary", "skipped", "empty_directories"}, with each run's own
// JSON document as its result. Returns 2 if any run did, else 1 if any did, else 0.
int RunEach(const EachOptions& options, CommandOutput& output,
            const std::function<int(const std::string& path, CommandOutput& output)>& run_one);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_EACH_CHECKPOINT_H_
