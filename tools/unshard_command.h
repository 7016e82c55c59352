// `optstate unshard FILE... -o OUT`: the per-rank files of one sharded save
// (DTensor shards) as one torch.save file of whole tensors.
#ifndef OPTSTATE_TOOLS_UNSHARD_COMMAND_H_
#define OPTSTATE_TOOLS_UNSHARD_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"

namespace optstate::tools {

struct UnshardCommandOptions {
  std::vector<std::string> inputs;
  std::string output;
  bool no_sync = false;
  bool verify_crc = false;
  bool quiet = false;
  bool json = false;
};

int RunUnshard(const UnshardCommandOptions& options, CommandOutput& output);
CommandRunner AddUnshardCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_UNSHARD_COMMAND_H_
