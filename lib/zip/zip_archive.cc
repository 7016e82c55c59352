#include "zip/zip_archive.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "io/byte_cursor.h"
#include "io/crc32.h"
#include "optstate/file_io.h"
#include "zip/inflate.h"

namespace optstate {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kEndSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kMaxCommentSize = 0xFFFF;

std::string Hex32(uint32_t v) {
  static const char* kDigits = "0123456789abcdef";
  std::string s = "0x00000000";
  for (int i = 9; i >= 2; --i, v >>= 4) s[i] = kDigits[v & 0xF];
  return s;
}

// The end-of-central-directory record is the last thing in the file, followed
// only by a comment of up to 64 KiB, so search backwards for its signature.
StatusOr<size_t> FindEndRecord(ByteSpan data) {
  if (data.size() < kEndSize) {
    return TruncatedError(std::to_string(data.size()) +
                          " bytes are too few for a zip end-of-central-directory record");
  }
  size_t lowest = data.size() > kEndSize + kMaxCommentSize ? data.size() - kEndSize - kMaxCommentSize : 0;
  for (size_t pos = data.size() - kEndSize + 1; pos-- > lowest;) {
    if (LoadU32LEUnchecked(data.data() + pos) == kEndSig) return pos;  // pos + 22 <= size
  }
  return CorruptError("no zip end-of-central-directory record from offset " + std::to_string(lowest) +
                      " to the end of the file at offset " + std::to_string(data.size()) +
                      ": it was cut short (a partial copy or download), or it is no zip");
}

struct DirectoryLocation {
  uint64_t entries = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
  bool zip64 = false;
};

StatusOr<DirectoryLocation> ReadEndRecords(const ByteCursor& whole, size_t end_pos) {
  ByteCursor end = whole;
  OPTSTATE_RETURN_IF_ERROR(end.Seek(end_pos + 4, "end record"));
  OPTSTATE_ASSIGN_OR_RETURN(uint16_t disk, end.ReadU16LE("end record disk number"));
  OPTSTATE_ASSIGN_OR_RETURN(uint16_t cd_disk, end.ReadU16LE("end record directory disk"));
  OPTSTATE_ASSIGN_OR_RETURN(uint16_t disk_entries, end.ReadU16LE("end record entries on disk"));
  OPTSTATE_ASSIGN_OR_RETURN(uint16_t entries, end.ReadU16LE("end record entry count"));
  OPTSTATE_ASSIGN_OR_RETURN(uint32_t cd_size, end.ReadU32LE("end record directory size"));
  OPTSTATE_ASSIGN_OR_RETURN(uint32_t cd_offset, end.ReadU32LE("end record directory offset"));
  if (disk != 0 || cd_disk != 0 || disk_entries != entries) {
    return UnsupportedError("multi-disk zip archives");
  }
  DirectoryLocation loc{entries, cd_size, cd_offset, false};
  // torch always writes zip64 end records; they are authoritative when present.
  if (end_pos >= kZip64LocatorSize) {
    ByteCursor locator = whole;
    OPTSTATE_RETURN_IF_ERROR(locator.Seek(end_pos - kZip64LocatorSize, "zip64 locator"));
    OPTSTATE_ASSIGN_OR_RETURN(uint32_t sig, locator.ReadU32LE("zip64 locator signature"));
    if (sig == kZip64LocatorSig) {
      OPTSTATE_RETURN_IF_ERROR(locator.Skip(4, "zip64 locator disk"));
      OPTSTATE_ASSIGN_OR_RETURN(uint64_t z64_offset, locator.ReadU64LE("zip64 end offset"));
      ByteCursor z64 = whole;
      OPTSTATE_RETURN_IF_ERROR_CTX(z64.Seek(z64_offset, "zip64 end record"), "zip64 locator");
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t z64_sig, z64.ReadU32LE("zip64 end signature"));
      if (z64_sig != kZip64EndSig) {
        return CorruptError("offset " + std::to_string(whole.base_offset() + z64_offset) +
                            ": expected zip64 end record signature, found " + Hex32(z64_sig));
      }
      OPTSTATE_RETURN_IF_ERROR(z64.Skip(8 + 2 + 2 + 4 + 4 + 8, "zip64 end record fields"));
      OPTSTATE_ASSIGN_OR_RETURN(loc.entries, z64.ReadU64LE("zip64 entry count"));
      OPTSTATE_ASSIGN_OR_RETURN(loc.size, z64.ReadU64LE("zip64 directory size"));
      OPTSTATE_ASSIGN_OR_RETURN(loc.offset, z64.ReadU64LE("zip64 directory offset"));
      loc.zip64 = true;
    }
  }
  return loc;
}

// Central directory fields that do not fit 32 bits live in the zip64 extra field
// (id 1), in a fixed order, present only for the fields set to 0xFFFFFFFF.
Status ApplyZip64Extra(ByteCursor extra, ZipEntry& e, bool need_size, bool need_csize,
                       bool need_offset) {
  while (extra.remaining() >= 4) {
    OPTSTATE_ASSIGN_OR_RETURN(uint16_t id, extra.ReadU16LE("extra field id"));
    OPTSTATE_ASSIGN_OR_RETURN(uint16_t len, extra.ReadU16LE("extra field length"));
    OPTSTATE_ASSIGN_OR_RETURN(ByteSpan body, extra.ReadBytes(len, "extra field"));
    if (id != 1) continue;
    ByteCursor z(body, extra.offset() - len);
    // OPTSTATE_ASSIGN_OR_RETURN is several statements: braces are required.
    if (need_size) {
      OPTSTATE_ASSIGN_OR_RETURN(e.size, z.ReadU64LE("zip64 size"));
    }
    if (need_csize) {
      OPTSTATE_ASSIGN_OR_RETURN(e.compressed_size, z.ReadU64LE("zip64 compressed size"));
    }
    if (need_offset) {
      OPTSTATE_ASSIGN_OR_RETURN(e.local_header_offset, z.ReadU64LE("zip64 offset"));
    }
    return Status();
  }
  if (need_size || need_csize || need_offset) {
    return CorruptError("sizes marked as zip64 but no zip64 extra field");
  }
  return Status();
}

StatusOr<ZipEntry> ReadCentralEntry(ByteCursor& cd) {
  uint64_t start = cd.offset();
  OPTSTATE_ASSIGN_OR_RETURN(uint32_t sig, cd.ReadU32LE("central header signature"));
  if (sig != kCentralHeaderSig) {
    return CorruptError("offset " + std::to_string(start) +
                        ": expected central directory header, found " + Hex32(sig));
  }
  ZipEntry e;
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan fixed, cd.ReadBytes(42, "central header"));
  // Unchecked loads below are within the 42 bytes just checked.
  e.method = LoadU16LEUnchecked(fixed.data() + 6);
  e.crc32 = LoadU32LEUnchecked(fixed.data() + 12);
  uint32_t csize = LoadU32LEUnchecked(fixed.data() + 16);
  uint32_t size = LoadU32LEUnchecked(fixed.data() + 20);
  uint16_t name_len = LoadU16LEUnchecked(fixed.data() + 24);
  uint16_t extra_len = LoadU16LEUnchecked(fixed.data() + 26);
  uint16_t comment_len = LoadU16LEUnchecked(fixed.data() + 28);
  uint32_t local = LoadU32LEUnchecked(fixed.data() + 38);
  e.compressed_size = csize;
  e.size = size;
  e.local_header_offset = local;
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan name, cd.ReadBytes(name_len, "record name"));
  e.name = AsChars(name);
  uint64_t extra_at = cd.offset();
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan extra, cd.ReadBytes(extra_len, "extra field"));
  OPTSTATE_RETURN_IF_ERROR(cd.Skip(comment_len, "record comment"));
  OPTSTATE_RETURN_IF_ERROR_CTX(
      ApplyZip64Extra(ByteCursor(extra, extra_at), e, size == 0xFFFFFFFFu, csize == 0xFFFFFFFFu,
                      local == 0xFFFFFFFFu),
      "record '" + e.name + "'");
  return e;
}

// Checks what the central directory alone can: the local header and at least
// the compressed data fit in the file.
Status CheckEntryBounds(const ByteCursor& whole, const ZipEntry& e) {
  if (e.local_header_offset > whole.size() || 30 + e.compressed_size > whole.size() - e.local_header_offset) {
    return TruncatedError("record '" + e.name + "': offset " +
                          std::to_string(whole.base_offset() + e.local_header_offset) + ": local header and " +
                          std::to_string(e.compressed_size) +
                          " bytes of data end past the end of the data (" +
                          std::to_string(whole.base_offset() + whole.size()) + ")");
  }
  return Status();
}

}  // namespace

// Follows the local header to the first data byte and checks the range. With
// `fd`, the 30 fixed bytes come from a pread (no page of a mapping touched);
// when that read comes up short they are read through the cursor, whose
// errors say what.
StatusOr<uint64_t> ZipEntryDataOffset(const ByteCursor& whole, const ZipEntry& e, int fd) {
  if (e.data_offset_known) return e.data_offset;
  std::byte read[kLocalHeaderFixedBytes];
  if (fd < 0 || !LocalHeaderFits(e, whole.size()) ||
      ::pread(fd, read, sizeof read, static_cast<off_t>(e.local_header_offset)) != sizeof read) {
    ByteCursor local = whole;
    OPTSTATE_RETURN_IF_ERROR_CTX(local.Seek(e.local_header_offset, "local header"), "record '" + e.name + "'");
    OPTSTATE_ASSIGN_OR_RETURN(ByteSpan mapped, local.ReadBytes(sizeof read, "local header"));
    return DataOffsetFromLocalHeader(whole, e, mapped.data());
  }
  return DataOffsetFromLocalHeader(whole, e, read);
}

StatusOr<uint64_t> DataOffsetFromLocalHeader(const ByteCursor& whole, const ZipEntry& e, const std::byte* fixed) {
  // Built only for an error: this runs once per record of a checkpoint.
  auto ctx = [&e] { return "record '" + e.name + "'"; };
  uint32_t sig = LoadU32LEUnchecked(fixed);
  if (sig != kLocalHeaderSig) {
    return CorruptError(ctx() + ": offset " + std::to_string(whole.base_offset() + e.local_header_offset) +
                        ": expected local header, found " + Hex32(sig));
  }
  uint16_t name_len = LoadU16LEUnchecked(fixed + 26);
  uint16_t extra_len = LoadU16LEUnchecked(fixed + 28);
  uint64_t data_offset = e.local_header_offset + kLocalHeaderFixedBytes + name_len + extra_len;
  OPTSTATE_RETURN_IF_ERROR_CTX(whole.Slice(data_offset, e.compressed_size, "record data").status(), ctx());
  return data_offset;
}

namespace {

char FoldAsciiCase(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// FNV-1a over the folded bytes, then a 64-bit finalizer so that names that
// differ only in their last bytes spread over the whole table.
uint64_t FoldedNameHash(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(FoldAsciiCase(c))) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

}  // namespace

bool SameRecordName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (FoldAsciiCase(a[i]) != FoldAsciiCase(b[i])) return false;
  }
  return true;
}

std::vector<std::pair<size_t, size_t>> RecordsNamedAlike(const std::vector<ZipEntry>& entries) {
  std::vector<std::pair<size_t, size_t>> alike;
  // Open addressing, load at most one half: each slot holds 1 + the index of
  // the first record of its folded name, 0 when free.
  size_t capacity = 16;
  while (capacity < 2 * entries.size()) capacity *= 2;
  std::vector<uint32_t> slots(capacity, 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string_view name(entries[i].name);
    for (size_t at = FoldedNameHash(name) & (capacity - 1);; at = (at + 1) & (capacity - 1)) {
      if (slots[at] == 0) {
        slots[at] = static_cast<uint32_t>(i + 1);
        break;
      }
      const size_t first = slots[at] - 1;
      if (SameRecordName(entries[first].name, name)) {
        alike.emplace_back(i, first);
        break;
      }
    }
  }
  return alike;
}

bool NameIsRecord(std::string_view name, std::string_view record) {
  if (name.size() < record.size()) return false;
  if (!SameRecordName(name.substr(name.size() - record.size()), record)) return false;
  return name.size() == record.size() || name[name.size() - record.size() - 1] == '/';
}

std::optional<ByteSpan> ZipArchive::TinyRecordBytes(const std::byte* at, uint64_t size) const {
  auto after = std::upper_bound(tiny_records.begin(), tiny_records.end(), at,
                                [](const std::byte* p, const TinyRecord& r) { return p < r.data; });
  if (after == tiny_records.begin()) return std::nullopt;
  const TinyRecord& r = *(after - 1);
  const uint64_t skip = static_cast<uint64_t>(at - r.data);
  if (skip > r.size || size > r.size - skip) return std::nullopt;
  return ByteSpan(r.bytes.data() + skip, size);
}

const ZipEntry* ZipArchive::Find(std::string_view record) const {
  const ZipEntry* exact = FindExactly(record);
  if (exact != nullptr) return exact;
  for (const ZipEntry& e : entries) {
    std::string_view name(e.name);
    if (name.size() == prefix.size() + 1 + record.size() && SameRecordName(name.substr(0, prefix.size()), prefix) &&
        name[prefix.size()] == '/' && SameRecordName(name.substr(prefix.size() + 1), record)) {
      return &e;
    }
  }
  return nullptr;
}

const ZipEntry* ZipArchive::FindExactly(std::string_view record) const {
  auto named = [&](const ZipEntry& e) {
    return e.name.size() == prefix.size() + 1 + record.size() && e.name.starts_with(prefix) &&
           e.name[prefix.size()] == '/' && e.name.ends_with(record);
  };
  if (by_name.size() != entries.size()) {
    for (const ZipEntry& e : entries) {
      if (named(e)) return &e;
    }
    return nullptr;
  }
  // Every name starts with prefix + '/' (ReadZipDirectory checked), so names
  // sort as their record parts do.
  auto less = [&](uint32_t i, std::string_view r) {
    return std::string_view(entries[i].name).substr(prefix.size() + 1) < r;
  };
  auto it = std::lower_bound(by_name.begin(), by_name.end(), record, less);
  if (it == by_name.end() || !named(entries[*it])) return nullptr;
  return &entries[*it];
}

bool LooksLikeZip(ByteSpan data) {
  return data.size() >= 4 && LoadU32LEUnchecked(data.data()) == kLocalHeaderSig;
}

StatusOr<ZipArchive> ReadZipDirectory(const ByteCursor& cursor, const ZipLimits& limits) {
  OPTSTATE_ASSIGN_OR_RETURN(size_t end_pos, FindEndRecord(cursor.data()));
  OPTSTATE_ASSIGN_OR_RETURN(DirectoryLocation loc, ReadEndRecords(cursor, end_pos));
  if (loc.entries > limits.max_entries) {
    return LimitExceededError("zip declares " + std::to_string(loc.entries) +
                              " records; the limit is " + std::to_string(limits.max_entries));
  }
  // Each central header takes at least 46 bytes: check the count against the
  // directory's size before reserving anything.
  if (loc.entries > loc.size / 46) {
    return CorruptError("zip declares " + std::to_string(loc.entries) + " records in a " +
                        std::to_string(loc.size) + "-byte central directory");
  }
  OPTSTATE_ASSIGN_OR_RETURN(ByteCursor cd, cursor.Slice(loc.offset, loc.size, "central directory"));
  ZipArchive archive;
  archive.zip64 = loc.zip64;
  archive.directory_offset = loc.offset;
  archive.directory_size = loc.size;
  archive.entries.reserve(static_cast<size_t>(loc.entries));
  for (uint64_t i = 0; i < loc.entries; ++i) {
    // 4 * 10^6 records at 10^6 parameters: Ctrl-C is looked at every 2^16.
    if ((i & 0xffff) == 0xffff && CancellationRequested()) {
      return CancelledError("central directory record " + std::to_string(i) + ": cancelled");
    }
    OPTSTATE_ASSIGN_OR_RETURN(ZipEntry e, ReadCentralEntry(cd));
    OPTSTATE_RETURN_IF_ERROR(CheckEntryBounds(cursor, e));
    archive.entries.push_back(std::move(e));
  }
  if (archive.entries.empty()) return CorruptError("zip archive has no records");
  const std::string first = archive.entries.front().name;
  size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0) {
    return CorruptError("record '" + first + "' is not inside a top directory, as torch.save writes");
  }
  archive.prefix = first.substr(0, slash);
  const std::string directory = archive.prefix + "/";
  for (const ZipEntry& e : archive.entries) {
    if (!e.name.starts_with(directory)) {
      return CorruptError("record '" + e.name + "' lies outside the archive directory '" + directory + "'");
    }
  }
  archive.by_name.resize(archive.entries.size());
  for (uint32_t i = 0; i < archive.by_name.size(); ++i) archive.by_name[i] = i;
  std::stable_sort(archive.by_name.begin(), archive.by_name.end(), [&](uint32_t a, uint32_t b) {
    return archive.entries[a].name < archive.entries[b].name;
  });
  return archive;
}

StatusOr<ByteSpan> ZipEntryData(const ByteCursor& cursor, const ZipEntry& entry) {
  if (entry.method != 0) {
    return UnsupportedError("record '" + entry.name + "' is compressed (method " +
                            std::to_string(entry.method) + "); torch.save stores records");
  }
  OPTSTATE_ASSIGN_OR_RETURN(uint64_t offset, ZipEntryDataOffset(cursor, entry));
  OPTSTATE_ASSIGN_OR_RETURN(ByteCursor data, cursor.Slice(offset, entry.size, "record data"));
  return data.data();
}

Status VerifyZipEntryCrc(const ByteCursor& cursor, const ZipEntry& entry) {
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan data, ZipEntryData(cursor, entry));
  uint32_t actual = Crc32(data);
  if (actual != entry.crc32) {
    return CorruptError("record '" + entry.name + "': CRC-32 is " + Hex32(actual) +
                        ", the directory says " + Hex32(entry.crc32));
  }
  return Status();
}

StatusOr<std::vector<std::byte>> InflateZipEntry(const ByteCursor& cursor, const ZipEntry& entry, uint64_t cap) {
  if (entry.method != 8) {
    return UnsupportedError("record '" + entry.name + "' uses compression method " + std::to_string(entry.method) +
                            ", not deflate");
  }
  if (entry.size > cap) {
    return LimitExceededError("record '" + entry.name + "' declares " + std::to_string(entry.size) +
                              " bytes inflated, more than " + std::to_string(cap));
  }
  OPTSTATE_ASSIGN_OR_RETURN(uint64_t offset, ZipEntryDataOffset(cursor, entry));
  OPTSTATE_ASSIGN_OR_RETURN(ByteCursor data, cursor.Slice(offset, entry.compressed_size, "deflated record data"));
  StatusOr<std::vector<std::byte>> out = InflateRaw(data.data(), entry.size);
  if (!out.ok()) return std::move(out).status().WithContext("record '" + entry.name + "'");
  if (out->size() != entry.size) {
    return CorruptError("record '" + entry.name + "' inflates to " + std::to_string(out->size()) +
                        " bytes, its directory entry says " + std::to_string(entry.size));
  }
  return out;
}

}  // namespace optstate
