// `optstate consolidate DIR -o FILE`: a DCP checkpoint directory as one
// torch.save file, equal to what torch's dcp_to_torch_save writes (--to fqn,
// the default), or with optimizer state keyed 0..N-1 in param_groups order so
// that torch.optim's load_state_dict takes it directly (--to index).
#ifndef OPTSTATE_TOOLS_CONSOLIDATE_COMMAND_H_
#define OPTSTATE_TOOLS_CONSOLIDATE_COMMAND_H_

#include <string>

#include "command.h"

namespace optstate::tools {

struct ConsolidateCommandOptions {
  std::string input;
  std::string output;
  std::string to = "fqn";
  bool json = false;
  bool no_sync = false;
  bool verify_crc = false;
  bool quiet = false;
};

int RunConsolidate(const ConsolidateCommandOptions& options, CommandOutput& output);
CommandRunner AddConsolidateCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_CONSOLIDATE_COMMAND_H_
