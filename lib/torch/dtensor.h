// DTensors (FSDP2, tensor parallel) as torch 2.x pickles them, recognised in an
// ObjectGraph. torch/distributed/tensor/_api.py DTensor.__reduce_ex__ goes
// through _rebuild_from_type_v2(_rebuild_wrapper_subclass, DTensor, (cls,
// dtype, global size, stride, offset, layout, device, requires_grad), state)
// with state (None, {'_local_tensor': tensor, '_spec': DTensorSpec}); the spec
// holds the placements and the DeviceMesh, whose `mesh` tensor has the mesh's
// shape. torch_objects.cc turns such a call into one TensorRef.
#ifndef OPTSTATE_TORCH_DTENSOR_H_
#define OPTSTATE_TORCH_DTENSOR_H_

#include <string>
#include <vector>

#include "optstate/pickle_graph.h"

namespace optstate {

// The DTensor class global, under any of the module names torch 2.x used.
bool IsDTensorClass(const ObjectGraph& graph, NodeId id);

// Where the parts of one DTensor are in the graph. Nodes are kNoNode when the
// pickle does not have them; nothing here is checked beyond finding it.
struct DTensorParts {
  NodeId local_tensor = kNoNode;        // state's _local_tensor
  bool has_global_size = false;         // the wrapper call has a size argument:
  NodeId global_size = kNoNode;         //   this one
  std::vector<std::string> placements;  // "Shard(dim=0)", "Replicate()", "Partial(sum)",
                                        // "_StridedShard(dim=0, sf=2)", as repr() prints them
  NodeId mesh = kNoNode;                // the DeviceMesh's `mesh` value
  NodeId coordinate = kNoNode;          // its `_coordinate_on_dim`: this rank's place in the mesh
};

// `args` of _rebuild_from_type_v2 whose second item IsDTensorClass: at least
// four items, the third a tuple.
DTensorParts FindDTensorParts(const ObjectGraph& graph, const std::vector<NodeId>& args);

// FSDP1's ShardedTensor (torch.distributed._shard.sharded_tensor.api), which
// torch 2.x pickles through the same _rebuild_from_type_v2(
// _rebuild_wrapper_subclass, ShardedTensor, (cls, dtype, global size, ...),
// state) with state (local shards, ShardedTensorMetadata, ProcessGroupState,
// sharding spec, init_rrefs): each local Shard holds `tensor` and a
// ShardMetadata with `shard_offsets` and `shard_sizes`; the group state holds
// `global_rank` and `global_world_size`.
bool IsShardedTensorClass(const ObjectGraph& graph, NodeId id);

struct ShardedTensorParts {
  bool has_global_size = false;
  NodeId global_size = kNoNode;
  size_t local_shards = 0;           // FSDP1 saves one, or none on a rank past the rows
  NodeId local_tensor = kNoNode;     // the first local shard's tensor
  NodeId shard_offsets = kNoNode;    //   and its ShardMetadata's offsets
  NodeId shard_sizes = kNoNode;      //   and sizes
  NodeId rank = kNoNode;             // ProcessGroupState.global_rank
  NodeId world_size = kNoNode;       // ProcessGroupState.global_world_size
};
ShardedTensorParts FindShardedTensorParts(const ObjectGraph& graph, const std::vector<NodeId>& args);

}  // namespace optstate

#endif  // OPTSTATE_TORCH_DTENSOR_H_
