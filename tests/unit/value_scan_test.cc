// validate's one-sweep scan: counts and CRCs equal to computing them one by
// one, across block and piece boundaries, for overlapping views and ranges
// outside every record, from memory and through pread.
#include "check/value_scan.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

#include "io/crc32.h"

namespace optstate {
namespace {

struct Layout {
  std::vector<std::byte> bytes;
  std::vector<ScanRecord> records;
  std::vector<ScanRange> ranges;
};

// 80 MiB of float32 (more than two 32 MiB pieces) with NaNs, infinities,
// negatives and zeros sprinkled in, two records, and ranges placed to cross
// every boundary the sweep has.
Layout MakeLayout() {
  Layout l;
  const size_t n = (80u << 20) / 4;
  l.bytes.resize(n * 4);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-1, 1);
  for (size_t i = 0; i < n; ++i) {
    float v = value(rng);
    if (i % 9973 == 0) v = std::numeric_limits<float>::quiet_NaN();
    if (i % 10007 == 1) v = -std::numeric_limits<float>::infinity();
    if (i % 7 == 0) v = 0.0f;
    if (i % 11 == 0) v = -0.0f;
    std::memcpy(l.bytes.data() + 4 * i, &v, 4);
  }
  ByteSpan all(l.bytes.data(), l.bytes.size());
  l.records = {{all.subspan(64, (70u << 20) - 64), 0}, {all.subspan(70u << 20, 8u << 20), 0}};
  auto range = [&](size_t from, size_t size) { l.ranges.push_back({all.subspan(from, size), DType::kFloat32, {}}); };
  range(64, (70u << 20) - 64);                  // a whole record
  range(64 + 4 * 1000, (33u << 20) + 4 * 17);   // across the first piece boundary, then a view of it:
  range(64 + 4 * 5000, 4 * 100);                // overlapping, ending first
  range((128u << 10) - 8, 16);                  // across a block boundary
  range(70u << 20, 0);                          // empty
  range((78u << 20) + 4, 4 * 1000);             // after every record: counted on its own
  l.ranges.push_back({all.subspan(71u << 20, 4096), DType::kBFloat16, {}});  // another dtype
  return l;
}

void ExpectEqualToOneByOne(const Layout& l) {
  for (const ScanRecord& r : l.records) EXPECT_EQ(r.crc, Crc32(r.bytes));
  for (size_t i = 0; i < l.ranges.size(); ++i) {
    ValueCounts want = CountValues(l.ranges[i].bytes, l.ranges[i].dtype);
    EXPECT_EQ(l.ranges[i].counts.nonfinite, want.nonfinite) << i;
    EXPECT_EQ(l.ranges[i].counts.negative, want.negative) << i;
    EXPECT_EQ(l.ranges[i].counts.nonzero, want.nonzero) << i;
  }
}

// `size` bytes of float32 in [-1, 1), every `every`th value `special`.
std::vector<std::byte> RandomFloats(size_t size, unsigned seed, size_t every, float special) {
  std::vector<std::byte> bytes(size);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1, 1);
  for (size_t i = 0; i < size / 4; ++i) {
    float v = i % every == 0 ? special : value(rng);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  return bytes;
}

// `bytes` written to a fresh file, open for reading at *fd; its path.
std::string WriteTempFile(const std::vector<std::byte>& bytes, int* fd) {
  std::string path =
      (std::filesystem::temp_directory_path() / ("optstate-scan-" + std::to_string(::getpid()))).string();
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  *fd = ::open(path.c_str(), O_RDONLY);
  return path;
}

TEST(ValueScanTest, CountsAreExact) {
  float v[] = {1.0f, -2.0f, 0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
               -std::numeric_limits<float>::infinity(), -1e-40f /* subnormal, negative */};
  ValueCounts c = CountValues(ByteSpan(reinterpret_cast<const std::byte*>(v), sizeof v), DType::kFloat32);
  EXPECT_EQ(c.nonfinite, 2u);
  EXPECT_EQ(c.negative, 2u);  // -2 and the subnormal; -0 is not negative, -inf is counted as non-finite
  EXPECT_EQ(c.nonzero, 5u);
}

// The vector clones (AVX-512, AVX2, chosen by the CPU) against the plain
// definition, on enough values, at every alignment, to run their wide loops
// and their tails.
TEST(ValueScanTest, VectorCountsEqualTheScalarDefinition) {
  std::vector<float> v(100003);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-1, 1);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = value(rng);
    if (i % 97 == 3) v[i] = std::numeric_limits<float>::quiet_NaN();
    if (i % 89 == 5) v[i] = (i & 1) ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
    if (i % 13 == 0) v[i] = (i & 1) ? 0.0f : -0.0f;
    if (i % 101 == 7) v[i] = -1e-40f;
  }
  for (size_t skip : {0, 1, 3, 17}) {
    ValueCounts want;
    for (size_t i = skip; i < v.size(); ++i) {
      want.nonfinite += !std::isfinite(v[i]);
      want.negative += std::isfinite(v[i]) && v[i] < 0;
      want.nonzero += v[i] != 0;
    }
    ValueCounts got = CountValues(
        ByteSpan(reinterpret_cast<const std::byte*>(v.data() + skip), (v.size() - skip) * 4), DType::kFloat32);
    EXPECT_EQ(got.nonfinite, want.nonfinite) << skip;
    EXPECT_EQ(got.negative, want.negative) << skip;
    EXPECT_EQ(got.nonzero, want.nonzero) << skip;
  }
}

TEST(ValueScanTest, OneSweepEqualsOneByOneFromMemory) {
  Layout l = MakeLayout();
  ScanRecordsAndRanges(l.records, l.ranges, ScanHooks{});
  ExpectEqualToOneByOne(l);
  EXPECT_GT(l.ranges[0].counts.nonfinite, 0u);
}

TEST(ValueScanTest, OneSweepEqualsOneByOneThroughPread) {
  Layout l = MakeLayout();
  int fd = -1;
  const std::string path = WriteTempFile(l.bytes, &fd);
  ASSERT_GE(fd, 0);
  // The buffer's bytes are scrambled after the file is written: only pread can give the right answers.
  std::vector<std::byte> original = l.bytes;
  size_t located = 0;
  ScanHooks hooks;
  hooks.locate = [&](ByteSpan b) -> std::optional<FileRange> {
    ++located;
    return FileRange{fd, static_cast<uint64_t>(b.data() - l.bytes.data())};
  };
  for (std::byte& b : l.bytes) b = ~b;
  ScanRecordsAndRanges(l.records, l.ranges, hooks);
  ::close(fd);
  std::filesystem::remove(path);
  l.bytes = original;  // same addresses: the vector was copied into, not reallocated
  EXPECT_GT(located, 3u);
  ExpectEqualToOneByOne(l);
}

// 300 records of 16 KiB, 64 bytes apart (a local header's room), as
// torch.save lays out small tensors: read through pread a block's worth at a
// time, a locate per batch of neighbours, not per record; a file that will not
// give a batch's span (locate refuses it) is read record by record.
TEST(ValueScanTest, NeighbouringSmallRecordsAreReadTogether) {
  constexpr size_t kRecords = 300, kRecord = 16u << 10, kStride = kRecord + 64;
  Layout l;
  l.bytes = RandomFloats(kRecords * kStride, 5, 101, std::numeric_limits<float>::infinity());
  ByteSpan all(l.bytes.data(), l.bytes.size());
  for (size_t r = 0; r < kRecords; ++r) {
    l.records.push_back({all.subspan(r * kStride + 64, kRecord), 0});
    l.ranges.push_back({all.subspan(r * kStride + 64, kRecord), DType::kFloat32, {}});
  }
  l.ranges.push_back({all.subspan(kStride, 64), DType::kFloat32, {}});  // between two records
  int fd = -1;
  const std::string path = WriteTempFile(l.bytes, &fd);
  ASSERT_GE(fd, 0);
  const std::vector<std::byte> original = l.bytes;
  for (size_t max_span : {size_t{1} << 30, kRecord}) {
    Layout run = l;                       // fresh counts; its spans still point into l.bytes
    for (std::byte& b : l.bytes) b = ~b;  // only pread gives the right answers
    size_t located = 0;
    ScanHooks hooks;
    hooks.locate = [&](ByteSpan b) -> std::optional<FileRange> {
      ++located;
      if (b.size() > max_span) return std::nullopt;
      return FileRange{fd, static_cast<uint64_t>(b.data() - l.bytes.data())};
    };
    ScanRecordsAndRanges(run.records, run.ranges, hooks);
    l.bytes = original;
    ExpectEqualToOneByOne(run);
    EXPECT_GT(run.ranges[0].counts.nonfinite, 0u);
    if (max_span > kRecord) {
      EXPECT_LE(located, kRecords / 7 + 2);  // 7 records to a 128 KiB block, and the range on its own
    } else {
      EXPECT_GT(located, kRecords);  // each batch asked for, then each record
    }
  }
  ::close(fd);
  std::filesystem::remove(path);
}

// Records swept while the file was opened (SweptRecords) are not read again:
// their CRCs, and the counts of float32 ranges that are the whole of one, come
// from the sweep, so they stay right after the bytes change; a view inside a
// swept record, another dtype, and a record of a size the sweep does not keep
// are read as before.
TEST(ValueScanTest, SweptRecordsAreNotReadAgain) {
  constexpr size_t kRecord = 16u << 10, kStride = kRecord + 64;
  Layout l;
  l.bytes = RandomFloats(8 * kStride, 7, 97, std::numeric_limits<float>::quiet_NaN());
  ByteSpan all(l.bytes.data(), l.bytes.size());
  for (size_t r = 0; r < 5; ++r) l.records.push_back({all.subspan(r * kStride + 64, kRecord), 0});
  l.records.push_back({all.subspan(5 * kStride + 64, 4), 0});     // a step: kept
  l.records.push_back({all.subspan(6 * kStride + 64, 1024), 0});  // between the sizes kept
  l.ranges = {{l.records[0].bytes, DType::kFloat32, {}},          // whole: from the sweep
              {l.records[1].bytes.subspan(4, 400), DType::kFloat32, {}},
              {l.records[2].bytes, DType::kBFloat16, {}},
              {l.records[5].bytes, DType::kFloat32, {}},
              {l.records[6].bytes, DType::kFloat32, {}}};
  SweptRecords swept;
  for (size_t r = l.records.size(); r-- > 0;) swept.Sweep(l.records[r].bytes, l.records[r].bytes);  // any order
  swept.Seal();
  EXPECT_EQ(swept.size(), 6u);  // not the 1 KiB record
  EXPECT_EQ(swept.Find(l.records[0].bytes.subspan(4)), nullptr);
  EXPECT_EQ(swept.Find(l.records[0].bytes.subspan(0, 64)), nullptr);
  Layout before = l;
  ScanRecordsAndRanges(before.records, before.ranges, ScanHooks{});  // the answers of the unchanged bytes
  for (std::byte& b : l.bytes) b = ~b;
  Layout after = l;
  ScanRecordsAndRanges(after.records, after.ranges, ScanHooks{}, 2, &swept);
  for (size_t r : {0, 1, 2, 3, 4, 5}) EXPECT_EQ(after.records[r].crc, before.records[r].crc) << r;
  EXPECT_EQ(after.records[6].crc, Crc32(l.records[6].bytes));  // read now: the changed bytes
  EXPECT_NE(after.records[6].crc, before.records[6].crc);
  auto same = [](const ValueCounts& a, const ValueCounts& b) {
    return a.nonfinite == b.nonfinite && a.negative == b.negative && a.nonzero == b.nonzero;
  };
  EXPECT_TRUE(same(after.ranges[0].counts, before.ranges[0].counts));
  EXPECT_GT(after.ranges[0].counts.nonfinite, 0u);
  EXPECT_TRUE(same(after.ranges[3].counts, before.ranges[3].counts));
  for (size_t i : {1, 2, 4}) {  // read now
    EXPECT_TRUE(same(after.ranges[i].counts, CountValues(l.ranges[i].bytes, l.ranges[i].dtype))) << i;
  }
  EXPECT_FALSE(same(after.ranges[1].counts, before.ranges[1].counts));
}

}  // namespace
}  // namespace optstate
