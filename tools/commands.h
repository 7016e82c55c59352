// The subcommands of `optstate`, one file tools/<name>_command.cc each. Each
// Add*Command declares its flags, help and examples on `parent` and returns
// what runs it once the command line is parsed. A command's options and its
// Run function stay in its own file; inspect and validate also have a header
// because their renderers span several files and tests call them in-process.
#ifndef OPTSTATE_TOOLS_COMMANDS_H_
#define OPTSTATE_TOOLS_COMMANDS_H_

#include "command.h"

namespace optstate::tools {

// In the order `optstate --help` lists them.
CommandRunner AddInspectCommand(CLI::App& parent);
CommandRunner AddCollisionsCommand(CLI::App& parent);
CommandRunner AddRemapCommand(CLI::App& parent);
CommandRunner AddMigrateCommand(CLI::App& parent);
CommandRunner AddRepackCommand(CLI::App& parent);
CommandRunner AddRegenerateCommand(CLI::App& parent);
CommandRunner AddVerifyCommand(CLI::App& parent);
CommandRunner AddConsolidateCommand(CLI::App& parent);
CommandRunner AddReshardCommand(CLI::App& parent);
CommandRunner AddExportCommand(CLI::App& parent);
CommandRunner AddValidateCommand(CLI::App& parent);
CommandRunner AddDiffCommand(CLI::App& parent);
CommandRunner AddUnshardCommand(CLI::App& parent);

using CommandAdder = CommandRunner (*)(CLI::App& parent);
inline constexpr CommandAdder kCommandAdders[] = {
    &AddInspectCommand, &AddCollisionsCommand, &AddRemapCommand,   &AddMigrateCommand, &AddRepackCommand,
    &AddRegenerateCommand, &AddVerifyCommand, &AddConsolidateCommand, &AddReshardCommand, &AddExportCommand,
    &AddValidateCommand, &AddDiffCommand,     &AddUnshardCommand,
};

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_COMMANDS_H_
