// `optstate validate PATH`: a checkpoint gate for CI. Exit 0 when no rule at
// error severity fires, 1 when one does, 2 when the input cannot be read.
// Text for people, --json (schemas/validate.schema.json), --junit FILE (one
// test case per rule per checkpoint) for CI systems to display.
#ifndef OPTSTATE_TOOLS_VALIDATE_COMMAND_H_
#define OPTSTATE_TOOLS_VALIDATE_COMMAND_H_

#include <string>
#include <vector>

#include "commands.h"
#include "shared_flags.h"
#include "optstate/validate.h"

namespace optstate::tools {

struct ValidateCommandOptions : StateInputs {
  std::string rules;   // rules file
  std::string junit;   // JUnit XML output
  bool json = false;
  bool no_values = false;
  bool list_rules = false;
  bool each = false;   // every path its own checkpoint; directories walked for them
  unsigned jobs = 0;   // with each: checkpoints checked at once (0: one per core)
};

int RunValidate(const ValidateCommandOptions& options, CommandOutput& output);

// One checkpoint (a file, DCP or framework directory) or one rank set, as
// `validate PATH...` without --each checks it.
int ValidateOne(const ValidateCommandOptions& options, const ValidateOptions& vo, CommandOutput& output);


// The JUnit XML document for one report (validate_junit.cc).
std::string ValidationJUnit(const ValidationReport& report);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_VALIDATE_COMMAND_H_
