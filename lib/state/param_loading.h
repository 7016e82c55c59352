// Shared by state_matching.cc and rank_set.cc: the parameter list of one
// checkpoint, before any matching.
#ifndef OPTSTATE_STATE_PARAM_LOADING_H_
#define OPTSTATE_STATE_PARAM_LOADING_H_

#include <optional>
#include <string>
#include <vector>

#include "optstate/collisions.h"

namespace optstate {

// Fills m.params (and params_from, order, tied, buffers, model_file,
// model_dict) from `source` for the optimizer state m.state of m.file, which
// was opened from `checkpoint`. Errors carry the path of the file concerned.
// `manifest`: source.manifest's parameters when the caller read them already.
Status LoadParams(const std::string& checkpoint, const ParamSource& source, const ReadOptions& read,
                  MatchedState& m, std::optional<std::vector<ParamInfo>> manifest = std::nullopt);

// PrepareContentMatch (collisions.h) for m, when its parameters came from
// a model file of their own.
Status PrepareContentMatch(MatchedState& m, MatchOptions& options);

}  // namespace optstate

#endif  // OPTSTATE_STATE_PARAM_LOADING_H_
