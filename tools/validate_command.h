// `optstate validate PATH`: a checkpoint gate for CI. Exit 0 when no rule at
// error severity fires, 1 when one does, 2 when the input cannot be read.
// Text for people, --json (schemas/validate.schema.json), --junit FILE (one
// test case per rule per checkpoint) for CI systems to display.
#ifndef OPTSTATE_TOOLS_VALIDATE_COMMAND_H_
#define OPTSTATE_TOOLS_VALIDATE_COMMAND_H_

#include <string>
#include <vector>

#include "command.h"
#include "optstate/validate.h"

namespace optstate::tools {

struct ValidateCommandOptions {
  std::string path;                 // the first of paths
  std::vector<std::string> paths;   // several: the per-rank files of one sharded save
  std::vector<std::string> models;  // --model, once per rank
  std::string rules;   // rules file
  std::string junit;   // JUnit XML output
  bool json = false;
  bool no_values = false;
  bool list_rules = false;
  ReadOptions read;
  ParamSource params;  // --manifest, --model, --model-key
  std::string state_key;  // --state-key
};

int RunValidate(const ValidateCommandOptions& options, CommandOutput& output);
CommandRunner AddValidateCommand(CLI::App& parent);

// The JUnit XML document for one report (validate_junit.cc).
std::string ValidationJUnit(const ValidationReport& report);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_VALIDATE_COMMAND_H_
