// CRC-32 as used by zip (IEEE 802.3 polynomial, reflected, init and final xor
// 0xFFFFFFFF): the same value as Python's zlib.crc32, which the fixture
// generators use for per-tensor checksums.
#ifndef OPTSTATE_CRC32_H_
#define OPTSTATE_CRC32_H_

#include <cstdint>

#include "io/byte_cursor.h"

namespace optstate {

// Continues a running CRC: Crc32(b, Crc32(a)) == Crc32(a + b). Start with 0.
uint32_t Crc32(ByteSpan data, uint32_t crc = 0);

// The CRC of a + b from crc_a = Crc32(a), crc_b = Crc32(b) and b's length,
// without the bytes: records made of pieces (a DCP tensor's chunks, a ZeRO
// parameter's partitions) get their CRC from the pieces' CRCs.
uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

}  // namespace optstate

#endif  // OPTSTATE_CRC32_H_
