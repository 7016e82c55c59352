// What the .metadata reader (dcp_metadata.cc) checks of where each item is
// stored. The other layout rule, that a tensor's chunks tile it, is public as
// CheckDcpChunkLayout (dcp_metadata.h): validate reports its failures instead
// of refusing. Both are defined in dcp_layout.cc.
#ifndef OPTSTATE_DCP_DCP_LAYOUT_H_
#define OPTSTATE_DCP_DCP_LAYOUT_H_

#include <string>

#include "optstate/dcp_metadata.h"
#include "optstate/status.h"

namespace optstate {

// kCorrupt, naming the item, when `where` leaves the checkpoint directory (a
// leading '/', an empty, "." or ".." component, a NUL).
Status CheckDcpLocation(const DcpLocation& where, const std::string& fqn);

}  // namespace optstate

#endif  // OPTSTATE_DCP_DCP_LAYOUT_H_
