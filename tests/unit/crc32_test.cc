#include "io/crc32.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "fixtures.h"
#include "io/crc32_kernels.h"

namespace optstate {
namespace {

TEST(Crc32Test, StandardCheckValue) {
  EXPECT_EQ(Crc32(AsBytes("123456789")), 0xCBF43926u);
  EXPECT_EQ(Crc32(AsBytes("")), 0u);
}

// The carry-less-multiply loop against the table loop (the reference) at
// every length around its 64- and 16-byte steps, at odd alignments, from
// random running registers.
TEST(Crc32Test, ClmulKernelEqualsTheTableKernel) {
  if (!internal::Crc32ClmulSupported()) GTEST_SKIP() << "no PCLMULQDQ on this CPU";
  std::mt19937_64 rng(7);
  std::vector<std::byte> data(4096 + 64);
  for (std::byte& b : data) b = static_cast<std::byte>(rng());
  size_t compared = 0;
  for (size_t n = 64; n <= 4096; n += (n < 300 ? 1 : 61)) {
    for (size_t offset : {0, 1, 7, 13}) {
      uint32_t reg = static_cast<uint32_t>(rng());
      uint32_t expected = internal::Crc32UpdateTable(reg, data.data() + offset, n);
      ASSERT_EQ(internal::Crc32UpdateClmul(reg, data.data() + offset, n), expected) << "n=" << n << " offset=" << offset;
      if (n >= 128 && internal::Crc32WideClmulSupported()) {
        ASSERT_EQ(internal::Crc32UpdateWideClmul(reg, data.data() + offset, n), expected)
            << "wide, n=" << n << " offset=" << offset;
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000u);
  // Through the public entry point: the zip check value of a long run.
  std::string text(100000, 'z');
  EXPECT_EQ(Crc32(AsBytes(text)), ~internal::Crc32UpdateTable(~0u, AsBytes(text).data(), text.size()));
}

TEST(Crc32Test, RunningCrcEqualsWholeForEverySplit) {
  std::string text = "The quick brown fox jumps over the lazy dog, twice over.";
  uint32_t whole = Crc32(AsBytes(text));
  EXPECT_EQ(whole, 0x75D02603u);  // zlib.crc32 of the same text
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    std::string_view v(text);
    EXPECT_EQ(Crc32(AsBytes(v.substr(cut)), Crc32(AsBytes(v.substr(0, cut)))), whole) << cut;
  }
}

TEST(Crc32Test, CombineEqualsTheCrcOfTheJoinedBytes) {
  std::string text = "The quick brown fox jumps over the lazy dog, twice over.";
  uint32_t whole = Crc32(AsBytes(text));
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    std::string_view v(text);
    uint32_t a = Crc32(AsBytes(v.substr(0, cut))), b = Crc32(AsBytes(v.substr(cut)));
    EXPECT_EQ(Crc32Combine(a, b, text.size() - cut), whole) << cut;
  }
  // Long pieces (the exponent's higher bits): 5 MiB of a pattern after 3 bytes.
  std::string big(5u << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + (i >> 9));
  EXPECT_EQ(Crc32Combine(Crc32(AsBytes("abc")), Crc32(AsBytes(big)), big.size()), Crc32(AsBytes("abc" + big)));
}

// Python's zipfile computed these CRCs when the fixtures were written.
TEST(Crc32Test, MatchesZipRecordCrcsOfRealFixtures) {
  int checked = 0;
  for (const std::string& fixture : testing::AllFixtures()) {
    nlohmann::json expected = testing::ExpectedJson(fixture);
    if (expected["container"]["format"].get<std::string>() != "zip") continue;
    std::string bytes = testing::ReadFileOrFail(fixture);
    for (const auto& record : expected["container"]["records"]) {
      std::string_view data = std::string_view(bytes).substr(record["data_offset"].get<size_t>(),
                                                            record["size"].get<size_t>());
      EXPECT_EQ(Crc32(AsBytes(data)), record["crc32"].get<uint32_t>())
          << fixture << " " << record["name"];
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

}  // namespace
}  // namespace optstate
