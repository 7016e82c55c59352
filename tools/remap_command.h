// `optstate remap FILE [--manifest M | --model F] -o OUT`: write a checkpoint whose optimizer
// state torch.optim maps to the right parameters.
#ifndef OPTSTATE_TOOLS_REMAP_COMMAND_H_
#define OPTSTATE_TOOLS_REMAP_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "optstate/checkpoint.h"
#include "optstate/state_remap.h"

namespace optstate::tools {

struct RemapCommandOptions {
  std::string input;                 // the first of inputs
  std::vector<std::string> inputs;   // several: the per-rank files of one sharded save
  std::string output;                // a file; a directory for several inputs
  std::vector<std::string> models;   // --model, once per rank
  ParamSource params;
  std::string state_key;
  std::string to = "index";          // index | fqn
  std::string on_collision = "fail";  // fail | reset | share | drop
  std::string report;                // conservation report (JSON) path
  bool json = false;
  bool zstd = false;
  bool no_sync = false;
  MatchOptions match;
  ReadOptions read;
};

// Exit 0 written; 1 refused because state cannot be attributed (collisions under
// --on-collision fail, ambiguous keys); 2 could not do the job.
int RunRemap(const RemapCommandOptions& options, CommandOutput& output);
CommandRunner AddRemapCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_REMAP_COMMAND_H_
