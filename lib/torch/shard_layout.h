// Which block of a DTensor's global tensor each rank's local shard is, from
// the DTensor's placements, its mesh's shape and the rank's mesh coordinate.
//
// Placements are read as torch 2.x prints them: "Shard(dim=d)",
// "Replicate()", "Partial(sum)", and "_StridedShard(dim=d, sf=k)", which is
// what FSDP2 puts on its mesh dim when tensor parallelism already sharded the
// same tensor dim (ColwiseParallel + fully_shard). A strided shard is applied
// after the plain shards of its dim: rank (dp, tp) holds FSDP's chunk dp of
// TP's chunk tp, which is how the data was split. Every split is torch.chunk's
// (chunks of ceil(n / ranks), the last ones short or empty).
//
// The coordinate is the one each rank's DeviceMesh pickled
// (`_coordinate_on_dim`); a file that lacks it is given its position in rank
// order, unravelled over the mesh, when the mesh has one position per file.
#ifndef OPTSTATE_TORCH_SHARD_LAYOUT_H_
#define OPTSTATE_TORCH_SHARD_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optstate/status.h"
#include "optstate/torch_objects.h"

namespace optstate {

struct Placement {
  enum class Kind { kShard, kStridedShard, kReplicate, kPartial, kUnknown };
  Kind kind = Kind::kUnknown;
  int64_t dim = -1;           // kShard, kStridedShard
  int64_t split_factor = 1;   // kStridedShard
};
Placement ParsePlacement(const std::string& text);

struct ShardBox {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  bool operator==(const ShardBox&) const = default;
};

// One rank's shard of a DTensor, as its file has it.
struct ShardView {
  std::vector<int64_t> local_sizes;
  std::vector<int64_t> mesh_coordinate;  // empty when the file does not record it
  std::string where;                     // for errors ("r1.pt (rank 1)"); "rank <index>" if empty
  // TileExplicitBlocks only: where the shard lies in the whole (a
  // ShardedTensor's offsets), nullopt when this rank holds no block.
  std::optional<std::vector<int64_t>> block_offsets;
};

struct ShardTiling {
  std::vector<ShardBox> boxes;       // per view
  std::vector<size_t> owners;        // one view per block of the whole tensor, by offset (row-major)
  // The owners' blocks are whole in every dim but 0: their bytes, one after
  // the other, are the whole tensor's (FSDP2's Shard(0) alone, any mesh).
  bool row_slabs = false;
  size_t replicas = 0;               // views whose block another view owns
};

// kUnsupported for Partial and unknown placements, and for strided shards
// whose split factor is not the number of later shards of their dim.
// kInvalidArgument, naming the view's `where`, when a local shard's
// size is not its block's, a coordinate is out of the mesh or repeated on a
// mesh with one position per view, or no view holds some block.
StatusOr<ShardTiling> TileShards(const std::vector<int64_t>& global, const std::vector<std::string>& placements,
                                 const std::vector<int64_t>& mesh_shape, const std::vector<ShardView>& views);

// The same for shards that name their blocks outright (FSDP1's
// ShardedTensor: offsets and sizes in its ShardMetadata) rather than by
// placements on a mesh. A block given twice is a replica. kInvalidArgument,
// naming the view's `where`, when a block reaches outside the whole, two
// blocks overlap without being the same block, or some part of the whole is
// in no block (a rank's file is missing).
StatusOr<ShardTiling> TileExplicitBlocks(const std::vector<int64_t>& global, const std::vector<ShardView>& views);

}  // namespace optstate

#endif  // OPTSTATE_TORCH_SHARD_LAYOUT_H_
