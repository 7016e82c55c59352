// Walking an object graph as the tree a user thinks of, with printable paths.
//
// Paths join components the way a user would type them: dict keys that are plain
// words or integers as `.key` (`state.3.exp_avg`), anything else in brackets
// with its repr (`state[(140234, (16, 8))]`, `state["fc1.weight"]`), list and
// tuple items as `[i]` (`param_groups[0].lr`). The root's path is "".
//
// Each node is expanded once: a node met again (shared through the memo) is
// reported as a repeat naming the path where it was first met, so a walk costs
// one visit per node however the pickle shares objects.
#ifndef OPTSTATE_GRAPH_WALK_H_
#define OPTSTATE_GRAPH_WALK_H_

#include <functional>
#include <optional>
#include <string>

#include "optstate/pickle_graph.h"

namespace optstate {

struct WalkStep {
  std::string path;
  NodeId id = kNoNode;
  NodeId key = kNoNode;        // the dict key that leads here, if any
  uint32_t depth = 0;          // 0 for the root
  bool repeat = false;         // already expanded at first_path
  std::string first_path;
  size_t index = 0;            // position among its parent's children
  size_t siblings = 1;         // how many children its parent has
  size_t children = 0;         // how many children it has
};

// Calls visit for every node reachable from `root` in order (dict entries in
// insertion order). visit returns false to skip the node's children. Nodes
// deeper than max_depth are not visited.
void WalkTree(const ObjectGraph& graph, NodeId root, uint32_t max_depth,
              const std::function<bool(const WalkStep&)>& visit);

// The key as it appears in a path component ("3", "exp_avg", "(1, (16, 8))").
std::string KeyText(const ObjectGraph& graph, NodeId key);

// Short Python-like rendering of a scalar or small container, at most
// `max_chars` characters: 0.001, 'adamw', (0.9, 0.999), [0, 1, 2, ...].
std::string ValueText(const ObjectGraph& graph, NodeId id, size_t max_chars = 60);

// The node at `path` below `root` (same syntax as WalkStep::path, and a bare
// `a.b.3` also matches dict keys that are ints or strs). nullopt if absent.
std::optional<NodeId> FindPath(const ObjectGraph& graph, NodeId root, const std::string& path);

}  // namespace optstate

#endif  // OPTSTATE_GRAPH_WALK_H_
