// The address ranges of every live MappedFile, kept for FindMappedRange
// (optstate/file_io.h), which a SIGBUS handler asks which file a fault hit.
#ifndef OPTSTATE_IO_MAPPED_RANGES_H_
#define OPTSTATE_IO_MAPPED_RANGES_H_

#include <cstdint>
#include <string>

#include "optstate/file_io.h"  // FindMappedRange

namespace optstate {

// Called by MappedFile when it maps and unmaps. At most kMaxMappedRanges are
// tracked at once; beyond that a range is simply not found (the signal then
// ends the process as before).
inline constexpr int kMaxMappedRanges = 1024;
void RegisterMappedRange(const void* base, uint64_t size, const std::string& path);
void UnregisterMappedRange(const void* base);

}  // namespace optstate

#endif  // OPTSTATE_IO_MAPPED_RANGES_H_
