// The legacy (non-zip) torch.save format: torch < 1.6, or
// _use_new_zipfile_serialization=False. Internal to lib/.
//
// Layout (torch/serialization.py _legacy_save), all back to back:
//   pickle  MAGIC_NUMBER (0x1950a86a20f9469cfc6c)
//   pickle  PROTOCOL_VERSION (1001)
//   pickle  sys_info {'protocol_version', 'little_endian', 'type_sizes'}
//   pickle  the object; storages as persistent ids
//           ('storage', class, key, location, numel, view_metadata)
//   pickle  list of storage keys, in the order their data follows
//   per key int64 little-endian element count, then count * element size bytes
#ifndef OPTSTATE_LIB_LEGACY_FORMAT_H_
#define OPTSTATE_LIB_LEGACY_FORMAT_H_

#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"

namespace optstate {

Status ParseLegacyCheckpoint(const ByteCursor& whole, const ReadOptions& options, Checkpoint& out);

}  // namespace optstate

#endif  // OPTSTATE_LIB_LEGACY_FORMAT_H_
