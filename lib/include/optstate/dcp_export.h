// Producing DCP checkpoints (dcp_writer.h does the writing):
//   ReshardDcp   a DCP directory to another number of ranks; each output chunk
//                is assembled from the input chunks it overlaps, one at a time.
//   ExportToDcp  a torch.save file to a DCP directory of `world_size` ranks,
//                flattened as torch 2.4+'s DCP flattens a state dict: every dict
//                is descended (keys become str(key); an empty dict vanishes), a
//                list only when it holds a tensor, a dict or such a list,
//                everything else (tuples, scalars, lists of plain values) is one
//                bytes item. Flat keys join the path with ".".
#ifndef OPTSTATE_DCP_EXPORT_H_
#define OPTSTATE_DCP_EXPORT_H_

#include <string>

#include "optstate/checkpoint.h"
#include "optstate/dcp_checkpoint.h"
#include "optstate/dcp_writer.h"

namespace optstate {

// `coordinator`: see WriteDcp (several processes writing one output).
StatusOr<DcpWriteReport> ReshardDcp(const DcpCheckpoint& input, const std::string& dir,
                                    const DcpWriteOptions& options, const ReadOptions& read = {},
                                    Coordinator* coordinator = nullptr);

StatusOr<DcpWriteReport> ExportToDcp(const CheckpointFile& input, const std::string& dir,
                                     const DcpWriteOptions& options, Coordinator* coordinator = nullptr);

}  // namespace optstate

#endif  // OPTSTATE_DCP_EXPORT_H_
