// Reading the plain values DeepSpeed pickles (ints, names, torch.Size shapes)
// out of an object graph, and the step that places every parameter's
// fragments, shared by the files of this layer.
#ifndef OPTSTATE_ZERO_ZERO_GRAPH_H_
#define OPTSTATE_ZERO_ZERO_GRAPH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optstate/pickle_graph.h"
#include "optstate/zero.h"

namespace optstate {

inline bool IsDictNode(const ObjectGraph& g, NodeId n) { return n != kNoNode && g.at(n).kind == NodeKind::kDict; }

inline bool IsSequence(const ObjectGraph& g, NodeId n) {
  return n != kNoNode && (g.at(n).kind == NodeKind::kList || g.at(n).kind == NodeKind::kTuple);
}

inline std::optional<int64_t> IntOf(const ObjectGraph& g, NodeId n) {
  if (n == kNoNode || g.at(n).kind != NodeKind::kInt) return std::nullopt;
  return g.at(n).int_value;
}

// Shapes from a file are untrusted: no tensor here holds more elements than
// this (2^48, 1 PiB of fp32), so sums and offsets of them cannot overflow.
inline constexpr uint64_t kMaxZeroNumel = uint64_t{1} << 48;

// A torch.Size (or a plain tuple/list) of non-negative ints whose product is
// at most kMaxZeroNumel.
inline std::optional<std::vector<int64_t>> ShapeOf(const ObjectGraph& g, NodeId n) {
  if (!IsSequence(g, n) || g.at(n).items.size() > 64) return std::nullopt;
  std::vector<int64_t> shape;
  uint64_t numel = 1;
  for (NodeId d : g.at(n).items) {
    auto v = IntOf(g, d);
    if (!v || *v < 0 || static_cast<uint64_t>(*v) > kMaxZeroNumel) return std::nullopt;
    numel = *v == 0 ? 0 : numel;
    if (numel != 0 && numel > kMaxZeroNumel / static_cast<uint64_t>(*v)) return std::nullopt;
    numel *= static_cast<uint64_t>(*v);
    shape.push_back(*v);
  }
  return shape;
}

inline std::string KeyOrType(const ObjectGraph& g, NodeId k) {
  return g.at(k).kind == NodeKind::kStr ? "'" + g.at(k).text + "'" : "of type " + TypeName(g, k);
}

// Where a frozen parameter's values (rank `rank`'s piece, stage 3) lie: the
// model states file holding them, and the tensor node there (kNoNode if
// absent). Stages 1, 2 keep them whole in frozen_param_fragments, or only in
// `module` when ZeRO-1 did not list them.
struct FrozenTensorRef {
  const CheckpointFile* file = nullptr;
  NodeId node = kNoNode;
};
FrozenTensorRef FindFrozenTensor(const ZeroCheckpoint& z, const std::string& name, uint32_t rank);

// Fills each rank's group nodes and steps, each parameter's fragments and each
// group's partition sizes and padding, and records what does not add up
// (zero_layout.cc).
void PlaceZeroFragments(ZeroCheckpoint& z);

}  // namespace optstate

#endif  // OPTSTATE_ZERO_ZERO_GRAPH_H_
