// A pickle reader for protocols 0-5 that builds an ObjectGraph and never imports
// or executes anything.
//
// Every opcode of the pickle specification is understood. Calls become kObject
// nodes; globals become kGlobal nodes and are also listed as GlobalRefs so that a
// security report can judge them; out-of-band buffers (protocol 5 NEXT_BUFFER /
// READONLY_BUFFER) are refused as unsupported, since a file cannot carry them.
//
// Untrusted sizes are checked against the bytes present (ByteCursor) and against
// PickleLimits before anything is allocated. Errors carry the opcode's absolute
// offset: "offset 1203: BINGET of memo index 7, which was never stored".
#ifndef OPTSTATE_PICKLE_VM_H_
#define OPTSTATE_PICKLE_VM_H_

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/pickle_graph.h"
#include "optstate/status.h"

namespace optstate {

// Something in the pickle's structure that no pickler writes and that readers
// disagree on or that only serves to mislead one: a FRAME whose end falls inside
// an opcode, a PROTO that is not the first opcode. CPython's C unpickler, which
// torch.load uses, reads on; so does ReadPickle, and it records where.
struct PickleAnomaly {
  uint64_t offset;   // of the opcode
  std::string what;
};

struct PickleResult {
  ObjectGraph graph;
  int protocol = 0;               // from PROTO; 0 when absent
  std::bitset<256> opcodes;       // every opcode the pickle used (torch 2.6's weights_only refuses some)
  std::vector<GlobalRef> globals;  // in order of appearance, repeats included
  uint64_t end_offset = 0;        // absolute offset just past STOP
  // Left beneath the root at STOP (CPython drops them; torch.save never leaves any).
  size_t leftover_objects = 0;
  size_t leftover_marks = 0;
  std::vector<PickleAnomaly> anomalies;
  // Memo gets and DUPs of a container or call result: each puts one object in
  // a second place, so the object tree can grow far beyond the node count
  // ("billion laughs"). 0 means the tree is the graph.
  uint64_t compound_repeats = 0;
};

// How the bytes reach the unpickler (lib/pickle/pickle_input.h): in order
// (pickle.loads, torch.load of a legacy file by path), or as CPython's C
// unpickler reads a file without peek(), which is how torch.load reads a zip's
// data.pkl. They differ only where a FRAME ends inside an opcode.
enum class PickleReadMode { kStream, kFileNoPeek };

// Reads one pickle starting at the cursor's position and leaves the cursor just
// past its STOP opcode (the legacy format has several pickles back to back).
// When it fails and `partial` is given, *partial holds what was built before the
// error: the globals named and the calls made, which CPython's unpickler would
// already have executed (security scans report them beside the error).
StatusOr<PickleResult> ReadPickle(ByteCursor& cursor, const PickleLimits& limits = {},
                                  PickleResult* partial = nullptr, PickleReadMode mode = PickleReadMode::kStream);

}  // namespace optstate

#endif  // OPTSTATE_PICKLE_VM_H_
