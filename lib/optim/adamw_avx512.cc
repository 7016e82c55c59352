// The AdamW loop built for avx512; the target flags are set in lib/CMakeLists.txt.
#include "optim/adamw_kernel.h"

namespace optstate::optim {

void RunChunkAvx512(const Chunk& c) { RunChunkImpl(c); }

}  // namespace optstate::optim
