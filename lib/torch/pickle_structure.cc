// Findings about a pickle's shape rather than the globals it names: structure
// no pickler writes (pickle-tampered), an object tree far larger than the file
// (pickle-expansion), objects that contain themselves (pickle-cycle, a note:
// real schedulers' state does), and a
// built-in limit the pickle ran into (resource-limit).
//
// The object tree is what a reader that does not track shared objects sees:
// json.dumps, a recursive printer, a copy without a memo, many scanners. Shared
// references cost the pickle two bytes each (BINGET), so a few hundred bytes
// can describe 10^30 objects; torch.load itself keeps them shared.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "torch/security.h"

namespace optstate {
namespace {

// Above this many objects in the tree, and above kExpansionPerByte per byte of
// the file, the tree is an expansion. A pickle spends at least a byte on each
// reference it writes out, so healthy checkpoints stay below one object per
// byte whatever they share (a DCP .metadata, which shares most, ~0.2).
constexpr uint64_t kExpansionFloor = uint64_t{1} << 24;
constexpr uint64_t kExpansionPerByte = 64;

struct TreeSize {
  uint64_t objects = 0;   // saturates at the threshold
  NodeId cycle_at = kNoNode;  // a node met again while it is being expanded
};

// The i-th reference of `n` in ForEachChild's order, or kNoNode for an empty
// slot (a call without kwargs); i < 4 + items + 2 * entries.
NodeId ChildAt(const Node& n, size_t i) {
  switch (i) {
    case 0: return n.callable();
    case 1: return n.args();
    case 2: return n.kwargs();
    case 3: return n.state();
    default: break;
  }
  i -= 4;
  if (i < n.items.size()) return n.items[i];
  i -= n.items.size();
  const Entry& e = n.entries[i / 2];
  return i % 2 == 0 ? e.first : e.second;
}

// Objects in the tree under `root`, counted node by node in post-order with
// each node's count kept, so the walk is linear in the graph; counts saturate
// at `cap`. Iterative: the graph may be as deep as the pickle limits allow.
TreeSize CountTree(const ObjectGraph& graph, NodeId root, uint32_t cap) {
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> state(graph.nodes.size(), kNew);
  std::vector<uint32_t> size(graph.nodes.size(), 0);
  struct Frame {
    NodeId id;
    size_t next;
    size_t end;
    uint64_t total;  // 1 + the sizes of the children done so far
  };
  TreeSize out;
  std::vector<Frame> stack;
  auto open = [&](NodeId id) {
    state[id] = kOpen;
    const Node& n = graph.at(id);
    stack.push_back({id, 0, 4 + n.items.size() + 2 * n.entries.size(), 1});
  };
  open(root);
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next < top.end) {
      const NodeId c = ChildAt(graph.at(top.id), top.next++);
      if (c == kNoNode) continue;
      if (state[c] == kNew) {
        open(c);  // its size is added when it is done (below)
      } else if (state[c] == kDone) {
        top.total = std::min<uint64_t>(cap, top.total + size[c]);
      } else if (out.cycle_at == kNoNode) {
        out.cycle_at = c;  // open: a reference back up the path
      }
      continue;
    }
    const NodeId done = top.id;
    size[done] = static_cast<uint32_t>(top.total);
    state[done] = kDone;
    stack.pop_back();
    if (!stack.empty()) stack.back().total = std::min<uint64_t>(cap, stack.back().total + size[done]);
  }
  out.objects = size[root];
  return out;
}

}  // namespace

void ScanPickleStructure(const PickleResult& parsed, const std::string& where, uint64_t source_bytes,
                         std::vector<Finding>& findings) {
  for (const PickleAnomaly& a : parsed.anomalies) {
    findings.push_back({Severity::kError, "pickle-tampered", where + " offset " + std::to_string(a.offset),
                        a.what + ". Python's pickler never writes this; its use is to make one reader (a scanner) "
                                 "see something else than another (torch.load)",
                        ""});
  }
  // Without repeated containers the tree is the graph: nothing to count.
  if (parsed.compound_repeats == 0 || parsed.graph.root == kNoNode) return;
  const uint64_t threshold =
      std::min<uint64_t>(std::numeric_limits<uint32_t>::max() - 1,
                         std::max<uint64_t>(kExpansionFloor, kExpansionPerByte * source_bytes));
  const TreeSize tree = CountTree(parsed.graph, parsed.graph.root, static_cast<uint32_t>(threshold + 1));
  if (tree.objects > threshold) {
    findings.push_back({Severity::kError, "pickle-expansion", where,
                        "the objects this pickle shares expand to more than " + std::to_string(threshold) +
                            " as a tree, from a file of " + std::to_string(source_bytes) +
                            " bytes (memo or DUP expansion, \"billion laughs\"): torch.load keeps them shared, "
                            "but anything that walks the result without tracking shared objects runs out of "
                            "memory or time",
                        ""});
  }
  if (tree.cycle_at != kNoNode) {
    findings.push_back({Severity::kInfo, "pickle-cycle",
                        where + " offset " + std::to_string(parsed.graph.at(tree.cycle_at).offset),
                        "this object contains itself (as torch 1.13's OneCycleLR state does, through a bound method "
                        "of the scheduler): torch.load reads it and nothing runs, but code that walks the result "
                        "without tracking what it has seen (json.dumps, a recursive printer, some scanners) never "
                        "ends",
                        ""});
  }
}

void ScanLimitStop(const Status& stop, const PickleLimits& limits, const std::string& where,
                   std::vector<Finding>& findings) {
  // A limit the user lowered is their choice, and a plain read error says so;
  // the built-in limits sit far above any checkpoint a framework writes.
  if (stop.code() != StatusCode::kLimitExceeded || !(limits == PickleLimits{})) return;
  findings.push_back({Severity::kError, "resource-limit", where,
                      std::string(stop.message()) +
                          ": beyond optstate's built-in limits, which hold checkpoints of 10^6 parameters; a pickle "
                          "past them makes any reader spend memory or time it names. A genuine larger checkpoint: "
                          "raise the limit (--max-nodes, --max-depth, ...) and run again",
                      ""});
}

}  // namespace optstate
