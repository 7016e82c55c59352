// torch's format before 0.4, a tar of 'storages', 'tensors' and 'pickle',
// as Python's tarfile (which torch.load tries before the legacy pickle
// stream) decides what a tar is. Internal to lib/.
#ifndef OPTSTATE_LIB_TAR_FORMAT_H_
#define OPTSTATE_LIB_TAR_FORMAT_H_

#include "io/byte_cursor.h"

namespace optstate {

// What tarfile.open accepts as a first header: 512 bytes, not all zeros, whose
// checksum field equals the unsigned or signed sum of the header (the field
// counted as spaces). No magic is needed (V7 headers have none), so a file can
// be a tar and a legacy checkpoint at once: torch takes it as the tar.
bool IsTarHeader(ByteSpan block);

}  // namespace optstate

#endif  // OPTSTATE_LIB_TAR_FORMAT_H_
