// The validate rules that need the model's parameter list (validate_params.cc).
#ifndef OPTSTATE_CHECK_VALIDATE_PARAMS_H_
#define OPTSTATE_CHECK_VALIDATE_PARAMS_H_

#include <string>

#include "check/finding_sink.h"
#include "optstate/checkpoint.h"
#include "optstate/status.h"

namespace optstate {

// The rules marked needs_params, on the optimizer state of `checkpoint` (read
// from `path`, a file or a DCP directory). The parameters come from
// --manifest, --model, or the checkpoint's own model entry. Counts are
// compared first (they need no order); the matching rules run only when the
// parameter order can be decided. Every rule not run is listed as skipped with
// the reason. `bytes`: what `checkpoint` was parsed from (empty for a DCP
// directory), for (Parameter, i) keys that match by content.
// Errors: a --manifest or --model that cannot be read.
Status CheckAgainstParams(const Checkpoint& checkpoint, ByteSpan bytes, const std::string& path, FindingSink& sink);

}  // namespace optstate

#endif  // OPTSTATE_CHECK_VALIDATE_PARAMS_H_
