// The optstate binary: builds the command tree and runs the chosen subcommand.
// Everything else lives in the subcommand files and in lib/. A --distributed
// run is handed to optstate-dist (beside this binary), which links LibTorch's
// c10d: the everyday commands stay free of LibTorch's start-up cost.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include "cli_app.h"
#include "command.h"
#include "interrupt_cleanup.h"

namespace {

// glibc's malloc asks the kernel for transparent huge pages for its heaps
// when the glibc.malloc.hugetlb tunable is 1 (glibc 2.35 and later; Debian
// leaves THP to madvise). Reading a checkpoint of 10^5 parameters fills a few
// hundred MB of heap, and 4 KiB at a time every page is a fault: on the
// 2-core virtual machines we measure on, validate of that file took 2.88 s
// with 4 KiB pages and 2.17 s with huge ones, of 4 * 10^4 small tensors 0.40
// and 0.31 s, peak RSS within 1%. Tunables are read only as a program starts,
// so the binary starts itself again, once, with the tunable added, unless
// GLIBC_TUNABLES already says what to do with it (then that stands).
// AddressSanitizer's allocator replaces glibc's and ignores the tunable: a
// sanitized build would pay the second start for nothing.
void StartAgainWithHugePageHeap(char** argv) {
#if defined(__SANITIZE_ADDRESS__)
  (void)argv;
#else
  const char* set = std::getenv("GLIBC_TUNABLES");
  const std::string_view tunables = set != nullptr ? set : "";
  if (tunables.find("glibc.malloc.hugetlb") != std::string_view::npos) return;
  const std::string with = std::string(tunables) + (tunables.empty() ? "" : ":") + "glibc.malloc.hugetlb=1";
  if (::setenv("GLIBC_TUNABLES", with.c_str(), 1) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only when it failed: go on as we are
#endif
}

}  // namespace

int main(int argc, char** argv) {
  StartAgainWithHugePageHeap(argv);
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
