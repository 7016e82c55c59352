// Ctrl-C, SIGTERM (a scheduler's preemption) and SIGHUP end a run without
// leaving partial outputs: the handler removes the temporary files and staging
// directories the library has open, then lets the signal end the process as
// it would have (exit status 128 + signal).
#ifndef OPTSTATE_TOOLS_INTERRUPT_CLEANUP_H_
#define OPTSTATE_TOOLS_INTERRUPT_CLEANUP_H_

#include <functional>

namespace optstate::tools {

// Also installs ExitCleanlyOnTruncatedInput.
void RemoveOutputsOnInterrupt();

// A SIGBUS from reading a mapped input (the file truncated or replaced while
// read) ends the run with "optstate: error: truncated input: FILE: ... byte offset N"
// on stderr, temporary outputs removed, exit 2 (mapped_ranges.h).
void ExitCleanlyOnTruncatedInput();

// For a process of a distributed job: on a signal, `tell_others(signal)` runs
// first (on a helper thread, given at most 3 s), so that the job's other
// processes stop waiting for this one; then the cleanup above. Pass an empty
// function before what `tell_others` uses is destroyed.
void TellOthersOnInterrupt(std::function<void(int signal)> tell_others);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_INTERRUPT_CLEANUP_H_
