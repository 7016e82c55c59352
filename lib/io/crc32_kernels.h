// The two ways crc32.cc computes CRC-32, on the raw register (the caller does
// the pre- and post-inversion): a table loop that runs anywhere, and a
// carry-less-multiply loop for CPUs with PCLMULQDQ (128- or 256-bit), 5-10x faster. Tests
// compare the two on random lengths and alignments.
#ifndef OPTSTATE_CRC32_KERNELS_H_
#define OPTSTATE_CRC32_KERNELS_H_

#include <cstddef>
#include <cstdint>

namespace optstate::internal {

// Slicing-by-16 over any length.
uint32_t Crc32UpdateTable(uint32_t reg, const std::byte* p, size_t n);

// Folds 64 bytes per step with PCLMULQDQ; needs n >= 64 and a CPU that
// Crc32ClmulSupported() accepts. Compiled with -mpclmul in its own file.
uint32_t Crc32UpdateClmul(uint32_t reg, const std::byte* p, size_t n);
bool Crc32ClmulSupported();

// The same with 256-bit VPCLMULQDQ, 128 bytes a step; needs n >= 128.
uint32_t Crc32UpdateWideClmul(uint32_t reg, const std::byte* p, size_t n);
bool Crc32WideClmulSupported();

}  // namespace optstate::internal

#endif  // OPTSTATE_CRC32_KERNELS_H_
