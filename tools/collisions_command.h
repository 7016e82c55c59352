// `optstate collisions FILE [--manifest M | --model F]`: which optimizer state belongs to which
// parameter, which parameters had their state merged, and what is orphaned.
#ifndef OPTSTATE_TOOLS_COLLISIONS_COMMAND_H_
#define OPTSTATE_TOOLS_COLLISIONS_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "optstate/checkpoint.h"
#include "optstate/state_matching.h"

namespace optstate::tools {

struct CollisionsOptions {
  std::string path;                  // the first of paths
  std::vector<std::string> paths;    // several: the per-rank files of one sharded save
  std::vector<std::string> models;   // --model, once per rank
  ParamSource params;
  std::string state_key;  // where the optimizer state dict is; "" = find it
  bool json = false;
  MatchOptions match;
  ReadOptions read;
};

// Exit 0 when every state entry belongs to exactly one parameter, 1 when there
// are collisions, orphans or ambiguous keys, 2 when the job cannot be done.
int RunCollisions(const CollisionsOptions& options, CommandOutput& output);
CommandRunner AddCollisionsCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_COLLISIONS_COMMAND_H_
