// The address ranges of every live MappedFile, for a SIGBUS handler. A file
// truncated or replaced while it is mapped (a trainer still writing it, a
// checkpoint rotated away) makes the next read of a vanished page raise SIGBUS;
// the CLI's handler asks here which file and offset the fault hit, so it can
// say so and exit 2 instead of dying with the signal.
#ifndef OPTSTATE_MAPPED_RANGES_H_
#define OPTSTATE_MAPPED_RANGES_H_

#include <cstdint>
#include <string>

namespace optstate {

// Called by MappedFile when it maps and unmaps. At most kMaxMappedRanges are
// tracked at once; beyond that a range is simply not found (the signal then
// ends the process as before).
inline constexpr int kMaxMappedRanges = 1024;
void RegisterMappedRange(const void* base, uint64_t size, const std::string& path);
void UnregisterMappedRange(const void* base);

// Async-signal-safe: the path of the mapping holding `address` (NUL-terminated,
// at most 511 bytes, cut if longer) and the offset of `address` in that file.
bool FindMappedRange(const void* address, const char** path, uint64_t* offset);

}  // namespace optstate

#endif  // OPTSTATE_MAPPED_RANGES_H_
