// The pickle VM on arbitrary bytes: it must refuse or build a graph, within its
// limits, and never call anything. On success the graph is walked the way
// reports walk it.
#include "fuzz_target.h"
#include "io/byte_cursor.h"
#include "pickle/graph_walk.h"
#include "pickle/pickle_vm.h"

OPTSTATE_FUZZ_TARGET(pickle_vm) {
  using namespace optstate;
  ByteCursor cursor(fuzz::Bytes(data, size));
  PickleLimits limits;
  limits.max_nodes = 1u << 20;  // keeps one input's memory small; the checks are the same
  StatusOr<PickleResult> r = ReadPickle(cursor, limits);
  if (!r.ok()) return 0;
  if (r->end_offset > size) fuzz::FuzzCheckFailed("STOP past the input's end");
  for (const Node& n : r->graph.nodes) (void)GlobalName(n);
  if (r->graph.root != kNoNode) (void)ValueText(r->graph, r->graph.root);
  return 0;
}
