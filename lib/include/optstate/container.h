// What kind of file a checkpoint is, and the facts about its container that can
// be had without parsing the pickle: the first layer of `optstate inspect`.
//
//   zip     torch.save since 1.6: records under one directory (see zip_archive.h)
//   legacy  torch.save before 1.6 or with _use_new_zipfile_serialization=False:
//           a sequence of pickles starting with a fixed magic number
//   zstd    a zstd-compressed file (the inner format is peeked at, not unpacked)
#ifndef OPTSTATE_CONTAINER_H_
#define OPTSTATE_CONTAINER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "optstate/byte_cursor.h"
#include "optstate/status.h"
#include "optstate/zip_archive.h"

namespace optstate {

enum class ContainerFormat { kZip, kLegacy, kZstd, kSafetensors };

std::string_view ContainerFormatName(ContainerFormat format);  // "zip", "legacy", "zstd", "safetensors"

// The format the first bytes announce (zip: the end record's signature), or
// nothing; reads no directory, so it costs the same for any number of records.
std::optional<ContainerFormat> SniffContainerFormat(ByteSpan data);

struct ContainerInfo {
  ContainerFormat format = ContainerFormat::kZip;
  uint64_t file_size = 0;

  // zip only.
  ZipArchive zip;
  int pickle_protocol = -1;              // of data.pkl; -1 when it has no PROTO opcode
  std::optional<std::string> version;    // content of the 'version' record, trimmed
  std::optional<std::string> byteorder;  // 'byteorder' record (torch >= 2.1)
  std::optional<std::string> serialization_id;  // '.data/serialization_id' (torch >= 2.1)
  uint64_t storage_records = 0;          // records under data/
  uint64_t storage_bytes = 0;            // their total size
  bool crc_checked = false;              // CRCs of every record were verified

  // zstd only.
  std::optional<uint64_t> zstd_content_size;       // when the frame header declares it
  std::optional<ContainerFormat> zstd_inner_format;  // from the first decompressed bytes
};

struct ContainerOptions {
  bool verify_crc = false;  // recompute every record's CRC-32 (reads all data)
  bool resolve_offsets = false;  // read every local header, for listings of data offsets
  // Called with each record's bytes once its CRC is verified, so a mapped file's
  // pages can be released (verifying a 40 GB file must not keep 40 GB resident).
  std::function<void(ByteSpan)> done_with;
  ZipLimits zip;
};

// Identifies and describes the checkpoint in `cursor`. Errors: kUnsupported for
// a file that is none of the formats above (naming what its first bytes look
// like), and the zip layer's errors.
StatusOr<ContainerInfo> InspectContainer(const ByteCursor& cursor, const ContainerOptions& options);

}  // namespace optstate

#endif  // OPTSTATE_CONTAINER_H_
