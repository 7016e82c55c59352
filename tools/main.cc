// The optstate binary: builds the command tree and runs the chosen subcommand.
// Everything else lives in the subcommand files and in lib/.
#include <iostream>

#include "cli_app.h"
#include "command.h"

int main(int argc, char** argv) {
  optstate::tools::CommandOutput output{std::cout, std::cerr};
  return optstate::tools::RunCli(argc, argv, output);
}
