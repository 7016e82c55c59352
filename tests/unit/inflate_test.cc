// Raw DEFLATE on zlib's own streams of a real pickle (testdata/gen/gen_deflate_vectors.py):
// every block type, several blocks, and damaged streams.
#include "zip/inflate.h"

#include <gtest/gtest.h>

#include <string>

#include "fixtures.h"

namespace optstate {
namespace {

using testing::ReadFileOrFail;

std::string Inflated(const std::string& deflated, uint64_t cap = 1 << 20) {
  StatusOr<std::vector<std::byte>> r = InflateRaw(AsBytes(deflated), cap);
  if (!r.ok()) return "error: " + r.status().ToString();
  return std::string(reinterpret_cast<const char*>(r->data()), r->size());
}

TEST(InflateTest, EveryBlockTypeZlibWritesInflatesExactly) {
  const std::string want = ReadFileOrFail("testdata/pickles/p4.pkl");
  // The first block's type (bits 1-2 of byte 0): 0 stored, 1 fixed, 2 dynamic.
  const std::pair<const char*, int> cases[] = {{"stored", 0}, {"fixed", 1}, {"dynamic", 2}, {"multi", 1}};
  for (auto [kind, type] : cases) {
    const std::string stream = ReadFileOrFail(std::string("testdata/pickles/p4.pkl.deflate-") + kind);
    EXPECT_EQ((static_cast<uint8_t>(stream[0]) >> 1) & 3, type) << kind;
    EXPECT_EQ(Inflated(stream), want) << kind;
  }
  EXPECT_EQ(ReadFileOrFail("testdata/pickles/p4.pkl.deflate-multi")[0] & 1, 0);  // its first block is not the last
}

TEST(InflateTest, DamagedStreamsFailWithTheirReason) {
  const std::string dynamic = ReadFileOrFail("testdata/pickles/p4.pkl.deflate-dynamic");
  for (size_t cut = 0; cut < dynamic.size(); ++cut) {
    std::string got = Inflated(dynamic.substr(0, cut));
    ASSERT_TRUE(got.starts_with("error: truncated input: deflate stream ends") ||
                got.starts_with("error: corrupt data: deflate"))
        << "cut at " << cut << ": " << got.substr(0, 120);
  }
  EXPECT_EQ(Inflated(std::string("\x07", 1)), "error: corrupt data: deflate: block type 3 (reserved) at byte 1");
  EXPECT_EQ(Inflated(ReadFileOrFail("testdata/pickles/p4.pkl.deflate-stored"), 100),
            "error: limit exceeded: deflate output exceeds 100 bytes");
  std::string stored = ReadFileOrFail("testdata/pickles/p4.pkl.deflate-stored");
  stored[3] ^= 1;  // NLEN no longer the complement of LEN
  EXPECT_EQ(Inflated(stored), "error: corrupt data: deflate: stored block length check fails");
}

}  // namespace
}  // namespace optstate
