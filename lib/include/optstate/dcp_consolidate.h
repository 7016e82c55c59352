// DCP directory -> one torch.save file, as torch's dcp_to_torch_save makes it:
// the nested structure rebuilt from planner_data (every mapping key a str, list
// indices as lists), each tensor whole, each bytes item's value as it was saved.
//
// Written tensor by tensor. Chunks that hold whole rows (FSDP2's dim-0 shards,
// replicated values) are consecutive pieces of their tensor's record: the
// kernel copies them from the data files and the record's CRC is combined from
// the items' own, so memory stays small whatever the sizes. Other layouts (a
// tensor split along a later dimension) are assembled in a buffer of the
// tensor's size.
#ifndef OPTSTATE_DCP_CONSOLIDATE_H_
#define OPTSTATE_DCP_CONSOLIDATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optstate/checkpoint_writer.h"
#include "optstate/dcp_checkpoint.h"

namespace optstate {

enum class ConsolidateKeys {
  kFqn,    // as dcp_to_torch_save: optimizer state keyed by parameter name
  kIndex,  // torch.optim's own layout: state keyed 0..N-1 in param_groups order,
           // params lists of indices, so Optimizer.load_state_dict takes it
};

struct ConsolidateOptions {
  ConsolidateKeys keys = ConsolidateKeys::kFqn;
  ReadOptions read;  // for every item (verify_crc checks each item's records)
  WriteOptions write;
  // Called after each tensor with bytes done and total tensor bytes.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct ConsolidateReport {
  size_t tensors = 0;
  size_t chunks = 0;
  size_t bytes_items = 0;
  uint64_t tensor_bytes = 0;
  uint64_t largest_tensor_bytes = 0;  // the largest tensor assembled in memory (0: none was)
  size_t optimizer_states = 0;        // rekeyed to indices (kIndex)
  // Optimizers saved flattened (DSD's flatten_optimizer_state_dict, torchtitan),
  // rebuilt as {"state", "param_groups"}: their paths, "" for the root.
  std::vector<std::string> unflattened;
  // State entries kept under their name because no param_group lists them (kIndex).
  std::vector<std::string> unlisted_state;
  WriteReport write;
};

// The object a DCP checkpoint saved, rebuilt as a torch.save graph: tensors
// are whole (one storage each, no bytes behind them yet), bytes items parsed.
// `checkpoint.findings` holds what the security scan found in bytes items
// (torch unpickles those with weights_only=False).
struct DcpGraph {
  Checkpoint checkpoint;
  std::vector<const DcpEntry*> storage_entry;  // the entry behind each storage
  ConsolidateReport counts;                    // all but `write`
};

StatusOr<DcpGraph> BuildDcpGraph(const DcpCheckpoint& dcp, ConsolidateKeys keys, const ReadOptions& read = {});

// A whole tensor of that graph in C order, assembled from its chunks.
StatusOr<std::vector<std::byte>> ReadDcpTensor(const DcpCheckpoint& dcp, const DcpGraph& graph, const TensorRef& t,
                                               const ReadOptions& read = {});

// Refuses bytes items whose pickles name code-running globals (torch would
// call them when loading), then writes the file.
StatusOr<ConsolidateReport> ConsolidateDcp(const DcpCheckpoint& dcp, const std::string& output,
                                           const ConsolidateOptions& options = {});

class StagingDirectory;

// A DCP directory consolidated (FQN keys, as dcp_to_torch_save) into a scratch
// directory under `scratch_parent` (the system's temporary directory for
// commands that only read), removed with this object: for commands that read
// one torch.save file (verify). Costs a copy of the tensor bytes on disk while
// it lives.
class ConsolidatedDcp {
 public:
  static StatusOr<std::unique_ptr<ConsolidatedDcp>> Create(const std::string& dcp_dir,
                                                           const std::string& scratch_parent,
                                                           const ConsolidateOptions& options);
  ~ConsolidatedDcp();
  const std::string& path() const { return path_; }
  const ConsolidateReport& report() const { return report_; }

 private:
  ConsolidatedDcp() = default;
  std::unique_ptr<StagingDirectory> scratch_;
  std::string path_;
  ConsolidateReport report_;
};

}  // namespace optstate

#endif  // OPTSTATE_DCP_CONSOLIDATE_H_
