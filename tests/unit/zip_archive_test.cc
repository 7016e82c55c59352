#include "zip/zip_archive.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "fixtures.h"
#include "io/byte_cursor.h"
#include "io/crc32.h"
#include "torch/container.h"
#include "zip/zip_writer.h"

namespace optstate {
namespace {

const char* kAdamW = "testdata/good/torch113/adamw_index.pt";

// Our directory reading equals Python zipfile's, record for record, on every
// zip fixture from torch 1.13 and 2.6 (DCP items included via consolidated files).
TEST(ZipArchiveTest, MatchesPythonZipfileOnEveryFixture) {
  int zips = 0;
  for (const std::string& fixture : testing::AllFixtures()) {
    nlohmann::json expected = testing::ExpectedJson(fixture);
    if (expected["container"]["format"].get<std::string>() != "zip") continue;
    ++zips;
    std::string bytes = testing::ReadFileOrFail(fixture);
    StatusOr<ZipArchive> zip = ReadZipDirectory(ByteCursor(AsBytes(bytes)));
    ASSERT_TRUE(zip.ok()) << fixture << ": " << zip.status().ToString();
    EXPECT_FALSE(zip->entries.front().data_offset_known);  // local headers are read lazily
    ASSERT_TRUE(ResolveZipDataOffsets(ByteCursor(AsBytes(bytes)), *zip).ok());
    EXPECT_TRUE(zip->zip64) << fixture;
    EXPECT_EQ(zip->prefix, expected["container"]["prefix"].get<std::string>()) << fixture;
    const auto& records = expected["container"]["records"];
    ASSERT_EQ(zip->entries.size(), records.size()) << fixture;
    for (size_t i = 0; i < records.size(); ++i) {
      const ZipEntry& e = zip->entries[i];
      EXPECT_EQ(e.name, records[i]["name"].get<std::string>()) << fixture;
      EXPECT_EQ(e.size, records[i]["size"].get<uint64_t>()) << e.name;
      EXPECT_EQ(e.crc32, records[i]["crc32"].get<uint32_t>()) << e.name;
      EXPECT_EQ(e.data_offset, records[i]["data_offset"].get<uint64_t>()) << e.name;
      EXPECT_EQ(e.method, 0) << e.name;
      EXPECT_EQ(e.data_offset % 64, 0u) << e.name << ": torch aligns record data to 64 bytes";
      EXPECT_TRUE(VerifyZipEntryCrc(ByteCursor(AsBytes(bytes)), e).ok()) << e.name;
    }
  }
  EXPECT_GE(zips, 25);
}

TEST(ZipArchiveTest, FindUsesThePrefix) {
  std::string bytes = testing::ReadFileOrFail(kAdamW);
  StatusOr<ZipArchive> zip = ReadZipDirectory(ByteCursor(AsBytes(bytes)));
  ASSERT_TRUE(zip.ok());
  ASSERT_NE(zip->Find("data.pkl"), nullptr);
  EXPECT_EQ(zip->Find("data.pkl")->name, "adamw_index/data.pkl");
  EXPECT_EQ(zip->Find("byteorder"), nullptr);  // torch 1.13 writes none
  EXPECT_EQ(zip->Find("ata.pkl"), nullptr);
}

// Find is a binary search over `by_name`: it must give what a scan in directory
// order gives for every record of every fixture, and for a name held twice, the
// first record (the one torch 2.6 reads).
TEST(ZipArchiveTest, IndexedFindAgreesWithDirectoryOrder) {
  std::vector<std::string> paths = testing::AllFixtures();
  paths.push_back("testdata/hostile/duplicate_data_pkl.pt");
  for (const std::string& path : paths) {
    std::string bytes = testing::ReadFileOrFail(path);
    StatusOr<ZipArchive> zip = ReadZipDirectory(ByteCursor(AsBytes(bytes)));
    if (!zip.ok()) continue;  // legacy and zstd fixtures
    ASSERT_EQ(zip->by_name.size(), zip->entries.size()) << path;
    for (const ZipEntry& e : zip->entries) {
      std::string_view record = std::string_view(e.name).substr(zip->prefix.size() + 1);
      const ZipEntry* first = nullptr;
      for (const ZipEntry& f : zip->entries) {
        if (f.name == e.name) { first = &f; break; }
      }
      EXPECT_EQ(zip->Find(record), first) << path << ": " << e.name;
    }
    EXPECT_EQ(zip->Find(""), nullptr);
    EXPECT_EQ(zip->Find("zzzz"), nullptr);
  }
  std::string dup = testing::ReadFileOrFail("testdata/hostile/duplicate_data_pkl.pt");
  StatusOr<ZipArchive> zip = ReadZipDirectory(ByteCursor(AsBytes(dup)));
  ASSERT_TRUE(zip.ok());
  const ZipEntry* pkl = zip->Find("data.pkl");
  ASSERT_NE(pkl, nullptr);
  size_t named = 0, first_at = zip->entries.size();
  for (size_t i = 0; i < zip->entries.size(); ++i) {
    if (zip->entries[i].name == pkl->name) {
      ++named;
      first_at = std::min(first_at, i);
    }
  }
  EXPECT_EQ(named, 2u);
  EXPECT_EQ(pkl, &zip->entries[first_at]);
}

// Records torch's reader takes for one name: each later one paired with the
// first of its name, in directory order; a scan over every pair agrees.
TEST(ZipArchiveTest, RecordsNamedAlikePairsEachWithTheFirstOfItsName) {
  std::vector<ZipEntry> entries;
  for (const char* name : {"a/data.pkl", "a/data/0", "A/DATA.PKL", "a/data/0", "b", "a/Data.pkl", "a/data/1"}) {
    entries.emplace_back().name = name;
  }
  using Pairs = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(RecordsNamedAlike(entries), (Pairs{{2, 0}, {3, 1}, {5, 0}}));
  // Many distinct names that differ only in their last bytes: no pair, and
  // every case-folded copy pairs with its original.
  entries.clear();
  for (int i = 0; i < 20000; ++i) entries.emplace_back().name = "archive/data/" + std::to_string(i);
  EXPECT_TRUE(RecordsNamedAlike(entries).empty());
  entries.emplace_back().name = "ARCHIVE/data/19999";
  entries.emplace_back().name = "archive/DATA/7";
  EXPECT_EQ(RecordsNamedAlike(entries), (Pairs{{20000, 19999}, {20001, 7}}));
  EXPECT_TRUE(RecordsNamedAlike({}).empty());
}

TEST(ContainerTest, IdentifiesEachFormat) {
  struct Case {
    const char* path;
    ContainerFormat format;
  } cases[] = {{kAdamW, ContainerFormat::kZip},
               {"testdata/good/torch113/adamw_legacy.pt", ContainerFormat::kLegacy},
               {"testdata/good/torch113/adamw_index.pt.zst", ContainerFormat::kZstd}};
  for (const Case& c : cases) {
    std::string bytes = testing::ReadFileOrFail(c.path);
    StatusOr<ContainerInfo> info = InspectContainer(ByteCursor(AsBytes(bytes)), {});
    ASSERT_TRUE(info.ok()) << c.path << ": " << info.status().ToString();
    EXPECT_EQ(info->format, c.format) << c.path;
  }
}

TEST(ContainerTest, ZipFactsFromTorch26) {
  const std::string path = "testdata/good/torch26/adamw_index.pt";
  std::string bytes = testing::ReadFileOrFail(path);
  ContainerOptions verify;
  verify.verify_crc = true;
  StatusOr<ContainerInfo> info = InspectContainer(ByteCursor(AsBytes(bytes)), verify);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->pickle_protocol, 2);
  EXPECT_EQ(info->version, "3");
  EXPECT_EQ(info->byteorder, "little");
  ASSERT_TRUE(info->serialization_id.has_value());
  EXPECT_EQ(info->serialization_id->size(), 40u);
  EXPECT_TRUE(info->crc_checked);
  nlohmann::json expected = testing::ExpectedJson(path);
  EXPECT_EQ(info->file_size, expected["file_size"].get<uint64_t>());
  EXPECT_EQ(info->storage_records, expected["storages"].size());
}

TEST(ContainerTest, ZstdPeeksInnerFormatAndSize) {
  std::string bytes = testing::ReadFileOrFail("testdata/good/torch113/adamw_index.pt.zst");
  StatusOr<ContainerInfo> info = InspectContainer(ByteCursor(AsBytes(bytes)), {});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->zstd_inner_format, ContainerFormat::kZip);
  std::string plain = testing::ReadFileOrFail(kAdamW);
  EXPECT_EQ(info->zstd_content_size, plain.size());
}

TEST(ContainerTest, UnknownBytesAreUnsupportedWithTheirStart) {
  std::string text = "{\"state\": {}}";
  StatusOr<ContainerInfo> info = InspectContainer(ByteCursor(AsBytes(text)), {});
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().ToString(),
            "unsupported: not a PyTorch checkpoint (zip, legacy, zstd) or safetensors file: it starts with "
            "7b 22 73 74 61 74 65 22");
}

// Collects what the zip writer hands its output, counting the calls.
class CountingStream : public OutputStream {
 public:
  Status Write(ByteSpan data) override {
    ++writes;
    bytes.append(reinterpret_cast<const char*>(data.data()), data.size());
    return Status();
  }
  // Stands in for copy_file_range when `kernel_copies` is set.
  StatusOr<uint64_t> CopyFromFile(int fd, uint64_t offset, uint64_t length) override {
    if (!kernel_copies) return uint64_t{0};
    std::string got(length, '\0');
    if (::pread(fd, got.data(), length, static_cast<off_t>(offset)) != static_cast<ssize_t>(length)) {
      return IoError("short read");
    }
    bytes += got;
    kernel_copied += length;
    return length;
  }
  uint64_t position() const override { return bytes.size(); }
  Status Commit() override { return Status(); }
  std::string bytes;
  int writes = 0;
  bool kernel_copies = false;
  uint64_t kernel_copied = 0;
};

// Small records, headers and descriptors reach the output gathered into large
// writes (a save of 10^5 parameters made 1.2 M system calls one by one); a
// large record passes straight through; the offsets the directory records are
// still where each record lies.
TEST(ZipWriterTest, GathersSmallWritesWithoutMovingAnyRecord) {
  CountingStream out;
  out.bytes = "leading bytes of an outer file";
  std::unique_ptr<ZipWriter> zip = ZipWriter::CreateEmbedded(out, "archive");
  std::vector<std::string> contents;
  for (int i = 0; i < 3000; ++i) contents.push_back(std::string(100 + i % 50, static_cast<char>('a' + i % 26)));
  contents.push_back(std::string(200 << 10, 'L'));  // one large record in the middle
  for (int i = 0; i < 1000; ++i) contents.push_back(std::to_string(i));
  for (size_t i = 0; i < contents.size(); ++i) {
    ASSERT_TRUE(zip->AddRecord("data/" + std::to_string(i), AsBytes(contents[i])).ok());
  }
  ASSERT_TRUE(zip->Finish().ok());
  // ~0.7 MiB before the large record, then the rest and the directory: a handful of writes, not 12,000.
  EXPECT_LE(out.writes, 6);
  const size_t base = std::string("leading bytes of an outer file").size();
  ByteCursor whole(AsBytes(out.bytes));
  StatusOr<ByteCursor> inner = whole.Slice(base, out.bytes.size() - base, "zip");
  ASSERT_TRUE(inner.ok());
  StatusOr<ZipArchive> read = ReadZipDirectory(*inner);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->entries.size(), contents.size());
  for (size_t i = 0; i < contents.size(); ++i) {
    const ZipEntry& e = read->entries[i];
    ASSERT_EQ(e.name, "archive/data/" + std::to_string(i));
    StatusOr<ByteSpan> data = ZipEntryData(*inner, e);
    ASSERT_TRUE(data.ok()) << e.name << ": " << data.status().ToString();
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(data->data()), data->size()), contents[i]) << e.name;
    ASSERT_TRUE(VerifyZipEntryCrc(*inner, e).ok()) << e.name;
  }
}

// A record streamed in pieces (data.pkl as the pickle is made): its local
// header says sizes 0 with bit 3 set, the descriptor and the directory give
// the real size and CRC, and it reads back like any other. No other record
// may start inside it.
TEST(ZipWriterTest, StreamedRecordReadsBackWithItsSizeAndCrc) {
  CountingStream out;
  std::unique_ptr<ZipWriter> zip = ZipWriter::CreateEmbedded(out, "archive");
  std::string whole;
  ASSERT_TRUE(zip->BeginRecord("data.pkl").ok());
  EXPECT_EQ(zip->AddRecord("byteorder", AsBytes("little")).code(), StatusCode::kInternal);
  for (int i = 0; i < 300; ++i) {
    std::string piece(1000 + i, static_cast<char>('a' + i % 26));
    whole += piece;
    ASSERT_TRUE(zip->AppendToRecord(AsBytes(piece)).ok());
  }
  ASSERT_TRUE(zip->EndRecord().ok());
  EXPECT_EQ(zip->EndRecord().code(), StatusCode::kInternal);
  ASSERT_TRUE(zip->AddRecord("byteorder", AsBytes("little")).ok());
  ASSERT_TRUE(zip->Finish().ok());
  ByteCursor cursor(AsBytes(out.bytes));
  StatusOr<ZipArchive> read = ReadZipDirectory(cursor);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->entries.size(), 2u);
  const ZipEntry& e = read->entries[0];
  EXPECT_EQ(e.name, "archive/data.pkl");
  EXPECT_EQ(e.size, whole.size());
  StatusOr<ByteSpan> data = ZipEntryData(cursor, e);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(data->data()), data->size()), whole);
  EXPECT_TRUE(VerifyZipEntryCrc(cursor, e).ok());
  EXPECT_EQ(static_cast<uint8_t>(out.bytes[6]) & 0x08, 0x08);  // general purpose flag: descriptor follows
  EXPECT_EQ(out.bytes.substr(18, 8), std::string(8, '\0'));     // local compressed and uncompressed sizes
  StatusOr<ByteSpan> second = ZipEntryData(cursor, read->entries[1]);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(second->data()), second->size()), "little");
}

// An unlinked temporary file holding `size` bytes of a fixed pattern, for
// the kernel copies a zip writer makes from a source file: its descriptor
// (-1 on failure) and the bytes.
std::pair<int, std::string> PatternFile(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  char path[] = "/tmp/optstate_source_XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return {-1, bytes};
  ::unlink(path);
  if (::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    return {-1, bytes};
  }
  return {fd, bytes};
}

// A record of pieces (a ZeRO-3 parameter from two ranks' partitions, a
// reshard's chunk): a piece with a known CRC and a source goes to the kernel
// copy untouched; a piece cut from a record (a source, no CRC) is summed and
// written from memory in steps, across several steps and chunks here; a piece
// only in memory is summed too. The record's CRC combines the three, and every
// byte that passed through memory is handed back to `done_with` exactly once
// (the kernel's copy never maps its bytes in).
TEST(ZipWriterTest, RecordOfPiecesCopiesKnownPiecesAndSumsCutOnes) {
  auto [fd, file_bytes] = PatternFile(9 * 1048576 + 3 * 1000 + 7);
  ASSERT_GE(fd, 0);
  ByteSpan all = AsBytes(file_bytes);
  ByteSpan known = all.subspan(0, 3000);
  ByteSpan cut = all.subspan(3000, 9 * 1048576 + 7);
  std::string memory(5000, 'm');
  std::vector<RecordPiece> pieces(3);
  pieces[0].data = known;
  pieces[0].crc = Crc32(known);
  pieces[0].source = FileRange{fd, 0};
  pieces[1].data = cut;
  pieces[1].source = FileRange{fd, 3000};
  pieces[2].data = AsBytes(memory);

  CountingStream out;
  out.kernel_copies = true;
  std::unique_ptr<ZipWriter> zip = ZipWriter::CreateEmbedded(out, "archive");
  uint64_t released = 0;
  ASSERT_TRUE(zip->AddRecordPieces("data/0", pieces, [&released](ByteSpan b) { released += b.size(); }).ok());
  ASSERT_TRUE(zip->Finish().ok());
  ::close(fd);
  EXPECT_EQ(out.kernel_copied, known.size());
  EXPECT_EQ(released, cut.size() + memory.size());
  ByteCursor cursor(AsBytes(out.bytes));
  StatusOr<ZipArchive> read = ReadZipDirectory(cursor);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const ZipEntry& e = read->entries.at(0);
  std::string expected = file_bytes.substr(0, 3000 + cut.size()) + memory;
  EXPECT_EQ(e.crc32, Crc32(AsBytes(expected)));
  StatusOr<ByteSpan> data = ZipEntryData(cursor, e);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_TRUE(std::string(reinterpret_cast<const char*>(data->data()), data->size()) == expected);
  EXPECT_TRUE(VerifyZipEntryCrc(cursor, e).ok());
}

// A record of 4 MiB or more that the kernel copies whole from another file
// starts at the offset within 64 KiB it had there (64-byte aligned as always),
// so the copy moves whole page-cache folios; a smaller one, or one whose source
// offset torch would never write (not 64-byte aligned), is padded to 64 bytes
// only. Every record reads back with its CRC.
TEST(ZipWriterTest, LargeCopiedRecordKeepsItsOffsetWithin64KiB) {
  auto [fd, file_bytes] = PatternFile(12 << 20);
  ASSERT_GE(fd, 0);
  struct Copied {
    uint64_t at, size;
    uint64_t want_phase;  // offset within 64 KiB; kNotChosen: any 64-byte aligned offset
  };
  constexpr uint64_t kNotChosen = ~uint64_t{0};
  const std::vector<Copied> records = {{3 * 65536 + 9 * 4096 + 1344, 4 << 20, 9 * 4096 + 1344},
                                       {4 << 20, (4 << 20) + 5, 0},
                                       {65536 + 64, (4 << 20) - 1, kNotChosen},
                                       {1000, 4 << 20, kNotChosen}};
  CountingStream out;
  out.kernel_copies = true;
  std::unique_ptr<ZipWriter> zip = ZipWriter::CreateEmbedded(out, "archive");
  ASSERT_TRUE(zip->AddRecord("data.pkl", AsBytes(std::string(77, 'p'))).ok());
  for (size_t i = 0; i < records.size(); ++i) {
    ByteSpan data = AsBytes(file_bytes).subspan(records[i].at, records[i].size);
    ASSERT_TRUE(
        zip->AddRecord("data/" + std::to_string(i), data, nullptr, Crc32(data), FileRange{fd, records[i].at}).ok());
  }
  ASSERT_TRUE(zip->Finish().ok());
  ::close(fd);
  ByteCursor cursor(AsBytes(out.bytes));
  StatusOr<ZipArchive> read = ReadZipDirectory(cursor);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->entries.size(), records.size() + 1);
  for (size_t i = 0; i < records.size(); ++i) {
    const ZipEntry& e = read->entries[i + 1];
    StatusOr<ByteSpan> data = ZipEntryData(cursor, e);
    ASSERT_TRUE(data.ok()) << e.name << ": " << data.status().ToString();
    const uint64_t at = static_cast<uint64_t>(reinterpret_cast<const char*>(data->data()) - out.bytes.data());
    EXPECT_EQ(at % 64, 0u) << e.name;
    const uint64_t header_end = e.local_header_offset + 30 + e.name.size() + 4;  // through the 'FB' field's header
    if (records[i].want_phase == kNotChosen) {
      EXPECT_LT(at - header_end, 64u) << e.name << ": padded beyond the next 64-byte boundary";
    } else {
      EXPECT_EQ(at % 65536, records[i].want_phase) << e.name;
    }
    EXPECT_TRUE(std::string(reinterpret_cast<const char*>(data->data()), data->size()) ==
                file_bytes.substr(records[i].at, records[i].size))
        << e.name;
    EXPECT_TRUE(VerifyZipEntryCrc(cursor, e).ok()) << e.name;
  }
}

}  // namespace
}  // namespace optstate
