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
#ifndef OPTSTATE_ZERO_CONSOLIDATE_H_
#define OPTSTATE_ZERO_CONSOLIDATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optstate/checkpoint_writer.h"
#include "optstate/zero_checkpoint.h"

namespace optstate {

enum class ZeroStateKeys { kIndex, kFqn };

struct ZeroConsolidateOptions {
  ZeroStateKeys keys = ZeroStateKeys::kIndex;
  WriteOptions write;
  // Called after each tensor with bytes done and total tensor bytes.
  std::function<void(uint64_t done, uint64_t total)> progress;
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
};

StatusOr<ZeroConsolidateReport> ConsolidateZero(const ZeroCheckpoint& zero, const std::string& output,
                                                const ZeroConsolidateOptions& options = {});

class StagingDirectory;

// A ZeRO checkpoint consolidated (index keys) into a scratch directory under
// `scratch_parent`, removed with this object: for commands that read one
// torch.save file (verify).
class ConsolidatedZero {
 public:
  static StatusOr<std::unique_ptr<ConsolidatedZero>> Create(const ZeroCheckpoint& zero, const std::string& scratch_parent,
                                                            const ZeroConsolidateOptions& options = {});
  ~ConsolidatedZero();
  const std::string& path() const { return path_; }
  const ZeroConsolidateReport& report() const { return report_; }

 private:
  ConsolidatedZero() = default;
  std::unique_ptr<StagingDirectory> scratch_;
  std::string path_;
  ZeroConsolidateReport report_;
};

}  // namespace optstate

#endif  // OPTSTATE_ZERO_CONSOLIDATE_H_
