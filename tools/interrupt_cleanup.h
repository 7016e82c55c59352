// Ctrl-C, SIGTERM (a scheduler's preemption) and SIGHUP end a run without
// leaving partial outputs: the handler removes the temporary files and staging
// directories the library has open, then lets the signal end the process as
// it would have (exit status 128 + signal).
#ifndef OPTSTATE_TOOLS_INTERRUPT_CLEANUP_H_
#define OPTSTATE_TOOLS_INTERRUPT_CLEANUP_H_

namespace optstate::tools {

void RemoveOutputsOnInterrupt();

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_INTERRUPT_CLEANUP_H_
