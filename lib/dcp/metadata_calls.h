// What a DCP .metadata pickle may name and call. torch reads .metadata with a
// plain pickle.load, so both are checked before the graph is read as metadata.
// Internal to lib/dcp.
#ifndef OPTSTATE_LIB_DCP_METADATA_CALLS_H_
#define OPTSTATE_LIB_DCP_METADATA_CALLS_H_

#include <string_view>

#include "optstate/pickle_graph.h"
#include "optstate/status.h"

namespace optstate {

// One of the classes and functions torch's DCP writes into a .metadata
// (module already normalized: NormalizeModule).
bool IsMetadataGlobal(std::string_view module, std::string_view name);

// kUnsupported, naming the offset, for any call DCP's own pickles never make.
Status CheckMetadataCalls(const ObjectGraph& g);

}  // namespace optstate

#endif  // OPTSTATE_LIB_DCP_METADATA_CALLS_H_
