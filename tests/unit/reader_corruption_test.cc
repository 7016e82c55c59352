// Damaged checkpoints, made by editing bytes of real fixtures: each gives its
// exact error with the record and byte offset, and none crashes (the Asan build
// runs these too).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "fixtures.h"
#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "torch/container.h"
#include "zip/zip_archive.h"

namespace optstate {
namespace {

const char* kAdamW = "testdata/good/torch113/adamw_index.pt";

// In adamw_index.pt (torch 1.13) data.pkl starts at byte 64; its first tensor is
// state[0]["step"]: _rebuild_tensor_v2(('storage', FloatStorage, '0', 'cpu', 1), 0, ...)
// with the key '0' at byte 181, numel 1 at byte 195 and storage offset 0 at 201.
Status ParseEdited(size_t offset, char value) {
  std::string bytes = testing::ReadFileOrFail(kAdamW);
  bytes[offset] = value;
  return ParseCheckpoint(ByteCursor(AsBytes(bytes))).status();
}

TEST(ReaderCorruptionTest, StorageRecordShorterThanDeclared) {
  Status s = ParseEdited(195, '\x02');
  EXPECT_EQ(s.ToString(),
            "corrupt data: record 'adamw_index/data.pkl': storage '0': record 'adamw_index/data/0' "
            "holds 4 bytes, but the storage declares 2 elements of 4 bytes (8)");
}

TEST(ReaderCorruptionTest, MissingStorageRecord) {
  Status s = ParseEdited(181, 'Z');
  EXPECT_EQ(s.ToString(),
            "corrupt data: record 'adamw_index/data.pkl': storage 'Z': no record 'adamw_index/data/Z'");
}

TEST(ReaderCorruptionTest, TensorViewPastItsStorage) {
  Status s = ParseEdited(201, '\x01');
  // 239 is the REDUCE that would call _rebuild_tensor_v2.
  EXPECT_EQ(s.ToString(),
            "corrupt data: record 'adamw_index/data.pkl': offset 239: tensor view ends at byte 8 of "
            "storage '0', which has 4 bytes");
}

TEST(ReaderCorruptionTest, BadOpcodeInDataPkl) {
  Status s = ParseEdited(70, '\xff');
  EXPECT_EQ(s.ToString(), "corrupt data: record 'adamw_index/data.pkl': offset 70: 0xff: unknown opcode");
}

TEST(ReaderCorruptionTest, OpenCheckpointNamesTheFile) {
  StatusOr<std::unique_ptr<CheckpointFile>> f = OpenCheckpoint(testing::RepoPath("testdata/pickles/p2.pkl"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnsupported);
  EXPECT_TRUE(f.status().message().starts_with(testing::RepoPath("testdata/pickles/p2.pkl") +
                                               ": not a PyTorch checkpoint"))
      << f.status().ToString();
}

// Opened from a file with resolve_offsets, data offsets are read beside the
// pickle's parse (ParseZipCheckpoint): every one is found, as from memory;
// a broken local header is reported before a broken pickle, as when the
// headers were read first; a broken pickle alone is reported as before.
TEST(ReaderCorruptionTest, OffsetsReadBesideTheParseKeepTheirErrorsFirst) {
  ReadOptions read;
  read.resolve_offsets = true;
  std::string bytes = testing::ReadFileOrFail(kAdamW);
  const std::string path = ::testing::TempDir() + "/offsets_beside.pt";
  auto open_edited = [&](const std::string& edited) {
    std::ofstream(path, std::ios::binary) << edited;
    StatusOr<std::unique_ptr<CheckpointFile>> f = OpenCheckpoint(path, read);
    std::remove(path.c_str());
    return f;
  };
  StatusOr<std::unique_ptr<CheckpointFile>> file = open_edited(bytes);
  StatusOr<Checkpoint> in_memory = ParseCheckpoint(ByteCursor(AsBytes(bytes)), read);
  ASSERT_TRUE(file.ok() && in_memory.ok()) << file.status().ToString();
  const std::vector<ZipEntry>& from_file = ZipDirectory((*file)->checkpoint().container).entries;
  const std::vector<ZipEntry>& from_memory = ZipDirectory(in_memory->container).entries;
  ASSERT_EQ(from_file.size(), from_memory.size());
  for (size_t i = 0; i < from_file.size(); ++i) {
    EXPECT_TRUE(from_file[i].data_offset_known) << from_file[i].name;
    EXPECT_EQ(from_file[i].data_offset, from_memory[i].data_offset) << from_file[i].name;
  }
  bytes[70] = '\xff';  // an unknown opcode in data.pkl
  file = open_edited(bytes);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().ToString(),
            "corrupt data: " + path + ": record 'adamw_index/data.pkl': offset 70: 0xff: unknown opcode");
  const size_t local = bytes.rfind(std::string("PK\x03\x04", 4));  // the last record's local header
  bytes[local + 3] = 'X';
  file = open_edited(bytes);
  in_memory = ParseCheckpoint(ByteCursor(AsBytes(bytes)), read);
  ASSERT_FALSE(file.ok());
  ASSERT_FALSE(in_memory.ok());
  EXPECT_NE(in_memory.status().message().find(": offset " + std::to_string(local) + ": expected local header"),
            std::string::npos)
      << in_memory.status().ToString();
  EXPECT_EQ(file.status().ToString(), "corrupt data: " + path + ": " + std::string(in_memory.status().message()));
}

// Every prefix of a real file must fail cleanly: zip (directory at the end),
// legacy (pickles then raw storages), and zstd.
TEST(ReaderCorruptionTest, TruncationAtEveryOffset) {
  for (const char* fixture : {"testdata/good/torch113/model_tied.pt", "testdata/good/torch113/adamw_legacy.pt",
                              "testdata/good/torch26/model_tied.pt"}) {
    std::string bytes = testing::ReadFileOrFail(fixture);
    ASSERT_TRUE(ParseCheckpoint(ByteCursor(AsBytes(bytes))).ok()) << fixture;
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      std::string prefix = bytes.substr(0, cut);
      Status s = ParseCheckpoint(ByteCursor(AsBytes(prefix))).status();
      ASSERT_FALSE(s.ok()) << fixture << " cut at " << cut;
      ASSERT_NE(s.code(), StatusCode::kInternal) << s.ToString();
    }
  }
}

TEST(ReaderCorruptionTest, LegacyTruncatedInsideStorageData) {
  std::string bytes = testing::ReadFileOrFail("testdata/good/torch113/adamw_legacy.pt");
  bytes.resize(bytes.size() - 3);
  Status s = ParseCheckpoint(ByteCursor(AsBytes(bytes))).status();
  EXPECT_EQ(s.code(), StatusCode::kTruncated);
  EXPECT_NE(s.message().find(": need "), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(" bytes for storage data, "), std::string::npos) << s.ToString();
}

TEST(ReaderCorruptionTest, ZstdTruncatedAndOverCap) {
  std::string path = testing::RepoPath("testdata/good/torch113/adamw_index.pt.zst");
  ReadOptions small;
  small.max_decompressed_bytes = 1000;
  StatusOr<std::unique_ptr<CheckpointFile>> f = OpenCheckpoint(path, small);
  ASSERT_FALSE(f.ok());
  // The frame declares its size: refused before decompressing anything.
  EXPECT_EQ(f.status().ToString(), "limit exceeded: " + path +
                                       ": zstd frames declare 9736 bytes of content, more than 1000 (limit "
                                       "max_decompressed_bytes; inspect --max-decompressed-bytes)");
  // A stream that declares nothing (1 GiB of zeros piped through zstd) stops at the cap...
  path = testing::RepoPath("testdata/hostile/zstd_stream_bomb.pt.zst");
  small.max_decompressed_bytes = 8u << 20;
  f = OpenCheckpoint(path, small);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().ToString(),
            "limit exceeded: " + path + ": zstd content exceeds 8388608 bytes (limit max_decompressed_bytes)");
  // ... or, under a larger cap, once it has grown a thousandfold past 16 MiB.
  small.max_decompressed_bytes = 64u << 20;
  f = OpenCheckpoint(path, small);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().ToString(),
            "limit exceeded: " + path + ": zstd content expands more than 1024-fold (17825792 bytes from the first "
            "619 compressed bytes): a decompression bomb, or content of almost nothing but zeros; decompress it "
            "yourself (zstd -d) to read such a file");
}

// A frame that does not declare its size needs the window it names before it
// produces a byte; a window wider than the cap is refused before it is allocated.
TEST(ReaderCorruptionTest, ZstdWindowWiderThanTheCap) {
  std::string bytes = testing::ReadFileOrFail("testdata/hostile/zstd_stream_bomb.pt.zst");  // 512 KiB window
  StatusOr<std::vector<std::byte>> plain = DecompressZstd(AsBytes(bytes), 100 << 10);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().ToString(),
            "limit exceeded: zstd frame at input offset 0 needs a window larger than 131072 bytes "
            "(limit max_decompressed_bytes, 102400)");
  plain = DecompressZstd(AsBytes(bytes), 512 << 10);  // the window fits: stops one byte past the cap
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().ToString(), "limit exceeded: zstd content exceeds 524288 bytes (limit max_decompressed_bytes)");
}

// zstd 0.5-0.7 frames (before 1.0) are decoded by libzstd's legacy code, if at
// all; optstate refuses them, in any frame.
TEST(ReaderCorruptionTest, ZstdPre10FramesAreRefused) {
  std::string one = testing::ReadFileOrFail("testdata/good/torch113/adamw_index.pt.zst");
  ASSERT_EQ(one.substr(0, 4), "\x28\xb5\x2f\xfd");
  std::string bytes = one;
  bytes[0] = '\x26';
  StatusOr<std::vector<std::byte>> plain = DecompressZstd(AsBytes(bytes), 1 << 20);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().ToString(),
            "unsupported: zstd frame at input offset 0 is in the pre-1.0 format v0.6; only zstd 1.x frames are read");
  bytes = one + one;
  ASSERT_TRUE(DecompressZstd(AsBytes(bytes), 1 << 20).ok());
  bytes[one.size()] = '\x25';
  plain = DecompressZstd(AsBytes(bytes), 1 << 20);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().ToString(), "unsupported: zstd frame at input offset " + std::to_string(one.size()) +
                                           " is in the pre-1.0 format v0.5; only zstd 1.x frames are read");
}

// A header may claim any size up to the cap: the claim reserves address space,
// but only what zstd decodes is touched, and the lie shows at the frame's end.
// (Filling the claimed 15 GiB first took 129 s and 15 GiB of memory.)
TEST(ReaderCorruptionTest, ZstdSizeThatLies) {
  std::string bytes = testing::ReadFileOrFail("testdata/hostile/zstd_lying_size.pt.zst");  // 1 MiB of zeros
  StatusOr<std::vector<std::byte>> plain = DecompressZstd(AsBytes(bytes), ReadOptions().max_decompressed_bytes);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().ToString(),
            "corrupt data: zstd: Data corruption detected beyond input offset 0 and content byte 0; the frames "
            "declare 16106127360 bytes of content");
}

// Declared content is decompressed whole when it is exactly the cap.
TEST(ReaderCorruptionTest, ZstdContentExactlyAtTheCap) {
  std::string bytes = testing::ReadFileOrFail("testdata/good/torch113/adamw_index.pt.zst");
  StatusOr<std::vector<std::byte>> plain = DecompressZstd(AsBytes(bytes), 9736);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->size(), 9736u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(plain->data()), plain->size()),
            testing::ReadFileOrFail(kAdamW));
}

}  // namespace
}  // namespace optstate
