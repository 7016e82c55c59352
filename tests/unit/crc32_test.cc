#include "optstate/crc32.h"

#include <gtest/gtest.h>

#include <string>

#include "fixtures.h"

namespace optstate {
namespace {

TEST(Crc32Test, StandardCheckValue) {
  EXPECT_EQ(Crc32(AsBytes("123456789")), 0xCBF43926u);
  EXPECT_EQ(Crc32(AsBytes("")), 0u);
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
