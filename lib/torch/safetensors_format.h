// Reading a .safetensors file (the default weights format of HF transformers
// and accelerate) in place as a checkpoint whose root is {name: tensor}: an
// 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and [begin, end) byte range in the data that follows, and the
// data. No pickle is involved; each tensor gets a storage located at its
// range, so readers that take a model state_dict take this one unchanged.
#ifndef OPTSTATE_TORCH_SAFETENSORS_FORMAT_H_
#define OPTSTATE_TORCH_SAFETENSORS_FORMAT_H_

#include <cstdint>

#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"

namespace optstate {

// The most header bytes read (the format's own limit is 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

// Does `data` start as a safetensors file? (A header length that fits the
// file and the limit, then '{'.)
bool LooksLikeSafetensors(ByteSpan data);

// Fills out.graph / storages / tensors. Errors name the tensor and the byte
// offset: a header that is not JSON, an unknown dtype, a range outside the data
// or of the wrong size for its shape.
Status ParseSafetensorsCheckpoint(const ByteCursor& whole, const ReadOptions& options, Checkpoint& out);

}  // namespace optstate

#endif  // OPTSTATE_TORCH_SAFETENSORS_FORMAT_H_
