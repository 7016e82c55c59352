// The SGD, Adagrad and RMSprop loops built for avx512; the target flags are set in lib/CMakeLists.txt.
#include "optim/family_kernel.h"

namespace optstate::optim {

void RunFamilyChunkAvx512(const FamilyChunk& c) { RunFamilyChunkImpl(c); }

}  // namespace optstate::optim
