// The per-rank torch.save files of one FSDP2 / tensor-parallel save (each
// holding this rank's DTensor shards) made into one checkpoint of whole
// tensors: what a single process would have saved.
//
// Rank 0's file is the template: every DTensor in it becomes a plain tensor of
// its global shape, assembled from the same DTensor (same path from the root)
// in every rank's file, each shard placed at the block its placements and its
// rank's mesh coordinate give (shard_layout.h: FSDP2, TP, FSDP2 + TP's strided
// shards; a DTensor on a sub-mesh, such as FSDP2's dp mesh beside TP, is held
// by several ranks and taken from the first). Everything else (scalars, plain
// tensors, param_groups) is rank 0's. Memory: the largest tensor whose blocks
// are not whole rows; blocks of whole rows (Shard(0) alone, Replicate) are
// written straight from the inputs, one after the other.
#ifndef OPTSTATE_UNSHARD_H_
#define OPTSTATE_UNSHARD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/checkpoint_writer.h"

namespace optstate {

struct UnshardOptions {
  ReadOptions read;
  WriteOptions write;
  std::function<void(uint64_t done, uint64_t total)> progress;  // tensor bytes written
};

struct UnshardReport {
  std::vector<std::string> files;  // in rank order
  size_t dtensors = 0;             // made whole
  size_t plain_tensors = 0;        // kept from rank 0
  // Paths of plain tensors whose values differ between ranks (or that some
  // rank lacks): rank 0's are written, which is not the whole of anything.
  std::vector<std::string> rank_local;
  uint64_t dtensor_bytes = 0;      // bytes of the whole tensors written
  uint64_t largest_assembled_bytes = 0;  // the largest tensor put together in memory
  WriteReport write;
};

// Errors name the rank, file and path of a DTensor that does not agree
// (missing on a rank, other global shape, dtype, placement or mesh, shards that
// do not tile it once at their coordinates, Partial placements), or when the
// largest mesh has not one position per file; nothing is written then.
StatusOr<UnshardReport> UnshardRankFiles(const std::vector<std::string>& files, const std::string& output,
                                         const UnshardOptions& options);

}  // namespace optstate

#endif  // OPTSTATE_UNSHARD_H_
