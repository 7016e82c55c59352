// `optstate export FILE -o DIR --world-size M`: a torch.save file as a DCP
// checkpoint of M ranks, flattened as DCP flattens a state dict, so that
// dcp.load (e.g. into an FSDP2 model of world size M) takes it.
#ifndef OPTSTATE_TOOLS_EXPORT_COMMAND_H_
#define OPTSTATE_TOOLS_EXPORT_COMMAND_H_

#include <string>

#include "command.h"
#include "dcp_output.h"
#include "optstate/collisions.h"

namespace optstate::tools {

struct ExportFlags : DcpOutputFlags {
  std::string keys = "auto";  // auto | fqn | index: what index-keyed optimizer state becomes
  ParamSource params;         // where the FQNs come from
  std::string state_key;
};

int RunExport(ExportFlags options, CommandOutput& output);
CommandRunner AddExportCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_EXPORT_COMMAND_H_
