// Raw DEFLATE (RFC 1951, zip method 8), for the security scan of zip records
// torch would read although torch.save never compresses them (inflate.cc).
#ifndef OPTSTATE_ZIP_INFLATE_H_
#define OPTSTATE_ZIP_INFLATE_H_

#include <cstdint>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/status.h"

namespace optstate {

// The bytes `deflated` holds, at most `cap` of them (kLimitExceeded beyond).
// kTruncated when the stream ends early, kCorrupt for an invalid stream.
StatusOr<std::vector<std::byte>> InflateRaw(ByteSpan deflated, uint64_t cap);

}  // namespace optstate

#endif  // OPTSTATE_ZIP_INFLATE_H_
