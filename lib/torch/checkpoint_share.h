// One torch.save file written by several processes at once (consolidate
// --distributed): every process lays out the whole file exactly as
// WriteNewCheckpointFromPieces writes it and writes only its share into a
// SharedOutputFile; process 0 then writes the central directory with every
// process's CRCs. Internal to lib/.
#ifndef OPTSTATE_TORCH_CHECKPOINT_SHARE_H_
#define OPTSTATE_TORCH_CHECKPOINT_SHARE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optstate/checkpoint_writer.h"
#include "optstate/coordinator.h"
#include "zip/zip_writer.h"

namespace optstate {

class SharedOutputFile;

struct CheckpointShare {
  std::unique_ptr<ZipWriter> zip;  // process 0 finishes it once every CRC is known
  WriteReport report;              // bytes: 0 until then
  std::vector<uint32_t> written;   // the zip records (storages) this process wrote
};

// The storages go to the processes in contiguous runs of about equal bytes, in
// file order; process 0 also writes data.pkl, byteorder and version. The zip's
// top directory is named after `named_after`, as the single-process writer
// names it after its output path. `share_planned` (optional) is told the bytes
// of this process's storages before any is written: its progress's total.
StatusOr<CheckpointShare> WriteCheckpointShare(const Checkpoint& checkpoint, NodeId root, SharedOutputFile& file,
                                               const std::string& named_after, int process, int processes,
                                               const StoragePiecesSource& source,
                                               const std::function<void(ByteSpan)>& release,
                                               const std::function<void(uint64_t)>& share_planned = nullptr);

// The whole write, coordinated (checkpoint_together.cc): the same bytes at
// `path` as WriteNewCheckpointFromPieces writes alone, every process writing its
// share. Fails every process if any fails before process 0's commit, leaving
// nothing. After it, a fault does not undo the commit: process 0 succeeds with
// `unconfirmed` saying who did not hear; another process succeeds (saying so)
// when the file at `path` is the one it wrote into, else fails naming the fault.
StatusOr<WriteReport> WriteCheckpointTogether(const Checkpoint& checkpoint, NodeId root, const std::string& path,
                                              const WriteOptions& options, const StoragePiecesSource& source,
                                              const std::function<void(ByteSpan)>& release, Coordinator& co,
                                              std::string& unconfirmed,
                                              const std::function<void(uint64_t)>& share_planned = nullptr);

}  // namespace optstate

#endif  // OPTSTATE_TORCH_CHECKPOINT_SHARE_H_
