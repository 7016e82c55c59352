// Temporary outputs that exist right now: AtomicFileWriter's "<dir>/.<name>.tmp-*"
// files and StagingDirectory's directories. They are removed on every error
// path by their owners; this registry lets the CLI's signal handler remove
// them too when the user interrupts a run (Ctrl-C, SIGTERM from a scheduler),
// so that no partial output is left behind. Internal to lib/.
#ifndef OPTSTATE_TEMPORARY_OUTPUTS_H_
#define OPTSTATE_TEMPORARY_OUTPUTS_H_

#include <string>

namespace optstate {

// ".<name>.tmp-": what every temporary of the output called `name` (its last
// path component) starts with, file or directory, so that one look at the
// directory finds them all (mkostemp / mkdtemp add six characters).
std::string TemporaryPrefix(const std::string& name);

// Returns a slot to pass to ForgetTemporaryOutput, or -1 when all slots are in
// use (the output is then only cleaned up by its owner).
int RememberTemporaryOutput(const std::string& path, bool is_directory);
void ForgetTemporaryOutput(int slot);

}  // namespace optstate

#endif  // OPTSTATE_TEMPORARY_OUTPUTS_H_
