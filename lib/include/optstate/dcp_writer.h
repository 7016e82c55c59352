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
#ifndef OPTSTATE_DCP_WRITER_H_
#define OPTSTATE_DCP_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optstate/coordinator.h"
#include "optstate/dcp_metadata.h"
#include "optstate/file_io.h"
#include "optstate/status.h"
#include "optstate/zip_writer.h"

namespace optstate {

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
};

// Refuses an existing `dir`: choose a new one (nothing is ever overwritten).
// With a coordinator of P processes (all given the same entries, directory and
// options), process p writes the files of ranks p, p + P, ... into a staging
// directory on a filesystem they share; rank 0 makes it, gathers everyone's
// item locations, writes .metadata last and renames the directory into place.
// The bytes are the same whatever P is. If any process fails, all fail and
// nothing appears.
StatusOr<DcpWriteReport> WriteDcp(const std::vector<DcpOutEntry>& entries, const std::string& dir,
                                  const DcpWriteOptions& options, Coordinator* coordinator = nullptr);

// For several processes: each says whether it could open its input, and all
// fail (with the first failure) if one could not, so that nobody waits for a
// process that has given up.
Status AgreeToStart(Coordinator& coordinator, const Status& mine);

// The rows [begin, end) of dim 0 that `rank` holds of a tensor with `rows` rows.
std::pair<int64_t, int64_t> ChunkRows(int64_t rows, int world_size, int rank);

}  // namespace optstate

#endif  // OPTSTATE_DCP_WRITER_H_
