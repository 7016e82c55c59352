// `optstate collisions FILE [--manifest M | --model F]`: which optimizer state belongs to which
// parameter, which parameters had their state merged, and what is orphaned.
#ifndef OPTSTATE_TOOLS_COLLISIONS_COMMAND_H_
#define OPTSTATE_TOOLS_COLLISIONS_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "shared_flags.h"

namespace optstate::tools {

struct CollisionsOptions : StateInputs {
  std::string path;                  // the first of paths
  bool json = false;
};

// Exit 0 when every state entry belongs to exactly one parameter, 1 when there
// are collisions, orphans or ambiguous keys, 2 when the job cannot be done.
int RunCollisions(const CollisionsOptions& options, CommandOutput& output);
CommandRunner AddCollisionsCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_COLLISIONS_COMMAND_H_
