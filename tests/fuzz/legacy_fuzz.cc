// The legacy (pre-1.6) torch.save layout: five pickles and raw storages.
#include "fuzz_target.h"
#include "io/byte_cursor.h"
#include "torch/legacy_format.h"

OPTSTATE_FUZZ_TARGET(legacy) {
  using namespace optstate;
  Checkpoint out;
  ReadOptions options;
  options.pickle.max_nodes = 1u << 20;
  (void)ParseLegacyCheckpoint(ByteCursor(fuzz::Bytes(data, size)), options, out);
  return 0;
}
