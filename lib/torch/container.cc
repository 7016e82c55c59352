#include "torch/container.h"

#include <zstd.h>

#include "io/byte_cursor.h"
#include "torch/safetensors_format.h"
#include "torch/tar_format.h"

#include <array>
#include <string>

namespace optstate {
namespace {

// The legacy format's first pickle is LONG1 of 10 bytes: the magic number
// 0x1950a86a20f9469cfc6c (torch/serialization.py MAGIC_NUMBER), behind PROTO 2
// by default and PROTO 3-5 under torch.save(pickle_protocol=N), which from 4
// on opens a FRAME (0x95 and an 8-byte length) first.
constexpr std::array<uint8_t, 13> kLegacyMagicBody = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                                      0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
constexpr size_t kLegacySniffBytes = 2 + 9 + kLegacyMagicBody.size();
constexpr uint32_t kZstdMagic = 0xFD2FB528;

bool StartsWith(ByteSpan data, std::span<const uint8_t> prefix) {
  if (data.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (static_cast<uint8_t>(data[i]) != prefix[i]) return false;
  }
  return true;
}

bool LooksLikeLegacy(ByteSpan data) {
  auto at = [&](size_t i) { return i < data.size() ? static_cast<uint8_t>(data[i]) : -1; };
  if (at(0) != 0x80 || at(1) < 2 || at(1) > 5) return false;
  size_t body = 2;
  if (at(1) >= 4 && at(2) == 0x95) body += 9;  // FRAME
  return body <= data.size() && StartsWith(data.subspan(body), kLegacyMagicBody);
}

std::string DescribeStart(ByteSpan data) {
  static const char* kDigits = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < data.size() && i < 8; ++i) {
    auto b = static_cast<uint8_t>(data[i]);
    if (i) hex += ' ';
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0xF];
  }
  return data.empty() ? "the file is empty" : "it starts with " + hex;
}

std::string TrimmedRecord(const ByteCursor& cursor, const ZipEntry& e) {
  auto data = ZipEntryData(cursor, e);
  if (!data.ok()) return "";
  std::string s(AsChars(*data).substr(0, 256));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

Status DescribeZip(const ByteCursor& cursor, const ContainerOptions& options, ContainerInfo& info) {
  OPTSTATE_ASSIGN_OR_RETURN(ZipArchive zip, ReadZipDirectory(cursor, options.zip));
  // Its entries are copied out (the directory is 28 MB at 4 * 10^5 records).
  if (options.done_with && zip.directory_offset <= cursor.data().size()) {
    options.done_with(cursor.data().subspan(
        zip.directory_offset,
        std::min<uint64_t>(zip.directory_size, cursor.data().size() - zip.directory_offset)));
  }
  const ZipEntry* pkl = zip.Find("data.pkl");
  if (pkl == nullptr) {
    return CorruptError("no '" + zip.prefix + "/data.pkl' record: not a torch.save file");
  }
  OPTSTATE_ASSIGN_OR_RETURN(ByteSpan pickle, ZipEntryData(cursor, *pkl));
  if (pickle.size() >= 2 && static_cast<uint8_t>(pickle[0]) == 0x80) {
    info.pickle_protocol = static_cast<uint8_t>(pickle[1]);
  }
  if (const ZipEntry* e = zip.Find("version")) info.version = TrimmedRecord(cursor, *e);
  if (const ZipEntry* e = zip.Find("byteorder")) info.byteorder = TrimmedRecord(cursor, *e);
  if (const ZipEntry* e = zip.Find(".data/serialization_id")) {
    info.serialization_id = TrimmedRecord(cursor, *e);
  }
  if (options.resolve_offsets || options.verify_crc) {
    // Each local header read faults in its page (a large folio, often): at
    // 4 * 10^5 records, every page of the file, unless released as we go.
    OPTSTATE_RETURN_IF_ERROR(ResolveZipDataOffsets(cursor, zip, options.done_with, options.fd));
  }
  std::string data_dir = zip.prefix + "/data/";
  for (const ZipEntry& e : zip.entries) {
    if (e.name.starts_with(data_dir)) {
      ++info.storage_records;
      info.storage_bytes += e.size;
    }
    if (options.verify_crc) {
      OPTSTATE_RETURN_IF_ERROR(VerifyZipEntryCrc(cursor, e));
      if (options.done_with) {
        StatusOr<ByteSpan> data = ZipEntryData(cursor, e);
        if (data.ok()) options.done_with(*data);
      }
    }
  }
  // Not a const object: ParseZipCheckpoint may still resolve its data offsets.
  info.zip = std::make_shared<ZipArchive>(std::move(zip));
  info.crc_checked = options.verify_crc;
  return Status();
}

// Decompresses only as far as the first few bytes, to name the inner format.
void PeekZstd(ByteSpan data, ContainerInfo& info) {
  unsigned long long declared = ZSTD_getFrameContentSize(data.data(), data.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR) {
    info.zstd_content_size = declared;
  }
  ZSTD_DStream* stream = ZSTD_createDStream();
  if (stream == nullptr) return;
  std::array<std::byte, 64> head{};
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  ZSTD_outBuffer out{head.data(), head.size(), 0};
  while (out.pos < kLegacySniffBytes && in.pos < in.size) {
    size_t rc = ZSTD_decompressStream(stream, &out, &in);
    if (ZSTD_isError(rc) || rc == 0) break;
  }
  ZSTD_freeDStream(stream);
  info.zstd_inner_format = SniffContainerFormat(ByteSpan(head.data(), out.pos));
}

}  // namespace

std::optional<ContainerFormat> SniffContainerFormat(ByteSpan data) {
  if (LooksLikeZip(data)) return ContainerFormat::kZip;
  if (LooksLikeLegacy(data)) return ContainerFormat::kLegacy;
  if (data.size() >= 4 && LoadU32LEUnchecked(data.data()) == kZstdMagic) return ContainerFormat::kZstd;
  if (LooksLikeSafetensors(data)) return ContainerFormat::kSafetensors;
  return std::nullopt;
}

std::string_view ContainerFormatName(ContainerFormat format) {
  switch (format) {
    case ContainerFormat::kZip: return "zip";
    case ContainerFormat::kLegacy: return "legacy";
    case ContainerFormat::kZstd: return "zstd";
    case ContainerFormat::kSafetensors: return "safetensors";
  }
  return "unknown";
}

StatusOr<ContainerInfo> InspectContainer(const ByteCursor& cursor, const ContainerOptions& options) {
  ContainerInfo info;
  info.file_size = cursor.size();
  std::optional<ContainerFormat> format = SniffContainerFormat(cursor.data());
  if (format != ContainerFormat::kZip && IsTarHeader(cursor.data())) {
    // torch.load tries tarfile before the legacy stream: whatever else the
    // bytes are, torch reads them as its pre-0.4 tar format.
    return UnsupportedError("a tar checkpoint (torch before 0.4): its first 512 bytes are a tar header, which "
                            "torch.load takes before any other reading; optstate reads only what torch.load would "
                            "run of it");
  }
  if (!format) {
    return UnsupportedError("not a PyTorch checkpoint (zip, legacy, zstd) or safetensors file: " +
                            DescribeStart(cursor.data()));
  }
  info.format = *format;
  switch (info.format) {
    case ContainerFormat::kZip: OPTSTATE_RETURN_IF_ERROR(DescribeZip(cursor, options, info)); break;
    case ContainerFormat::kZstd: PeekZstd(cursor.data(), info); break;
    case ContainerFormat::kLegacy: break;  // its structure is in the pickles: reader layer
    case ContainerFormat::kSafetensors: break;  // its header: safetensors_format.cc
  }
  return info;
}

const ZipArchive& ZipDirectory(const ContainerInfo& info) {
  static const ZipArchive kNone;
  return info.zip ? *info.zip : kNone;
}

size_t ZipRecordCount(const ContainerInfo& info) { return info.zip ? info.zip->entries.size() : 0; }

ZipListing ListZipRecords(const ContainerInfo& info) {
  ZipListing listing;
  if (!info.zip) return listing;
  listing.prefix = info.zip->prefix;
  listing.zip64 = info.zip->zip64;
  listing.records.reserve(info.zip->entries.size());
  for (const ZipEntry& e : info.zip->entries) {
    listing.records.push_back({e.name, e.size, e.data_offset, e.data_offset_known, e.crc32, e.method});
  }
  return listing;
}

}  // namespace optstate
