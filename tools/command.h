// What every subcommand shares: where it writes, and what its exit code means.
//
// A subcommand is one file tools/<name>_command.cc holding, in this order,
//   constexpr const char* kName = "<name>";              // in its errors and progress
//   struct <Name>Options { ... };                        // parsed flags
//   void DeclareFlags(CLI::App&, <Name>Options&);        // binds each flag to its field
//   int Run<Name>(const <Name>Options&, CommandOutput&); // the job, rendered
//   constexpr CommandHelp kHelp = {...};                 // summary, exit codes, examples
// and, declared in commands.h, the one line that puts them together:
//   CommandRunner Add<Name>Command(CLI::App& parent) {
//     return DeclareCommand(parent, kHelp, DeclareFlags, Run<Name>);
//   }
// Run* turns library results (structs and Status) into text or JSON; it never
// touches std::cout/std::cerr directly, so tests capture both streams in-process.
#ifndef OPTSTATE_TOOLS_COMMAND_H_
#define OPTSTATE_TOOLS_COMMAND_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "optstate/coordinator.h"
#include "optstate/status.h"

namespace CLI {
class App;
}

namespace optstate::tools {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;        // done, nothing to report
inline constexpr int kExitFindings = 1;  // done, and found problems (validate, verify)
inline constexpr int kExitError = 2;     // could not do the job: bad input, bad usage, I/O

struct CommandOutput {
  std::ostream& out;
  std::ostream& err;
};

using CommandRunner = std::function<int(CommandOutput&)>;

// What `optstate <name> --help` says around the flags.
struct CommandHelp {
  const char* name;
  const char* summary;  // under the usage line
  const char* footer;   // after the flags: exit codes, notes, examples
};

// The subcommand help.name of parent, carrying its summary and footer.
CLI::App& AddSubcommand(CLI::App& parent, const CommandHelp& help);

// Declares a subcommand whose flags fill one Options (declare_flags binds each
// flag to its field) and returns what runs `run` on them once the command line
// is parsed. The options live as long as the runner.
template <typename Options, typename Run>
CommandRunner DeclareCommand(CLI::App& parent, const CommandHelp& help,
                             void (*declare_flags)(CLI::App&, Options&), Run run) {
  auto options = std::make_shared<Options>();
  declare_flags(AddSubcommand(parent, help), *options);
  return [options, run](CommandOutput& output) { return run(*options, output); };
}

// Reports a failed Status: "optstate <cmd>: error: <code>: <message>" on err, or,
// with json, {"error": {"code": ..., "message": ...}} on out (schemas/error.schema.json).
// Returns kExitError.
int ReportError(CommandOutput& output, std::string_view command, const Status& status,
                bool json);

// `doc` as indented JSON plus a newline. Strings from a file need not be UTF-8
// (zip names, pickle bytes decoded by a lenient reader): invalid sequences become
// U+FFFD instead of aborting the dump, as README's "JSON output" says.
std::string JsonText(const nlohmann::ordered_json& doc);
// Writes JsonText(doc) to out.
void WriteJson(CommandOutput& output, const nlohmann::ordered_json& doc);

// Writes `text` to `path` through a temporary file beside it (complete or not at all).
Status WriteFileAtomically(const std::string& path, std::string_view text);

// --distributed: how a command reaches the other processes of its job. The
// optstate-dist binary (which links LibTorch's c10d) installs a factory; the
// plain optstate binary hands --distributed runs over to optstate-dist.
// `job` names the job's keys in the store (command and output path).
using CoordinatorFactory = std::function<StatusOr<std::unique_ptr<Coordinator>>(const std::string& job)>;
void SetCoordinatorFactory(CoordinatorFactory factory);
StatusOr<std::unique_ptr<Coordinator>> ConnectCoordinator(const std::string& job);

// kInvalidArgument when `output` exists and is one of `inputs` (the same file
// under any name): optstate never writes over what it reads.
Status RefuseInputAsOutput(const std::vector<std::string>& inputs, const std::string& output);

// Several inputs (a rank set) go to one output each inside `dir`, which must exist.
Status RequireOutputDirectory(const std::string& dir);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_COMMAND_H_
