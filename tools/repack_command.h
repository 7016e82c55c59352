// `optstate repack IN -o OUT`: rewrite a checkpoint through optstate's own
// writer as a canonical torch.save zip (protocol 2, 64-byte aligned stored
// records): legacy-format and .zst files become ordinary zips, and the report
// says whether torch.load(weights_only=True) will accept the result.
#ifndef OPTSTATE_TOOLS_REPACK_COMMAND_H_
#define OPTSTATE_TOOLS_REPACK_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "optstate/checkpoint.h"

namespace optstate::tools {

struct RepackOptions {
  std::string input;                // used when inputs is empty (callers that set one)
  std::vector<std::string> inputs;  // several: the per-rank files of one sharded save
  std::string output;
  bool json = false;
  bool no_sync = false;
  ReadOptions read;
};

int RunRepack(const RepackOptions& options, CommandOutput& output);
CommandRunner AddRepackCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_REPACK_COMMAND_H_
