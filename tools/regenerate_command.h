// `optstate regenerate (--synthetic SIZE | --manifest M | --model F) -o OUT`:
// a realistic AdamW checkpoint, in any key scheme, without Python.
#ifndef OPTSTATE_TOOLS_REGENERATE_COMMAND_H_
#define OPTSTATE_TOOLS_REGENERATE_COMMAND_H_

#include <string>

#include "command.h"
#include "optstate/regenerate.h"

namespace optstate::tools {

struct RegenerateCommandOptions {
  std::string output;
  std::string synthetic;   // a size: "4GiB"
  std::string manifest;
  std::string model;
  std::string model_key;
  std::string key_scheme = "index";
  std::string manifest_out;  // where to write the parameters with their data_ptr
  int threads = 0;
  std::string isa = "auto";
  bool no_sync = false;
  bool zstd = false;
  bool json = false;
  bool quiet = false;
  RegenerateOptions run;
};

// Exit 0 written; 2 could not do the job.
int RunRegenerate(const RegenerateCommandOptions& options, CommandOutput& output);
CommandRunner AddRegenerateCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_REGENERATE_COMMAND_H_
