// Conversion of raw little-endian tensor bytes to float32/float64, using c10's
// own Half and BFloat16 so that rounding and special values (NaN payloads,
// infinities, subnormals) match PyTorch exactly.
//
// This is the torch side of the library (target optstate_torch): it links c10 but
// only includes <c10/util/...> headers, which compile in a fraction of a second.
#ifndef OPTSTATE_TORCH_DTYPE_CONVERT_H_
#define OPTSTATE_TORCH_DTYPE_CONVERT_H_

#include <span>

#include "io/byte_cursor.h"
#include "optstate/status.h"
#include "optstate/torch_objects.h"

namespace optstate {

// Converts `count` elements of `src_dtype` stored little-endian in `src` into
// `dst`, which must hold `count` floats. Integers and bool convert as torch's
// .float() does. Errors: kInvalidArgument when `src` is not exactly
// dst.size() * element_size bytes; kUnsupported for complex and quantized types.
Status ConvertToFloat32(ByteSpan src, DType src_dtype, std::span<float> dst);

// Float32 to a 16-bit float type with round-to-nearest-even, as torch's .to() does.
// `dst` must hold exactly 2 * src.size() bytes.
Status ConvertFromFloat32(std::span<const float> src, DType dst_dtype, std::span<std::byte> dst);

}  // namespace optstate

#endif  // OPTSTATE_TORCH_DTYPE_CONVERT_H_
