// The command tree of `optstate`, separate from main() so that tests can run the
// whole CLI (parsing included) in-process with captured output.
#ifndef OPTSTATE_TOOLS_CLI_APP_H_
#define OPTSTATE_TOOLS_CLI_APP_H_

#include <ostream>
#include <string>

#include "command.h"

namespace optstate::tools {

// What `--version` prints: "optstate 0.2.0", then " (git <describe>)" when built
// from a git clone (the commit, "-dirty" for uncommitted changes).
std::string VersionLine();
// Defined in git_description.cc, generated at build time; "" outside a clone.
extern const char* const kGitDescription;

// Parses argv, runs the chosen subcommand, returns the process exit code. Usage
// errors print CLI11's message and a hint to --help on err, and return kExitError.
int RunCli(int argc, const char* const* argv, CommandOutput& output);

// RunCli with every byte it writes passed through the terminal-safe filter
// (terminal_safe_stream.h) into `out` and `err`: what the binaries and the
// Python module run, so both show a checkpoint's hostile bytes the same way.
int RunCliFiltered(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// RunCliFiltered on std::cout and std::cerr: what both binaries' main() does.
int RunCliOnStdStreams(int argc, const char* const* argv);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_CLI_APP_H_
