// Help and validation messages laid out by optstate, not by whichever CLI11
// built it. CLI11 changed how it prints a default (2.1: "--max-depth UINT=1000";
// 2.4: "--max-depth UINT [1000] ") and what its Range validator says ("not in
// range 1 to 5000" against "not in range [1 - 5000]"). Debian bookworm ships
// 2.1 and trixie 2.4, and the Python module is built against either, so the
// --help text, the man pages made from it and the usage errors a script may
// match would differ by distribution. These keep them one text.
#ifndef OPTSTATE_TOOLS_CLI_LAYOUT_H_
#define OPTSTATE_TOOLS_CLI_LAYOUT_H_

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace optstate::tools {

// Option columns as "--name TYPE=DEFAULT ...": set on the root app before any
// subcommand is added (subcommands take their parent's formatter).
std::shared_ptr<CLI::Formatter> StableHelpFormatter();

// An inclusive integer range. `type` is the value's label in help ("INT",
// "UINT"); the description reads "UINT in [1 - 5000]" and a value outside it
// (or no integer) "Value 0 not in range 1 to 5000".
CLI::Validator IntegerRange(int64_t lowest, int64_t highest, const std::string& type = "INT");

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_CLI_LAYOUT_H_
