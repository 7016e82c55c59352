// Temporary outputs that exist right now: AtomicFileWriter's "<dir>/.<name>.tmp-*"
// files and StagingDirectory's directories. They are removed on every error
// path by their owners; this registry lets the CLI's signal handler remove
// them too when the user interrupts a run (Ctrl-C, SIGTERM from a scheduler),
// so that no partial output is left behind. Internal to lib/.
#ifndef OPTSTATE_TEMPORARY_OUTPUTS_H_
#define OPTSTATE_TEMPORARY_OUTPUTS_H_

#include <string>

namespace optstate {

// Returns a slot to pass to ForgetTemporaryOutput, or -1 when all slots are in
// use (the output is then only cleaned up by its owner).
int RememberTemporaryOutput(const std::string& path, bool is_directory);
void ForgetTemporaryOutput(int slot);

}  // namespace optstate

#endif  // OPTSTATE_TEMPORARY_OUTPUTS_H_
