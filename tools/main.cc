// The optstate binary: builds the command tree and runs the chosen subcommand.
// Everything else lives in the subcommand files and in lib/. A --distributed
// run is handed to optstate-dist (beside this binary), which links LibTorch's
// c10d: the everyday commands stay free of LibTorch's start-up cost.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli_app.h"
#include "command.h"
#include "interrupt_cleanup.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--distributed") != 0) continue;
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    std::string dist = (self.parent_path() / "optstate-dist").string();
    if (!ec) ::execv(dist.c_str(), argv);
    std::cerr << "optstate: error: --distributed needs " << dist << ": " << std::strerror(errno) << "\n";
    return optstate::tools::kExitError;
  }
  optstate::tools::RemoveOutputsOnInterrupt();
  return optstate::tools::RunCliOnStdStreams(argc, argv);
}
