#include "cli_app.h"

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_layout.h"
#include "commands.h"
#include "terminal_safe_stream.h"

namespace optstate::tools {
namespace {

constexpr const char* kDescription =
    "optstate: read, check and repair PyTorch optimizer checkpoints without Python.\n"
    "Never executes pickle code; never modifies an input file.";

constexpr const char* kFooter =
    "\nExit codes: 0 ok, 1 findings (validate, verify, collisions, remap and migrate refusals, diff), 2 error (bad input, usage, I/O).\n"
    "Run 'optstate <command> --help' for a command's options and examples.";

}  // namespace

std::string VersionLine() {
  std::string line = std::string("optstate ") + OPTSTATE_VERSION;
  if (*kGitDescription != '\0') line.append(" (git ").append(kGitDescription).append(")");
  return line;
}

int RunCli(int argc, const char* const* argv, CommandOutput& output) {
  CLI::App app(kDescription, "optstate");
  app.formatter(StableHelpFormatter());
  app.footer(kFooter);
  app.set_version_flag("--version", VersionLine());
  app.require_subcommand(1);

  // One entry per subcommand; each registers its own flags and help.
  std::vector<std::pair<CLI::App*, CommandRunner>> commands;
  auto add = [&](CommandRunner runner) {
    // The command just added is the last subcommand of app.
    auto all = app.get_subcommands([](const CLI::App*) { return true; });
    commands.emplace_back(all.back(), std::move(runner));
  };
  for (CommandAdder add_command : kCommandAdders) add(add_command(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    output.out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    output.out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion&) {
    output.out << app.version() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // Subcommand --help is a ParseError too; CLI11 tells them apart by exit code.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      for (auto& [sub, runner] : commands) {
        if (sub->parsed()) {
          output.out << sub->help();
          return kExitOk;
        }
      }
      output.out << app.help();
      return kExitOk;
    }
    output.err << "optstate: " << e.what() << "\n"
               << "Run 'optstate --help' for usage.\n";
    return kExitError;
  }
  for (auto& [sub, runner] : commands) {
    if (sub->parsed()) return runner(output);
  }
  output.err << "optstate: no command given\nRun 'optstate --help' for usage.\n";
  return kExitError;
}

int RunCliFiltered(int argc, const char* const* argv, std::ostream& out_sink, std::ostream& err_sink) {
  TerminalSafeBuf safe_out(out_sink.rdbuf()), safe_err(err_sink.rdbuf());
  std::ostream out(&safe_out), err(&safe_err);
  CommandOutput output{out, err};
  int rc = RunCli(argc, argv, output);
  out.flush();
  err.flush();
  return rc;
}

int RunCliOnStdStreams(int argc, const char* const* argv) { return RunCliFiltered(argc, argv, std::cout, std::cerr); }

}  // namespace optstate::tools
