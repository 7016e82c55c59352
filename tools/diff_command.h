// `optstate diff A B`: two checkpoints of one run compared, parameter by
// parameter: did it move, did its state step on; hyperparameter changes.
#ifndef OPTSTATE_TOOLS_DIFF_COMMAND_H_
#define OPTSTATE_TOOLS_DIFF_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "optstate/checkpoint_diff.h"

namespace optstate::tools {

struct DiffCommandOptions {
  std::vector<std::string> positional;  // A B: files or DCP directories
  DiffSide a, b;                        // --a / --b (rank files), --model-a / --model-b
  DiffOptions diff;
  bool json = false;
};

// Exit 0 when no parameter stood still while its state stepped, 1 when some
// did (frozen parameters), 2 when the job cannot be done.
int RunDiff(const DiffCommandOptions& options, CommandOutput& output);
CommandRunner AddDiffCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_DIFF_COMMAND_H_
