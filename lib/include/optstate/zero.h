// DeepSpeed ZeRO checkpoint directories: one global_stepN/ tag read in place
// (ranks, partitions, where each parameter lies) and consolidated into one
// torch.save file, without DeepSpeed or torch.
#ifndef OPTSTATE_ZERO_H_
#define OPTSTATE_ZERO_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/checkpoint_writer.h"
#include "optstate/coordinator.h"
#include "optstate/status.h"

namespace optstate {

// A DeepSpeed ZeRO checkpoint directory (one `global_stepN/` tag), read in
// place without DeepSpeed or torch.
//
// ZeRO keeps no per-parameter tensors. Stages 1 and 2 flatten each param group
// (parameters in `param_shapes` order, end padded to an alignment) and cut the
// flat buffer into one equal partition per data-parallel rank: rank R's
// `zero_pp_rank_R_mp_rank_00_optim_states.pt` holds its partition of the fp32
// master weights (`single_partition_of_fp32_groups[g]`) and of each optimizer
// state (`base_optimizer_state.state[g]`), so one parameter may straddle ranks.
// Stage 3 cuts every parameter on its own into ceil(numel / world) elements per
// rank (the last rank padded) and concatenates each rank's pieces per group
// (`fp32_flat_groups[g]`, `optimizer_state_dict.state[g]`). The model states
// file(s) name the parameters and shapes; frozen parameters are stored whole
// (stages 1, 2) or cut the same way (stage 3, one model file per rank).
//
// OpenZeroCheckpoint places every parameter's fragments and records, rather
// than refuses, what does not add up (ZeroLayoutProblem): validate reports
// them, consolidate refuses while any is there.

// One rank's piece of a parameter: elements [param_offset, param_offset +
// numel) of the flattened parameter sit at [offset, offset + numel) of that
// rank's flat partition of the parameter's group.
struct ZeroFragment {
  uint32_t rank = 0;
  uint64_t offset = 0;
  uint64_t param_offset = 0;
  uint64_t numel = 0;
};

struct ZeroParam {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t numel = 0;
  int64_t group = -1;  // -1: frozen
  std::vector<ZeroFragment> fragments;  // trainable: in the optimizer partitions; frozen, stage 3: model files
};

struct ZeroGroup {
  std::vector<size_t> params;             // indices into ZeroCheckpoint::params, in flat order
  std::vector<uint64_t> partition_numel;  // per rank: the flat partition's length, padding included (0: no file)
  std::vector<uint64_t> padding;          // per rank: trailing elements that belong to no parameter
  std::vector<std::string> state_fields;  // rank 0's optimizer state fields ("exp_avg", "exp_avg_sq", "step")
};

struct ZeroLayoutProblem {
  std::string kind;   // "missing-file", "tiling", "partition-size", "steps-differ", "groups-differ", "file"
  std::string where;  // file or "group G, parameter NAME"
  std::string message;
};

struct ZeroRank {
  std::string optim_path;                  // "" when the file is missing
  std::string model_path;                  // stage 3: each rank's; else the one model states file
  std::unique_ptr<CheckpointFile> optim;   // null when missing or unreadable
  std::unique_ptr<CheckpointFile> model;   // stage 3 only (rank 0's is also `ZeroCheckpoint::model`)
  NodeId optimizer_state_dict = kNoNode;   // the torch optimizer's {state, param_groups} in `optim`
  std::vector<NodeId> fp32_partitions;     // per group: the flat fp32 master weights tensor node
  std::vector<double> steps;               // per group: the state's step (NaN if none)
  // Stages 1, 2, per group: group_paddings, the padding DeepSpeed cut off the
  // end of this rank's saved fp32 partition (its optimizer state keeps it).
  std::vector<uint64_t> saved_padding;
};

struct ZeroCheckpoint {
  std::string dir;           // the tag directory
  int stage = 0;
  uint32_t world_size = 0;   // from partition_count
  std::string ds_version;
  std::string optim_prefix;  // "" or "bf16_"
  // DeepSpeed's BF16_Optimizer (bf16 with fp32 gradient accumulation at stage
  // 1) wrote the rank files: a stage-1 partition layout without zero_stage, and
  // each fp32 partition saved with its padding (ZeRO-1/2 cut it off).
  bool bf16_optimizer = false;
  std::vector<ZeroParam> params;  // trainable in group then flat order, then frozen
  std::vector<ZeroGroup> groups;
  std::vector<std::string> buffer_names;
  std::vector<std::pair<std::string, std::string>> shared_params;  // (alias, source)
  std::vector<ZeroRank> ranks;
  std::unique_ptr<CheckpointFile> model;  // mp_rank_00_model_states.pt (rank 0's, stage 3)
  std::vector<ZeroLayoutProblem> problems;
  bool ok() const { return problems.empty(); }
};

// True when `dir` holds DeepSpeed's ZeRO files (*_optim_states.pt beside
// *_model_states.pt).
bool IsZeroTagDirectory(const std::string& dir);

// Reads the tag directory `dir` (or the directory its `latest` file names).
// Errors only for what makes it no ZeRO checkpoint at all (no model states
// file, not a DeepSpeed save, model parallelism, an unreadable rank 0 file);
// everything else is a problem in the result.
StatusOr<std::unique_ptr<ZeroCheckpoint>> OpenZeroCheckpoint(const std::string& dir, const ReadOptions& read = {});

// The tensor node of optimizer state `field` of group `group` on `rank`
// (kNoNode if absent).
NodeId ZeroStateTensor(const ZeroCheckpoint& zero, uint32_t rank, size_t group, const std::string& field);

// A DeepSpeed ZeRO checkpoint -> one torch.save file, without DeepSpeed:
//
//   {"model": OrderedDict(name -> tensor),      the fp32 master weights of every
//                                               trainable parameter (what
//                                               zero_to_fp32 gives), frozen
//                                               parameters and buffers as saved
//                                               (also the frozen ones ZeRO-1 does
//                                               not list, which zero_to_fp32 drops),
//                                               in the model's state_dict order
//    "optimizer": {"state": {...}, "param_groups": [...]}}
//                                               torch.optim's own layout: one
//                                               entry per trainable parameter,
//                                               keyed 0..N-1 in param group order
//                                               (or by name), each group's
//                                               hyperparameters as saved
//
// Streamed: every parameter's record is written as the pieces of the rank
// partitions it lies in, written from the mapped rank files a chunk at a time
// (summed for the CRC on the way, the chunk's pages then let go), so memory
// stays bounded by the pickle, whatever the checkpoint's size. Refused
// (nothing written) while OpenZeroCheckpoint recorded any layout problem.

enum class ZeroStateKeys { kIndex, kFqn };

struct ZeroConsolidateOptions {
  ZeroStateKeys keys = ZeroStateKeys::kIndex;
  WriteOptions write;
  // Called after each tensor with bytes done and total tensor bytes.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Several processes write the one file, as ConsolidateOptions::coordinator
  // (dcp.h) says. Null: this process alone.
  Coordinator* coordinator = nullptr;
};

struct ZeroConsolidateReport {
  size_t trainable = 0;        // parameters rebuilt from the partitions
  size_t frozen = 0;
  // Frozen parameters the model states do not list (ZeRO-1 saves
  // frozen_param_shapes as None), taken from its module entry as saved.
  std::vector<std::string> unlisted_frozen;
  size_t buffers = 0;
  size_t shared = 0;           // aliases of another parameter (tied weights)
  size_t state_entries = 0;    // optimizer state entries written
  std::vector<std::string> state_fields;  // per entry, e.g. exp_avg, exp_avg_sq, step
  uint64_t tensor_bytes = 0;
  size_t pieces = 0;           // rank partition ranges copied
  WriteReport write;
  std::string unconfirmed;     // as ConsolidateReport::unconfirmed (dcp.h)
};

StatusOr<ZeroConsolidateReport> ConsolidateZero(const ZeroCheckpoint& zero, const std::string& output,
                                                const ZeroConsolidateOptions& options = {});

// A ZeRO checkpoint consolidated (index keys) as ConsolidateDcpToScratch
// consolidates a DCP directory (dcp.h).
struct ConsolidatedZero {
  ScratchFile file;
  ZeroConsolidateReport report;
};
StatusOr<ConsolidatedZero> ConsolidateZeroToScratch(const ZeroCheckpoint& zero, const std::string& scratch_parent,
                                                    const ZeroConsolidateOptions& options = {});

}  // namespace optstate

#endif  // OPTSTATE_ZERO_H_
