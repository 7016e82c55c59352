// `optstate export FILE -o DIR --world-size M`: a torch.save file as a DCP
// checkpoint of M ranks, flattened as DCP flattens a state dict, so that
// dcp.load (e.g. into an FSDP2 model of world size M) takes it.
#ifndef OPTSTATE_TOOLS_EXPORT_COMMAND_H_
#define OPTSTATE_TOOLS_EXPORT_COMMAND_H_

#include "command.h"
#include "dcp_output.h"

namespace optstate::tools {

int RunExport(DcpOutputFlags options, CommandOutput& output);
CommandRunner AddExportCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_EXPORT_COMMAND_H_
