#include "interrupt_cleanup.h"

#include <unistd.h>

#include <csignal>

#include "optstate/file_io.h"

namespace optstate::tools {
namespace {

void OnInterrupt(int sig) {
  RemoveTemporaryOutputs();
  const char note[] = "\noptstate: interrupted; nothing was written (temporary outputs removed)\n";
  (void)!::write(STDERR_FILENO, note, sizeof note - 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void RemoveOutputsOnInterrupt() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, OnInterrupt);
}

}  // namespace optstate::tools
