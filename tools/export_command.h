// `optstate export FILE -o DIR --world-size M`: a torch.save file as a DCP
// checkpoint of M ranks, flattened as DCP flattens a state dict, so that
// dcp.load (e.g. into an FSDP2 model of world size M) takes it.
#ifndef OPTSTATE_TOOLS_EXPORT_COMMAND_H_
#define OPTSTATE_TOOLS_EXPORT_COMMAND_H_

#include <string>

#include "command.h"
#include "optstate/checkpoint.h"

namespace optstate::tools {

struct ExportOptions {
  std::string input;
  std::string output;
  int world_size = 0;
  bool json = false;
  bool no_sync = false;
  bool quiet = false;
  bool distributed = false;
  ReadOptions read;
};

int RunExport(const ExportOptions& options, CommandOutput& output);
CommandRunner AddExportCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_EXPORT_COMMAND_H_
