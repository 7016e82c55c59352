// Reading a checkpoint's container (ContainerInfo, optstate/checkpoint.h): what
// kind of file it is, and the facts that can be had without parsing the pickle.
//
//   zip     torch.save since 1.6: records under one directory (see zip_archive.h)
//   legacy  torch.save before 1.6 or with _use_new_zipfile_serialization=False:
//           a sequence of pickles starting with a fixed magic number
//   zstd    a zstd-compressed file (the inner format is peeked at, not unpacked)
#ifndef OPTSTATE_TORCH_CONTAINER_H_
#define OPTSTATE_TORCH_CONTAINER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "optstate/status.h"
#include "torch/container.h"
#include "zip/zip_archive.h"

namespace optstate {

// The format the first bytes announce (zip: the end record's signature), or
// nothing; reads no directory, so it costs the same for any number of records.
std::optional<ContainerFormat> SniffContainerFormat(ByteSpan data);

struct ContainerOptions {
  bool verify_crc = false;  // recompute every record's CRC-32 (reads all data)
  bool resolve_offsets = false;  // read every local header, for listings of data offsets
  // Called with each record's bytes once its CRC is verified, so a mapped file's
  // pages can be released (verifying a 40 GB file must not keep 40 GB resident).
  std::function<void(ByteSpan)> done_with;
  ZipLimits zip;
  // The file the cursor maps from its byte 0, or -1: resolve_offsets then reads
  // local headers with pread (ResolveZipDataOffsets).
  int fd = -1;
};

// Identifies and describes the checkpoint in `cursor`. Errors: kUnsupported for
// a file that is none of the formats above (naming what its first bytes look
// like), and the zip layer's errors.
StatusOr<ContainerInfo> InspectContainer(const ByteCursor& cursor, const ContainerOptions& options);

// A zip checkpoint's directory; an empty one for the other formats.
const ZipArchive& ZipDirectory(const ContainerInfo& info);

// Parses the zip or legacy checkpoint that fills `cursor` (OpenCheckpoint's
// work after the bytes are in hand; DCP items are parsed in place this way).
// `fd`: as ContainerOptions::fd.
StatusOr<Checkpoint> ParseCheckpoint(const ByteCursor& cursor, const ReadOptions& options = {}, int fd = -1);

}  // namespace optstate

#endif  // OPTSTATE_TORCH_CONTAINER_H_
