// Building a checkpoint's object graph from scratch (regenerate; later DCP
// export and consolidate): values, containers, and contiguous tensors that each
// get a storage of their own, whose bytes the writer asks for later
// (WriteNewCheckpoint in checkpoint_writer.h).
#ifndef OPTSTATE_GRAPH_BUILDER_H_
#define OPTSTATE_GRAPH_BUILDER_H_

#include <cstdint>
#include <unordered_map>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"

namespace optstate {

class GraphBuilder {
 public:
  explicit GraphBuilder(Checkpoint& checkpoint) : cp_(checkpoint) {}

  NodeId New(NodeKind kind);  // a None, or an empty node to fill
  NodeId Int(int64_t v);
  NodeId Float(double v);
  NodeId Bool(bool v);
  NodeId Str(const std::string& s);
  NodeId Tuple(std::vector<NodeId> items);
  NodeId List(std::vector<NodeId> items);
  NodeId Dict(const std::string& class_name = "");  // "collections.OrderedDict" for a state_dict
  void Set(NodeId dict, NodeId key, NodeId value);
  void Set(NodeId dict, const std::string& key, NodeId value);
  // A contiguous CPU tensor with a storage of its own, appended to the
  // checkpoint's storages (its key is its index there).
  NodeId Tensor(DType dtype, const std::vector<int64_t>& shape);
  // Another tensor over the bytes of an existing one (`base` is copied first:
  // it may live in the checkpoint's tensors, which this appends to).
  NodeId TensorOver(TensorRef base, std::vector<int64_t> sizes, std::vector<int64_t> strides);
  // Copies value `id` of another graph (e.g. a DCP bytes item's pickle) into
  // this one, keeping shared references shared. Tensors and storages would need
  // their bytes carried too: kUnsupported.
  StatusOr<NodeId> Import(const ObjectGraph& from, NodeId id);

 private:
  StatusOr<NodeId> ImportNode(const ObjectGraph& from, NodeId id, std::unordered_map<NodeId, NodeId>& copied);
  Checkpoint& cp_;
};

// C-order strides of a shape.
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape);

}  // namespace optstate

#endif  // OPTSTATE_GRAPH_BUILDER_H_
