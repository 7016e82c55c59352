// `optstate verify FILE [--model F | --manifest M]`: does the AdamW state
// belong to, and act on, the model's parameters?
#ifndef OPTSTATE_TOOLS_VERIFY_COMMAND_H_
#define OPTSTATE_TOOLS_VERIFY_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "shared_flags.h"
#include "optstate/verify.h"

namespace optstate::tools {

struct VerifyCommandOptions : StateInputs {
  std::string path;                 // the first of paths
  bool json = false;
  VerifyOptions verify;
};

// Exit 0 clean, 1 findings, 2 unreadable.
int RunVerify(const VerifyCommandOptions& options, CommandOutput& output);
CommandRunner AddVerifyCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_VERIFY_COMMAND_H_
