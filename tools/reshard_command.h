// `optstate reshard DIR -o DIR2 --world-size M`: a DCP checkpoint rewritten for
// M ranks (tensors split on dim 0 as FSDP2 shards them), bytes items carried
// over unchanged; memory holds one output chunk at a time.
#ifndef OPTSTATE_TOOLS_RESHARD_COMMAND_H_
#define OPTSTATE_TOOLS_RESHARD_COMMAND_H_

#include <string>

#include "command.h"

namespace optstate::tools {

struct ReshardOptions {
  std::string input;
  std::string output;
  int world_size = 0;
  bool json = false;
  bool no_sync = false;
  bool verify_crc = false;
  bool quiet = false;
  bool distributed = false;
};

int RunReshard(const ReshardOptions& options, CommandOutput& output);
CommandRunner AddReshardCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_RESHARD_COMMAND_H_
