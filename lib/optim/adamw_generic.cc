// The AdamW loop built for generic; the target flags are set in lib/CMakeLists.txt.
#include "optim/adamw_kernel.h"

namespace optstate::optim {

void RunChunkGeneric(const Chunk& c) { RunChunkImpl(c); }

}  // namespace optstate::optim
