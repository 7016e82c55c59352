// The SGD, Adagrad and RMSprop loops built for generic; the target flags are set in lib/CMakeLists.txt.
#include "optim/family_kernel.h"

namespace optstate::optim {

void RunFamilyChunkGeneric(const FamilyChunk& c) { RunFamilyChunkImpl(c); }

}  // namespace optstate::optim
