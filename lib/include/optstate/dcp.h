// torch.distributed.checkpoint (DCP) directories: read in place, consolidated
// into one torch.save file, written, resharded and exported to.
#ifndef OPTSTATE_DCP_H_
#define OPTSTATE_DCP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/checkpoint_writer.h"
#include "optstate/coordinator.h"
#include "optstate/dcp_metadata.h"
#include "optstate/file_io.h"
#include "optstate/status.h"

namespace optstate {

// A DCP checkpoint directory: `.metadata` plus the `__<rank>_<n>.distcp` data
// files it names, each mapped read-only.
//
// OpenDcpCheckpoint parses and checks .metadata (dcp_metadata.h), then checks
// every location against the data files actually present: a missing file or an
// item reaching past a file's end is refused before any item is read. Items
// are complete torch.save zips; they are parsed in place, one at a time, so
// memory stays bounded by one item, never the checkpoint.

struct DcpDataFile {
  std::string name;       // relative path as .metadata gives it
  uint64_t size = 0;
  uint64_t items = 0;     // locations in it
  uint64_t item_bytes = 0;
};

class DcpCheckpoint {
 public:
  const std::string& dir() const { return dir_; }
  const DcpMetadata& metadata() const { return metadata_; }
  uint64_t metadata_bytes() const { return metadata_bytes_; }
  const std::vector<DcpDataFile>& files() const { return files_; }  // sorted by name

  // The bytes of one item (checked against its file at open).
  ByteSpan ItemBytes(const DcpLocation& where) const;
  // Where those bytes are in the file, for in-kernel copies.
  FileRange ItemFileRange(const DcpLocation& where) const;

  // Parses an item as the torch.save zip it is. Errors name the data file and
  // offsets within it.
  StatusOr<Checkpoint> ParseItem(const DcpLocation& where, const ReadOptions& options = {}) const;

  // A chunk's elements in C order, checked against the entry's dtype and the
  // chunk's sizes. Points into the mapped file when the stored tensor is
  // contiguous (DCP stores exactly the chunk); else copies into `scratch`.
  StatusOr<ByteSpan> ChunkBytes(const DcpEntry& entry, const DcpChunk& chunk, std::vector<std::byte>& scratch,
                                const ReadOptions& options = {}) const;

  // The chunk as a piece of a record for the zip writer, when its item stores
  // exactly the chunk's bytes in one stored record (as DCP writes items): the
  // piece then carries that record's CRC and file position, so the bytes can be
  // copied by the kernel. nullopt when the item is laid out otherwise.
  StatusOr<std::optional<RecordPiece>> ChunkPiece(const DcpEntry& entry, const DcpChunk& chunk,
                                                  const ReadOptions& options = {}) const;

  // Rows [begin, end) of dim 0 of a tensor whose chunks hold whole rows, as
  // pieces of the chunks' own records (ChunkPiece; a part of a record has no
  // known CRC); for a 0-d tensor, its one chunk. Empty when the layout does not
  // allow it: then CopyRows gathers the rows through memory.
  StatusOr<std::vector<RecordPiece>> RowPieces(const DcpEntry& entry, int64_t begin, int64_t end,
                                               const ReadOptions& options = {}) const;

  // Writes rows [begin, end) of dim 0 (a 0-d tensor: rows [0, 1)) in C order to
  // `out`, from every chunk they overlap; elements no chunk holds are left as
  // they were. Input pages are dropped as each chunk is done.
  Status CopyRows(const DcpEntry& entry, int64_t begin, int64_t end, std::byte* out,
                  const ReadOptions& options = {}) const;

  // Drops resident pages of a range once copied: gathered per file and
  // released a stretch at a time, since an item of a few hundred bytes holds
  // no whole page of its own (ReleaseInBatches).
  void ReleasePages(ByteSpan range) const;

 private:
  friend StatusOr<std::unique_ptr<DcpCheckpoint>> OpenDcpCheckpoint(const std::string&, const DcpMetadataLimits&);
  const MappedFile& FileOf(const DcpLocation& where) const { return *mapped_.at(where.relative_path); }
  // Parses a chunk's item and checks it against .metadata; `context` names it for errors.
  StatusOr<Checkpoint> ParseChunk(const DcpEntry& entry, const DcpChunk& chunk, const ReadOptions& options,
                                  std::string& context) const;

  std::string dir_;
  DcpMetadata metadata_;
  uint64_t metadata_bytes_ = 0;
  std::vector<DcpDataFile> files_;
  std::map<std::string, std::unique_ptr<MappedFile>> mapped_;
  // After mapped_: flushed (on destruction) while the files are still mapped.
  mutable std::map<const MappedFile*, std::unique_ptr<ReleaseInBatches<MappedFile>>> released_;
};

// Is `path` a DCP checkpoint directory (a directory holding .metadata)?
bool IsDcpDirectory(const std::string& path);

// Errors start with the directory (or its .metadata / data file).
StatusOr<std::unique_ptr<DcpCheckpoint>> OpenDcpCheckpoint(const std::string& dir,
                                                           const DcpMetadataLimits& limits = {});

// "[8, 0]" style text for a "where" in messages: "__1_0.distcp bytes 1244..2488".
std::string DcpLocationText(const DcpLocation& where);

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
  // Several processes write the one file (each its share of the tensors, into
  // "<dir>/.<name>.partial", which process 0 renames into place once all have
  // written): the same bytes as one process writes. Null: this process alone.
  Coordinator* coordinator = nullptr;
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
  // With a coordinator: why some process did not hear that the file was
  // committed, when a fault came after every process had written ("" when all heard).
  std::string unconfirmed;
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

// A DCP directory consolidated (FQN keys, as dcp_to_torch_save) into a scratch
// directory under `scratch_parent` (the system's temporary directory for
// commands that only read), removed with the last copy of this: for commands
// that read one torch.save file (verify). Costs a copy of the tensor bytes on
// disk while it lives.
struct ConsolidatedDcp {
  ScratchFile file;
  ConsolidateReport report;
};
StatusOr<ConsolidatedDcp> ConsolidateDcpToScratch(const std::string& dcp_dir, const std::string& scratch_parent,
                                                  const ConsolidateOptions& options);

// Writes a DCP checkpoint directory that torch.distributed.checkpoint (2.6)
// loads: one `__<rank>_0.distcp` per rank holding complete torch.save zips,
// then `.metadata` (the Metadata dataclasses as DCP pickles them).
//
// Tensors are split on dim 0 the way FSDP2 shards them (torch.chunk: chunks of
// ceil(rows / world_size) rows, so the last ranks may get fewer rows or none).
// Values that are not split (0-d tensors such as `step`, bytes items) go to the
// rank with the fewest bytes so far, as DCP's dedup spreads them.
//
// The directory appears complete or not at all: everything is written into a
// temporary directory beside it, synced, and renamed into place last. Memory
// holds one output chunk at a time.

// An entry to write: its key, path, kind, dtype and global size (the DcpEntry
// part; chunks and locations are the writer's to fill), and how to get its data.
struct DcpOutEntry : DcpEntry {
  // Tensors: writes the C-order elements of rows [row_begin, row_end) of dim 0
  // (for a 0-d tensor: its one element, rows [0, 1)) into `out`, which has room
  // for exactly that many bytes.
  std::function<Status(int64_t row_begin, int64_t row_end, std::byte* out)> rows;
  // Optional, tried before `rows`: the same rows as pieces of files (parts of
  // input chunks) that the kernel copies; an empty result means "use rows".
  std::function<StatusOr<std::vector<RecordPiece>>(int64_t row_begin, int64_t row_end)> pieces;
  // Called with memory the pieces were read from, once written.
  std::function<void(ByteSpan)> release;
  // Bytes items: writes the complete torch.save zip of the value.
  std::function<Status(OutputStream& out)> write_item;
};

struct DcpWriteOptions {
  int world_size = 1;
  Durability durability = Durability::kSynced;
  std::function<void(uint64_t done, uint64_t total)> progress;  // tensor bytes
};

struct DcpWriteReport {
  std::vector<uint64_t> file_bytes;  // per rank (every rank's, in every process)
  size_t tensors = 0;
  size_t chunks = 0;                 // non-empty chunks written
  size_t bytes_items = 0;
  uint64_t tensor_bytes = 0;
  uint64_t written_tensor_bytes = 0; // by this process
  uint64_t largest_chunk_bytes = 0;  // the largest chunk that went through memory (0: none did)
  uint64_t metadata_bytes = 0;
  // Staging directories beside the output that killed runs left behind
  // (".<name>.tmp-XXXXXX"): listed for the user to remove, never touched.
  std::vector<std::string> leftovers;
  // Why some process did not hear that the output was committed, when a fault
  // came after every process had written its part ("" when all heard): on rank
  // 0, which committed; on another rank, which found the output committed with
  // its own files in it.
  std::string unconfirmed;
};

// Refuses an existing `dir`: choose a new one (nothing is ever overwritten).
// With a coordinator of P processes (all given the same entries, directory and
// options), process p writes the files of ranks p, p + P, ... into a staging
// directory on a filesystem they share; rank 0 makes it, gathers everyone's
// item locations, writes .metadata last and renames the directory into place.
// The bytes are the same whatever P is. If any process fails before every one
// has written its part, all fail and nothing appears. After that only rank 0's
// commit remains: a fault then (a process killed or cut off) does not stop it;
// rank 0 succeeds with `unconfirmed` saying who did not hear. Another process
// whose last exchange failed looks for its own files (same inodes) and .metadata
// at `dir`: there, it succeeds with `unconfirmed` saying so; otherwise it fails
// naming the fault.
StatusOr<DcpWriteReport> WriteDcp(const std::vector<DcpOutEntry>& entries, const std::string& dir,
                                  const DcpWriteOptions& options, Coordinator* coordinator = nullptr);

// For several processes: each says whether it could open its input, and all
// fail (with the first failure) if one could not, so that nobody waits for a
// process that has given up.
Status AgreeToStart(Coordinator& coordinator, const Status& mine);

// The rows [begin, end) of dim 0 that `rank` holds of a tensor with `rows` rows.
std::pair<int64_t, int64_t> ChunkRows(int64_t rows, int world_size, int rank);

// Producing DCP checkpoints (WriteDcp above does the writing):
//   ReshardDcp   a DCP directory to another number of ranks; each output chunk
//                is assembled from the input chunks it overlaps, one at a time.
//   ExportToDcp  a torch.save file to a DCP directory of `world_size` ranks,
//                flattened as torch 2.4+'s DCP flattens a state dict: every dict
//                is descended (keys become str(key); an empty dict vanishes), a
//                list only when it holds a tensor, a dict or such a list,
//                everything else (tuples, scalars, lists of plain values) is one
//                bytes item. Flat keys join the path with ".".

// `coordinator`: see WriteDcp (several processes writing one output).
StatusOr<DcpWriteReport> ReshardDcp(const DcpCheckpoint& input, const std::string& dir,
                                    const DcpWriteOptions& options, const ReadOptions& read = {},
                                    Coordinator* coordinator = nullptr);

StatusOr<DcpWriteReport> ExportToDcp(const CheckpointFile& input, const std::string& dir,
                                     const DcpWriteOptions& options, Coordinator* coordinator = nullptr);

}  // namespace optstate

#endif  // OPTSTATE_DCP_H_
