// `optstate migrate FILE... [--manifest M | --model F...] --to heavyball3 -o OUT`:
// legacy HeavyBall optimizer state rewritten as today's HeavyBall saves it.
#ifndef OPTSTATE_TOOLS_MIGRATE_COMMAND_H_
#define OPTSTATE_TOOLS_MIGRATE_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "shared_flags.h"

namespace optstate::tools {

struct MigrateCommandOptions : StateInputs {
  std::string output;
  std::string to = "heavyball3";
  std::string on_collision = "fail";
  std::optional<int64_t> steps;
  std::optional<int64_t> precondition_frequency;
  std::string report;
  bool json = false;
  bool no_sync = false;
};

// Exit 0 written; 1 refused because state cannot be attributed, or nothing
// would be carried over; 2 could not do the job (unsupported algorithm, bad input).
int RunMigrate(const MigrateCommandOptions& options, CommandOutput& output);
CommandRunner AddMigrateCommand(CLI::App& parent);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_MIGRATE_COMMAND_H_
