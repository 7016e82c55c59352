// A DCP checkpoint directory: `.metadata` plus the `__<rank>_<n>.distcp` data
// files it names, each mapped read-only.
//
// OpenDcpCheckpoint parses and checks .metadata (dcp_metadata.h), then checks
// every location against the data files actually present: a missing file or an
// item reaching past a file's end is refused before any item is read. Items
// are complete torch.save zips; they are parsed in place, one at a time, so
// memory stays bounded by one item, never the checkpoint.
#ifndef OPTSTATE_DCP_CHECKPOINT_H_
#define OPTSTATE_DCP_CHECKPOINT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/dcp_metadata.h"
#include "optstate/file_io.h"
#include "optstate/zip_writer.h"

namespace optstate {

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

}  // namespace optstate

#endif  // OPTSTATE_DCP_CHECKPOINT_H_
