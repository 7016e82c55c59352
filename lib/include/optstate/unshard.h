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
#include <memory>
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
  size_t steps_separated = 0;      // entries given a step of their own (SeparateSharedSteps)
  uint64_t largest_assembled_bytes = 0;  // the largest tensor put together in memory
  WriteReport write;
};

// Errors name the rank, file and path of a DTensor that does not agree
// (missing on a rank, other global shape, dtype, placement or mesh, shards that
// do not tile it once at their coordinates, Partial placements), or when the
// largest mesh has not one position per file; nothing is written then.
StatusOr<UnshardReport> UnshardRankFiles(const std::vector<std::string>& files, const std::string& output,
                                         const UnshardOptions& options);

// What a rank set is, checked as UnshardRankFiles checks it, without writing:
// for `inspect` of several rank files. Files without DTensors (`.to_local()`
// copies, or files that are not shards at all) give no dtensors, not an error.
struct RankSetLayout {
  struct DTensorLayout {
    std::string path;
    std::vector<int64_t> global_sizes;
    std::vector<std::string> placements;
    std::vector<int64_t> mesh_shape;
    DType dtype = DType::kFloat32;
    size_t replicas = 0;  // ranks holding a block another rank holds too
  };
  std::vector<std::string> files;  // in rank order
  std::vector<DTensorLayout> dtensors;
  size_t plain_tensors = 0;
  std::vector<std::string> rank_local;  // as UnshardReport::rank_local
};
StatusOr<RankSetLayout> CheckRankSetLayout(const std::vector<std::string>& files, const ReadOptions& read);

class StagingDirectory;

// A rank set unsharded into a scratch directory beside `near` (same
// filesystem as the command's output), opened, and removed with this object:
// for commands that read one file (export). Costs a copy of the checkpoint's
// bytes on disk while it lives.
class UnshardedRankSet {
 public:
  static StatusOr<std::unique_ptr<UnshardedRankSet>> Create(const std::vector<std::string>& files,
                                                            const std::string& near, const UnshardOptions& options);
  ~UnshardedRankSet();
  const CheckpointFile& file() const { return *file_; }
  const UnshardReport& report() const { return report_; }

 private:
  UnshardedRankSet() = default;
  std::unique_ptr<StagingDirectory> scratch_;
  std::unique_ptr<CheckpointFile> file_;
  UnshardReport report_;
};

}  // namespace optstate

#endif  // OPTSTATE_UNSHARD_H_
