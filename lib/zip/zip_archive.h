// The zip container of torch.save files (and of every DCP item).
//
// torch.save writes an ordinary zip: one top directory ("archive/" or the file's
// base name), every record stored uncompressed at a 64-byte aligned offset, the
// real sizes and CRCs in the central directory, zip64 end records always present.
// We read the central directory and check every offset and size against the
// bytes present. A record's data starts after its local header, whose length
// is only known by reading it; like torch and Python's zipfile we read it only
// when the record is used, since touching a thousand local headers spread over
// a 40 GB file costs a thousand disk seeks.
//
// Offsets are relative to the buffer given, which may be a slice of a larger
// file (a DCP item); errors report absolute offsets via ByteCursor's base.
#ifndef OPTSTATE_ZIP_ARCHIVE_H_
#define OPTSTATE_ZIP_ARCHIVE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/compact_containers.h"
#include "optstate/status.h"

namespace optstate {

// 48 bytes and the name's heap block: a checkpoint of 10^5 parameters has
// 4 * 10^5 records, each with a name of ~20 bytes.
struct ZipEntry {
  CompactText name;
  uint64_t compressed_size = 0;
  uint64_t size = 0;            // uncompressed
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;     // first byte of the record's data, once known
  uint32_t crc32 = 0;           // from the central directory
  uint16_t method = 0;          // 0 stored; anything else we cannot read in place
  bool data_offset_known = false;
};

static_assert(sizeof(ZipEntry) <= 48, "one per record: 4 * 10^5 of them at 10^5 parameters");

struct ZipArchive {
  std::vector<ZipEntry> entries;  // central directory order
  std::string prefix;             // text before the first '/' of the first entry
  bool zip64 = false;             // zip64 end-of-central-directory present
  uint64_t directory_offset = 0;  // where the central directory lies in the zip
  uint64_t directory_size = 0;
  // Positions in `entries` sorted by name, equal names in directory order:
  // Find is a binary search, so reading a file of n records costs n log n, not
  // n^2 (a checkpoint of 10^5 parameters has 4 * 10^5 records). Built by
  // ReadZipDirectory; when it does not cover `entries`, Find searches linearly.
  std::vector<uint32_t> by_name;
  // The data of stored records of at most kTinyRecordBytes (a parameter's
  // `step`) that ResolveZipDataOffsets read inside a header window, by the
  // address of their data in the cursor: validate reads each step value, and
  // one pread per value was 10^4 system calls for a file of 10^4 parameters.
  static constexpr size_t kTinyRecordBytes = 8;
  struct TinyRecord {
    const std::byte* data;
    std::array<std::byte, kTinyRecordBytes> bytes;
    uint8_t size;
  };
  std::vector<TinyRecord> tiny_records;  // ascending by data

  // The `size` bytes at `at` when they lie inside one tiny record; else empty.
  std::optional<ByteSpan> TinyRecordBytes(const std::byte* at, uint64_t size) const;

  // The first entry named "<prefix>/<record>" (the one torch 2.6 reads); else,
  // as torch's zip reader (miniz, no case-sensitive flag) also matches, the
  // first whose name equals it ignoring ASCII case; or nullptr.
  const ZipEntry* Find(std::string_view record) const;
  // Only "<prefix>/<record>" exactly (torch's get_all_records() membership test).
  const ZipEntry* FindExactlyNamed(std::string_view record) const { return FindExactly(record); }

 private:
  const ZipEntry* FindExactly(std::string_view record) const;
};

// `name` is `record` or ends with "/<record>", ignoring ASCII case: every zip
// record torch's reader could take for that record.
bool NameIsRecord(std::string_view name, std::string_view record);

// Whether two record names are the same to torch's reader (ASCII case ignored).
bool SameRecordName(std::string_view a, std::string_view b);
// Each record whose name SameRecordName calls the name of an earlier record,
// as (its index, the first such earlier record's index), in directory order.
// One 4-byte slot per record, twice over: at 4 * 10^6 records 32 MB, where a
// map of folded names held ~380 MB at the parse's peak.
std::vector<std::pair<size_t, size_t>> RecordsNamedAlike(const std::vector<ZipEntry>& entries);

struct ZipLimits {
  uint64_t max_entries = kDefaultMaxZipEntries;
};

// Parses the directory of the zip in `cursor` (from its start to its end).
// Errors: kCorrupt (no end record, bad signatures, entries outside the data,
// entries outside the prefix directory), kTruncated, kLimitExceeded.
StatusOr<ZipArchive> ReadZipDirectory(const ByteCursor& cursor, const ZipLimits& limits = {});

// Where `entry`'s data starts (reads its local header unless already known).
// `fd` (optional): the file whose byte 0 is the cursor's byte 0; the header is
// then read from it with pread when it can be.
StatusOr<uint64_t> ZipEntryDataOffset(const ByteCursor& cursor, const ZipEntry& entry, int fd = -1);

// A local header's fixed part: signature to extra-field length.
inline constexpr size_t kLocalHeaderFixedBytes = 30;
// Whether the fixed part of `entry`'s local header lies within `size` bytes.
inline bool LocalHeaderFits(const ZipEntry& entry, uint64_t size) {
  return entry.local_header_offset <= size && size - entry.local_header_offset >= kLocalHeaderFixedBytes;
}
// Where `entry`'s data starts, from the kLocalHeaderFixedBytes of its local
// header at `fixed` (read by the caller), checked as ZipEntryDataOffset does.
StatusOr<uint64_t> DataOffsetFromLocalHeader(const ByteCursor& cursor, const ZipEntry& entry, const std::byte* fixed);

// Resolves every entry's data offset (for listings that show them).
// `header_read` (optional) is given each local header's bytes once read, so
// a caller reading a mapping can release them as it goes: at 4 * 10^5 records
// they are every page of the file. `fd` (optional): the file whose byte 0 is
// the cursor's byte 0; local headers are then read from it with pread, which
// costs less than the first touch of a mapped page per record (and leaves no
// page to release, so `header_read` is not called). Headers that follow one
// another within 128 KiB of the file are read by one pread (local_headers.cc),
// and the data of tiny records inside such a read is kept (tiny_records).
// `record_read` (optional, with `fd`) is given each stored record that lies
// whole inside such a read: where its data lies in the cursor, and the bytes
// read (valid during the call), so a caller can use them instead of reading
// them again.
using RecordBytesRead = std::function<void(ByteSpan where, ByteSpan bytes)>;
Status ResolveZipDataOffsets(const ByteCursor& cursor, ZipArchive& archive,
                             const std::function<void(ByteSpan)>& header_read = nullptr, int fd = -1,
                             const RecordBytesRead& record_read = nullptr);

// The stored bytes of `entry`. kUnsupported for a compressed record.
StatusOr<ByteSpan> ZipEntryData(const ByteCursor& cursor, const ZipEntry& entry);

// Recomputes the CRC-32 of a stored record; kCorrupt naming the record and both
// values when it differs from the central directory's.
Status VerifyZipEntryCrc(const ByteCursor& cursor, const ZipEntry& entry);

// A deflated record (method 8), inflated: at most `cap` bytes, and exactly the
// size its directory entry declares. torch.save never deflates, but torch's
// reader accepts it, so the security scan reads such records this way.
StatusOr<std::vector<std::byte>> InflateZipEntry(const ByteCursor& cursor, const ZipEntry& entry, uint64_t cap);

// True when `data` starts with a local file header ("PK\3\4").
bool LooksLikeZip(ByteSpan data);

}  // namespace optstate

#endif  // OPTSTATE_ZIP_ARCHIVE_H_
