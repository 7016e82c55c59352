// Writes a torch.save zip from a checkpoint's object graph: data.pkl from the
// pickle writer, then every storage the graph uses, copied as byte ranges from
// the input (never decoded), then byteorder and version. Memory stays bounded
// by the pickle, not the tensors. The output appears atomically or not at all.
#ifndef OPTSTATE_CHECKPOINT_WRITER_H_
#define OPTSTATE_CHECKPOINT_WRITER_H_

#include <functional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/file_io.h"

namespace optstate {

struct WriteOptions {
  bool zstd = false;  // compress the whole file with zstd (a .zst that optstate reads directly)
  Durability durability = Durability::kSynced;
  // torch.save names the zip's top directory after the file; an output
  // written under another name first (renamed later) is named after this path.
  std::string named_after;
};

struct WriteReport {
  uint64_t bytes = 0;           // size of the output file (compressed, with zstd)
  size_t storages = 0;          // storage records written
  uint64_t storage_bytes = 0;
  std::vector<std::string> unsafe_globals;  // torch.load(weights_only=True) would refuse these
  // ... unless torch.distributed.tensor is imported first: every unsafe global
  // is a DTensor class that the import allowlists (FSDP2 files).
  bool loadable_after_dtensor_import = false;
};

// "accepts it", "accepts it once torch.distributed.tensor is imported" or
// "refuses it (module.name ...)": what torch 2.6's torch.load(weights_only=True) does.
std::string WeightsOnlyVerdict(const WriteReport& report);

// `root` is the object to save (usually the checkpoint's root). The zip's top
// directory is the output file's name without its extension, as torch names it.
StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, NodeId root, const std::string& path,
                                      const WriteOptions& options = {});

// The same for `checkpoint`, an edited copy of input's, whose tensors still
// refer to input's bytes.
StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, const Checkpoint& checkpoint, NodeId root,
                                      const std::string& path, const WriteOptions& options = {});

using StorageSource = std::function<StatusOr<ByteSpan>(size_t storage_index)>;

// The same, where storages marked `computed` (values optstate derived, such as
// migrate's rotated moments) get their bytes from `computed`, called with
// their index in checkpoint.storages as each record is written.
StatusOr<WriteReport> WriteCheckpoint(const CheckpointFile& input, const Checkpoint& checkpoint, NodeId root,
                                      const std::string& path, const StorageSource& computed,
                                      const WriteOptions& options = {});

// A checkpoint made from scratch (regenerate, export): the graph's storages
// have no input file behind them, and `source` hands over each one's bytes
// when its record is written, in the order the pickle first uses them (so a
// producer can compute them one tensor at a time). The span must stay valid
// until the next call.
StatusOr<WriteReport> WriteNewCheckpoint(const Checkpoint& checkpoint, NodeId root, const std::string& path,
                                         const StorageSource& source, const WriteOptions& options = {});

// The same with each storage given as pieces (a tensor assembled from DCP
// chunks that each hold whole rows): pieces with a known CRC and a file
// source are copied by the kernel, the others written (and summed) from
// memory, and the record's CRC combined from theirs.
using StoragePiecesSource = std::function<StatusOr<std::vector<RecordPiece>>(size_t storage_index)>;
// `release` is called with each range written from memory (to drop mapped pages).
StatusOr<WriteReport> WriteNewCheckpointFromPieces(const Checkpoint& checkpoint, NodeId root,
                                                   const std::string& path, const StoragePiecesSource& source,
                                                   const WriteOptions& options = {},
                                                   const std::function<void(ByteSpan)>& release = nullptr);

// The same, written at the current position of `out` as one item of a larger
// file (a DCP .distcp item): offsets inside the zip count from where it starts,
// and its top directory is "archive", as torch.save into a buffer names it.
// report.bytes is the item's length.
StatusOr<WriteReport> WriteEmbeddedCheckpoint(const Checkpoint& checkpoint, NodeId root, OutputStream& out,
                                              const StorageSource& source);
StatusOr<WriteReport> WriteEmbeddedCheckpointFromPieces(const Checkpoint& checkpoint, NodeId root, OutputStream& out,
                                                        const StoragePiecesSource& source,
                                                        const std::function<void(ByteSpan)>& release = nullptr);

}  // namespace optstate

#endif  // OPTSTATE_CHECKPOINT_WRITER_H_
