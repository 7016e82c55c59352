// A model's parameters in optimizer order (schemas/param-manifest.schema.json).
// Written from a live model and optimizer (see README); with data_ptr it places
// pointer-keyed state exactly, split views included.
#ifndef OPTSTATE_PARAM_MANIFEST_H_
#define OPTSTATE_PARAM_MANIFEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optstate/compact_containers.h"
#include "optstate/dtype.h"
#include "optstate/status.h"

namespace optstate {

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;  // the whole parameter's shape, also for a sharded one
  // A DTensor shard (FSDP2, tensor parallel) read from one rank's model file: its
  // local shape, placements ("Shard(dim=0)", ...), mesh shape and this rank's
  // coordinate in it (shard_layout.h). Empty for whole tensors. Out of line
  // (written through shard()): most parameters are whole, and 10^5 of them
  // each carried 96 bytes of empty vectors.
  const std::vector<int64_t>& local_shape() const { return shard_ ? shard_->local_shape : kNoInts; }
  const std::vector<std::string>& placements() const { return shard_ ? shard_->placements : kNoTexts; }
  const std::vector<int64_t>& mesh_shape() const { return shard_ ? shard_->mesh_shape : kNoInts; }
  const std::vector<int64_t>& mesh_coordinate() const { return shard_ ? shard_->mesh_coordinate : kNoInts; }
  // FSDP1's ShardedTensor gives its block outright instead of placements:
  // its offsets, or nullopt on a rank that holds none of it.
  bool explicit_block() const { return shard_ && shard_->explicit_block; }
  const std::optional<std::vector<int64_t>>& block_offsets() const { return shard_ ? shard_->block_offsets : kNoBlock; }
  struct Shard {
    std::vector<int64_t> local_shape;
    std::vector<std::string> placements;
    std::vector<int64_t> mesh_shape;
    std::vector<int64_t> mesh_coordinate;
    bool explicit_block = false;
    std::optional<std::vector<int64_t>> block_offsets;
  };
  Shard& shard() { return shard_.GetOrCreate(); }
  DType dtype = DType::kFloat32;
  std::optional<uint64_t> data_ptr;
  uint64_t nbytes = 0;  // from the file, else numel * element size
  std::optional<int64_t> group;  // its param_groups index, when the manifest says
  // A hash of the parameter's bytes in its model file (ContentHash), filled
  // when the state's keys are (Parameter, i) copies that share no storage.
  std::optional<uint64_t> content_hash;

 private:
  static inline const std::vector<int64_t> kNoInts;
  static inline const std::vector<std::string> kNoTexts;
  static inline const std::optional<std::vector<int64_t>> kNoBlock;
  OutOfLine<Shard> shard_;
};

// Errors name the file and the field: "m.json: params[3].shape: expected an
// array of non-negative integers".
StatusOr<std::vector<ParamInfo>> ReadParamManifest(const std::string& path);
StatusOr<std::vector<ParamInfo>> ParseParamManifest(std::string_view json_text);

// The manifest of `params` as JSON text (data_ptr where known), which
// ParseParamManifest reads back to the same list.
std::string ParamManifestText(const std::vector<ParamInfo>& params);

}  // namespace optstate

#endif  // OPTSTATE_PARAM_MANIFEST_H_
