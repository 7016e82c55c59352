// The subcommands of `optstate`, one file tools/<name>_command.cc each. Each
// Add*Command declares its flags, help and examples on `parent` and returns
// what runs it once the command line is parsed. A command's options and its
// Run function stay in its own file; inspect and validate also have a header
// because their renderers span several files and tests call them in-process.
#ifndef OPTSTATE_TOOLS_COMMANDS_H_
#define OPTSTATE_TOOLS_COMMANDS_H_

#include "command.h"

namespace optstate::tools {

// Every subcommand once, in the order `optstate --help` lists them:
// X(Inspect) declares AddInspectCommand, defined in inspect_command.cc.
#define OPTSTATE_COMMANDS(X) \
  X(Inspect) X(Collisions) X(Remap) X(Migrate) X(Repack) X(Regenerate) X(Verify) X(Consolidate) X(Reshard) \
  X(Export) X(Validate) X(Diff) X(Unshard)

#define OPTSTATE_DECLARE_COMMAND(name) CommandRunner Add##name##Command(CLI::App& parent);
OPTSTATE_COMMANDS(OPTSTATE_DECLARE_COMMAND)
#undef OPTSTATE_DECLARE_COMMAND

using CommandAdder = CommandRunner (*)(CLI::App& parent);
#define OPTSTATE_COMMAND_ADDER(name) &Add##name##Command,
inline constexpr CommandAdder kCommandAdders[] = {OPTSTATE_COMMANDS(OPTSTATE_COMMAND_ADDER)};
#undef OPTSTATE_COMMAND_ADDER

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_COMMANDS_H_
