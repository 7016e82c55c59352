// `optstate remap FILE [--manifest M | --model F] -o OUT`: write a checkpoint whose optimizer
// state torch.optim maps to the right parameters.
#ifndef OPTSTATE_TOOLS_REMAP_COMMAND_H_
#define OPTSTATE_TOOLS_REMAP_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "shared_flags.h"
#include "optstate/collisions.h"

namespace optstate::tools {

struct RemapCommandOptions : StateInputs {
  std::string input;                 // the first of paths
  std::string output;                // a file; a directory for several inputs
  std::string to = "index";          // index | fqn
  std::string on_collision = "fail";  // fail | reset | share | drop
  std::string report;                // conservation report (JSON) path
  bool json = false;
  bool zstd = false;
  bool no_sync = false;
};

// Exit 0 written; 1 refused because state cannot be attributed (collisions under
// --on-collision fail, ambiguous keys); 2 could not do the job.
int RunRemap(const RemapCommandOptions& options, CommandOutput& output);
CommandRunner AddRemapCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_REMAP_COMMAND_H_
