// `optstate regenerate (--synthetic SIZE | --manifest M | --model F) -o OUT`:
// a realistic optimizer checkpoint (AdamW, Adam, SGD, Adagrad or RMSprop), in
// any key scheme, without Python.
#ifndef OPTSTATE_TOOLS_REGENERATE_COMMAND_H_
#define OPTSTATE_TOOLS_REGENERATE_COMMAND_H_

#include <string>
#include <utility>
#include <vector>

#include "command.h"
#include "optstate/regenerate.h"

namespace CLI {
class Option;
}  // namespace CLI

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
  std::string optimizer = "adamw";
  RegenerateOptions run;
  // The numeric hyperparameter options: one not given takes the default of
  // the --optimizer chosen (torch's), not AdamW's.
  std::vector<std::pair<CLI::Option*, double OptimizerHyper::*>> numbers;
};

// Exit 0 written; 2 could not do the job.
int RunRegenerate(const RegenerateCommandOptions& options, CommandOutput& output);
CommandRunner AddRegenerateCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_REGENERATE_COMMAND_H_
