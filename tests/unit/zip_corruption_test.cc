// The zip layer on a real fixture with its bytes edited: each broken
// directory or local header is refused with the offset and what was found.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fixtures.h"
#include "io/byte_cursor.h"
#include "zip/zip_archive.h"

namespace optstate {
namespace {

const char kAdamW[] = "testdata/good/torch113/adamw_index.pt";

// Corruption tests edit the bytes of a real fixture.
class ZipCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override { bytes_ = testing::ReadFileOrFail(kAdamW); }
  Status Read() { return ReadZipDirectory(ByteCursor(AsBytes(bytes_))).status(); }
  size_t Find(const std::string& needle) { return bytes_.rfind(needle); }
  std::string bytes_;
};

TEST_F(ZipCorruptionTest, TruncatedFileHasNoEndRecord) {
  bytes_.resize(bytes_.size() / 2);
  Status s = Read();
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "no zip end-of-central-directory record from offset 0 to the end of the file at offset "
                         "4868: it was cut short (a partial copy or download), or it is no zip");
}

TEST_F(ZipCorruptionTest, TinyFile) {
  bytes_ = "PK\x03\x04";
  EXPECT_EQ(Read().ToString(),
            "truncated input: 4 bytes are too few for a zip end-of-central-directory record");
}

TEST_F(ZipCorruptionTest, BadCentralHeaderSignatureNamesOffset) {
  size_t cd = bytes_.find(std::string("PK\x01\x02", 4));  // first central header
  ASSERT_NE(cd, std::string::npos);
  bytes_[cd + 2] = 'X';
  Status s = Read();
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "offset " + std::to_string(cd) +
                             ": expected central directory header, found 0x02584b50");
}

// The first central header's 32-bit field at `field` set to `value`: the
// first record, data.pkl, then ends past the end of the file.
void ExpectFirstRecordPastTheEnd(std::string bytes, size_t field, uint32_t value, const std::string& where) {
  size_t cd = bytes.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  for (int i = 0; i < 4; ++i) bytes[cd + field + i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  Status s = ReadZipDirectory(ByteCursor(AsBytes(bytes))).status();
  EXPECT_EQ(s.code(), StatusCode::kTruncated);
  EXPECT_EQ(s.message(), "record 'adamw_index/data.pkl': " + where + " bytes of data end past the end of the data (" +
                             std::to_string(bytes.size()) + ")");
}

TEST_F(ZipCorruptionTest, LocalHeaderOffsetPastEnd) {
  // Relative offset of local header (central header offset 42): far away.
  ExpectFirstRecordPastTheEnd(bytes_, 42, 0x7f000000u, "offset 2130706432: local header and 1802");
}

TEST_F(ZipCorruptionTest, RecordSizeBeyondFile) {
  // Compressed size (central header offset 20): 1 GiB.
  ExpectFirstRecordPastTheEnd(bytes_, 20, 0x40000000u, "offset 0: local header and 1073741824");
}

// Every record's data offset from the bytes at hand (fd -1: the mapping's
// path), or with the local headers read from `file_bytes` written to a file.
// `bytes`' directory with every data offset resolved: from the bytes at hand,
// or (with `file_bytes`) read from a file holding those.
StatusOr<ZipArchive> ResolveArchive(const std::string& bytes, const std::string* file_bytes = nullptr,
                                    const RecordBytesRead& record_read = nullptr) {
  const std::string path = ::testing::TempDir() + "/zip_local_headers.pt";
  int fd = -1;
  if (file_bytes != nullptr) {
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(file_bytes->data(), 1, file_bytes->size(), f);
    std::fclose(f);
    fd = ::open(path.c_str(), O_RDONLY);
  }
  StatusOr<ZipArchive> zip = ReadZipDirectory(ByteCursor(AsBytes(bytes)));
  Status resolved =
      zip.ok() ? ResolveZipDataOffsets(ByteCursor(AsBytes(bytes)), *zip, nullptr, fd, record_read) : zip.status();
  if (fd >= 0) ::close(fd);
  std::remove(path.c_str());
  if (!resolved.ok()) return resolved;
  return zip;
}

StatusOr<std::vector<uint64_t>> ResolveOffsets(const std::string& bytes, const std::string* file_bytes = nullptr) {
  OPTSTATE_ASSIGN_OR_RETURN(ZipArchive zip, ResolveArchive(bytes, file_bytes));
  std::vector<uint64_t> offsets;
  for (const ZipEntry& e : zip.entries) offsets.push_back(e.data_offset);
  return offsets;
}

// Local headers read with pread (ResolveZipDataOffsets given the file) give
// the offsets the mapping gives; a broken one gives the same error word for
// word (one parse of the header, wherever its bytes came from).
TEST_F(ZipCorruptionTest, LocalHeadersReadFromTheFileAgreeWithTheMapping) {
  StatusOr<std::vector<uint64_t>> mapped = ResolveOffsets(bytes_), read = ResolveOffsets(bytes_, &bytes_);
  ASSERT_TRUE(mapped.ok() && read.ok());
  EXPECT_EQ(*read, *mapped);
  EXPECT_GT(read->size(), 3u);
  // The last storage record's local header ("PK\x03\x04" before its name), signature broken.
  size_t local = bytes_.rfind(std::string("PK\x03\x04", 4));
  ASSERT_NE(local, std::string::npos);
  bytes_[local + 3] = 'X';
  mapped = ResolveOffsets(bytes_);
  read = ResolveOffsets(bytes_, &bytes_);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(mapped.status().message().find(": offset " + std::to_string(local) + ": expected local header, found "),
            std::string::npos)
      << mapped.status().ToString();
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().ToString(), mapped.status().ToString());
}

// 78 records in 390 KiB: headers come several to a 128 KiB read, in windows
// of their own. A broken header in the middle of a window stops the same way
// as read alone; a file shorter than the bytes at hand (a window read comes up
// short) falls back to one header at a time and then to the bytes at hand.
TEST_F(ZipCorruptionTest, LocalHeadersReadByWindowsAgreeWithTheMapping) {
  bytes_ = testing::ReadFileOrFail("testdata/good/torch113/optimizer_parity.pt");
  StatusOr<std::vector<uint64_t>> mapped = ResolveOffsets(bytes_), read = ResolveOffsets(bytes_, &bytes_);
  ASSERT_TRUE(mapped.ok() && read.ok());
  ASSERT_EQ(mapped->size(), 78u);
  EXPECT_EQ(*read, *mapped);
  const std::string short_file = bytes_.substr(0, 200000);
  read = ResolveOffsets(bytes_, &short_file);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, *mapped);
  // The 41st record's header, in the second window.
  StatusOr<ZipArchive> zip = ReadZipDirectory(ByteCursor(AsBytes(bytes_)));
  ASSERT_TRUE(zip.ok());
  const ZipEntry& broken = zip->entries[40];
  ASSERT_GT(broken.local_header_offset, 128u << 10);
  bytes_[broken.local_header_offset] = 'Q';
  mapped = ResolveOffsets(bytes_);
  read = ResolveOffsets(bytes_, &bytes_);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().ToString(), "corrupt data: record '" + broken.name + "': offset " +
                                            std::to_string(broken.local_header_offset) +
                                            ": expected local header, found 0x04034b51");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().ToString(), mapped.status().ToString());
}

TEST_F(ZipCorruptionTest, CrcMismatchIsReportedWithBothValues) {
  StatusOr<ZipArchive> zip = ReadZipDirectory(ByteCursor(AsBytes(bytes_)));
  ASSERT_TRUE(zip.ok());
  const ZipEntry* pkl = zip->Find("data.pkl");
  ASSERT_NE(pkl, nullptr);
  bytes_[*ZipEntryDataOffset(ByteCursor(AsBytes(bytes_)), *pkl) + 5] ^= 0x01;
  Status s = VerifyZipEntryCrc(ByteCursor(AsBytes(bytes_)), *pkl);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_TRUE(s.message().starts_with("record 'adamw_index/data.pkl': CRC-32 is 0x")) << s.message();
  EXPECT_NE(s.message().find(", the directory says 0x"), std::string::npos);
}

// The zip64 end record's entry count (offset 32 from its signature) is what we trust.
void SetZip64EntryCount(std::string& bytes, uint32_t count) {
  size_t z64 = bytes.rfind(std::string("PK\x06\x06", 4));
  ASSERT_NE(z64, std::string::npos);
  for (int i = 0; i < 4; ++i) bytes[z64 + 32 + i] = static_cast<char>(count >> (8 * i));
}

TEST_F(ZipCorruptionTest, EntryCountLargerThanDirectoryIsCorrupt) {
  SetZip64EntryCount(bytes_, 1000);
  Status s = Read();
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_TRUE(s.message().starts_with("zip declares 1000 records in a ")) << s.message();
}

TEST_F(ZipCorruptionTest, EntryCountOverLimitIsRefusedBeforeAllocating) {
  SetZip64EntryCount(bytes_, 0x10000000);
  Status s = Read();
  EXPECT_EQ(s.code(), StatusCode::kLimitExceeded);
  EXPECT_EQ(s.message(), "zip declares 268435456 records; the limit is 16000000");
  StatusOr<ZipArchive> small = ReadZipDirectory(ByteCursor(AsBytes(testing::ReadFileOrFail(kAdamW))),
                                                ZipLimits{.max_entries = 5});
  size_t records = testing::ExpectedJson(kAdamW)["container"]["records"].size();
  EXPECT_EQ(small.status().message(),
            "zip declares " + std::to_string(records) + " records; the limit is 5");
}

// Headers read by windows keep the data of the records of at most 8 bytes
// (each parameter's `step`) that lie inside a window, for validate's step
// reads: the kept bytes are the record's, asked for by the address of its
// data in the bytes at hand; a wider or shifted span, or an address in no
// tiny record, is not answered. Without the file nothing is kept.
TEST_F(ZipCorruptionTest, WindowsKeepTheDataOfTinyRecords) {
  bytes_ = testing::ReadFileOrFail("testdata/validate/weight_decay_groups.pt");  // 18 records, one window
  StatusOr<ZipArchive> read = ResolveArchive(bytes_, &bytes_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  size_t tiny = 0;
  for (const ZipEntry& e : read->entries) tiny += e.method == 0 && e.size > 0 && e.size <= 8;
  ASSERT_GT(tiny, 5u);
  ASSERT_GE(read->tiny_records.size(), tiny - 1);  // all but the window's last record
  ASSERT_LE(read->tiny_records.size(), tiny);
  const std::byte* base = AsBytes(bytes_).data();
  for (const ZipEntry& e : read->entries) {
    if (e.method != 0 || e.size == 0 || e.size > 8) continue;
    std::optional<ByteSpan> kept = read->TinyRecordBytes(base + e.data_offset, e.size);
    if (!kept) continue;
    EXPECT_EQ(std::string(AsChars(*kept)), bytes_.substr(e.data_offset, e.size)) << e.name;
    EXPECT_EQ(read->TinyRecordBytes(base + e.data_offset, e.size + 1), std::nullopt) << e.name;
    if (e.size > 1) {
      std::optional<ByteSpan> tail = read->TinyRecordBytes(base + e.data_offset + 1, e.size - 1);
      ASSERT_TRUE(tail.has_value()) << e.name;
      EXPECT_EQ(std::string(AsChars(*tail)), bytes_.substr(e.data_offset + 1, e.size - 1));
    }
  }
  EXPECT_EQ(read->TinyRecordBytes(base, 1), std::nullopt);  // data.pkl's local header
  EXPECT_EQ(read->TinyRecordBytes(base + bytes_.size(), 1), std::nullopt);
  StatusOr<ZipArchive> mapped = ResolveArchive(bytes_);
  ASSERT_TRUE(mapped.ok());
  EXPECT_TRUE(mapped->tiny_records.empty());
}

// Every stored record whose data a header window read whole is handed over
// once, with its place in the cursor and the bytes read (those of the file,
// which here differ from the cursor's); nothing is without the file.
TEST_F(ZipCorruptionTest, WindowsHandOverTheRecordsTheyRead) {
  bytes_ = testing::ReadFileOrFail("testdata/validate/weight_decay_groups.pt");  // 18 records, one window
  const std::byte* base = AsBytes(bytes_).data();
  std::vector<std::pair<uint64_t, std::string>> handed;  // offset in the cursor, bytes
  RecordBytesRead keep = [&](ByteSpan where, ByteSpan read) {
    EXPECT_EQ(where.size(), read.size());
    handed.emplace_back(where.data() - base, std::string(AsChars(read)));
  };
  StatusOr<ZipArchive> clean = ResolveArchive(bytes_, &bytes_);
  ASSERT_TRUE(clean.ok());
  std::string headers_only = bytes_;  // the file: same headers, every record's data inverted
  for (const ZipEntry& e : clean->entries) {
    for (uint64_t i = e.data_offset; i < e.data_offset + e.size; ++i) headers_only[i] = static_cast<char>(~bytes_[i]);
  }
  StatusOr<ZipArchive> read = ResolveArchive(bytes_, &headers_only, keep);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  size_t stored = 0;
  for (const ZipEntry& e : read->entries) stored += e.method == 0 && e.size > 0;
  ASSERT_GT(stored, 10u);
  // Every one: the window reads on past its last header to the central
  // directory, to hand over the last record too.
  EXPECT_EQ(handed.size(), stored);
  std::set<uint64_t> seen;
  for (const auto& [offset, got] : handed) {
    EXPECT_TRUE(seen.insert(offset).second) << offset;
    auto e = std::find_if(read->entries.begin(), read->entries.end(),
                          [&](const ZipEntry& z) { return z.data_offset == offset; });
    ASSERT_NE(e, read->entries.end()) << offset;
    EXPECT_EQ(got.size(), e->size) << e->name;
    EXPECT_EQ(got, headers_only.substr(offset, e->size)) << e->name;  // the file's bytes, not the cursor's
  }
  handed.clear();
  ASSERT_TRUE(ResolveArchive(bytes_, nullptr, keep).ok());
  EXPECT_TRUE(handed.empty());
}

}  // namespace
}  // namespace optstate
