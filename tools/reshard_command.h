// `optstate reshard DIR -o DIR2 --world-size M`: a DCP checkpoint rewritten for
// M ranks (tensors split on dim 0 as FSDP2 shards them), bytes items carried
// over unchanged; memory holds one output chunk at a time.
#ifndef OPTSTATE_TOOLS_RESHARD_COMMAND_H_
#define OPTSTATE_TOOLS_RESHARD_COMMAND_H_

#include "command.h"
#include "dcp_output.h"

namespace optstate::tools {

int RunReshard(const DcpOutputFlags& options, CommandOutput& output);
CommandRunner AddReshardCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_RESHARD_COMMAND_H_
