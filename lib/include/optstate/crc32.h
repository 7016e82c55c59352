// CRC-32 as used by zip (IEEE 802.3 polynomial, reflected, init and final xor
// 0xFFFFFFFF): the same value as Python's zlib.crc32, which the fixture
// generators use for per-tensor checksums.
#ifndef OPTSTATE_CRC32_H_
#define OPTSTATE_CRC32_H_

#include <cstdint>

#include "optstate/byte_cursor.h"

namespace optstate {

// Continues a running CRC: Crc32(b, Crc32(a)) == Crc32(a + b). Start with 0.
uint32_t Crc32(ByteSpan data, uint32_t crc = 0);

}  // namespace optstate

#endif  // OPTSTATE_CRC32_H_
