// `optstate inspect PATH`: what is inside a checkpoint, without loading tensors.
#ifndef OPTSTATE_TOOLS_INSPECT_COMMAND_H_
#define OPTSTATE_TOOLS_INSPECT_COMMAND_H_

#include <string>

#include "command.h"

namespace optstate::tools {

struct InspectOptions {
  std::string path;
  bool json = false;
  bool records = false;     // list every zip record
  bool verify_crc = false;  // recompute record CRCs (reads every byte)
};

int RunInspect(const InspectOptions& options, CommandOutput& output);
CommandRunner AddInspectCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_INSPECT_COMMAND_H_
