// `optstate verify FILE [--model F | --manifest M]`: does the AdamW state
// belong to, and act on, the model's parameters?
#ifndef OPTSTATE_TOOLS_VERIFY_COMMAND_H_
#define OPTSTATE_TOOLS_VERIFY_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "optstate/verify.h"

namespace optstate::tools {

struct VerifyCommandOptions {
  std::string path;                 // the first of paths
  std::vector<std::string> paths;   // several: the per-rank files of one sharded save
  std::vector<std::string> models;  // --model, once per rank
  std::string state_key;
  ParamSource params;
  bool json = false;
  VerifyOptions verify;
  MatchOptions match;
  ReadOptions read;
};

// Exit 0 clean, 1 findings, 2 unreadable.
int RunVerify(const VerifyCommandOptions& options, CommandOutput& output);
CommandRunner AddVerifyCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_VERIFY_COMMAND_H_
