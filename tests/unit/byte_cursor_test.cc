#include "io/byte_cursor.h"

#include <gtest/gtest.h>

#include <string>

namespace optstate {
namespace {

const std::string kBytes("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12);

TEST(ByteCursorTest, ReadsLittleEndianIntegersAndAdvances) {
  ByteCursor c(AsBytes(kBytes));
  EXPECT_EQ(*c.ReadU8("a"), 0x01);
  EXPECT_EQ(*c.ReadU16LE("b"), 0x0302);
  EXPECT_EQ(*c.ReadU32LE("c"), 0x07060504u);
  EXPECT_EQ(c.position(), 7u);
  EXPECT_EQ(c.remaining(), 5u);
}

TEST(ByteCursorTest, Reads64BitAndSigned) {
  std::string b("\xff\xff\xff\xff\xfe\xff\xff\xff\xff\xff\xff\xff", 12);
  ByteCursor c(AsBytes(b));
  EXPECT_EQ(*c.ReadI32LE("i32"), -1);
  EXPECT_EQ(*c.ReadI64LE("i64"), -2);
  EXPECT_TRUE(c.at_end());
}

TEST(ByteCursorTest, ReadsBigEndianDouble) {
  // 1.5 as an IEEE double, big-endian: 3f f8 00 00 00 00 00 00 (pickle BINFLOAT).
  std::string b("\x3f\xf8\x00\x00\x00\x00\x00\x00", 8);
  ByteCursor c(AsBytes(b));
  EXPECT_EQ(*c.ReadF64BE("BINFLOAT"), 1.5);
}

TEST(ByteCursorTest, ShortReadIsTruncatedWithOffsetAndDoesNotAdvance) {
  ByteCursor c(AsBytes(kBytes), 1000);
  ASSERT_TRUE(c.Skip(10, "head").ok());
  StatusOr<uint32_t> v = c.ReadU32LE("BININT argument");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kTruncated);
  EXPECT_EQ(v.status().message(), "offset 1010: need 4 bytes for BININT argument, 2 left");
  EXPECT_EQ(c.position(), 10u);
  EXPECT_EQ(*c.ReadU16LE("tail"), 0x0c0b);
}

TEST(ByteCursorTest, HugeDeclaredLengthIsRefusedBeforeUse) {
  ByteCursor c(AsBytes(kBytes));
  StatusOr<ByteSpan> b = c.ReadBytes(UINT64_MAX, "BINBYTES8 payload");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "offset 0: need 18446744073709551615 bytes for BINBYTES8 payload, 12 left");
  EXPECT_EQ(c.position(), 0u);
}

TEST(ByteCursorTest, ReadBytesReturnsViewIntoData) {
  ByteCursor c(AsBytes(kBytes));
  ASSERT_TRUE(c.Skip(2, "x").ok());
  StatusOr<ByteSpan> b = c.ReadBytes(3, "y");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(AsChars(*b), std::string("\x03\x04\x05", 3));
  EXPECT_EQ(b->data(), AsBytes(kBytes).data() + 2);
}

TEST(ByteCursorTest, ReadLineConsumesNewline) {
  std::string text = "torch\nFloatStorage\nrest";
  ByteCursor c(AsBytes(text), 50);
  EXPECT_EQ(*c.ReadLine("module"), "torch");
  EXPECT_EQ(*c.ReadLine("name"), "FloatStorage");
  StatusOr<std::string_view> last = c.ReadLine("GLOBAL");
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.status().message(), "offset 69: no end of line for GLOBAL in the 4 bytes left");
}

TEST(ByteCursorTest, SeekWithinAndPastEnd) {
  ByteCursor c(AsBytes(kBytes), 100);
  ASSERT_TRUE(c.Seek(12, "end").ok());
  EXPECT_TRUE(c.at_end());
  Status s = c.Seek(13, "central directory");
  EXPECT_EQ(s.code(), StatusCode::kTruncated);
  EXPECT_EQ(s.message(), "offset 113: central directory lies past the end of the data (112)");
}

TEST(ByteCursorTest, SliceReportsAbsoluteOffsetsAndChecksOverflow) {
  ByteCursor c(AsBytes(kBytes), 100);
  StatusOr<ByteCursor> s = c.Slice(4, 4, "item");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->offset(), 104u);
  EXPECT_EQ(s->size(), 4u);
  EXPECT_EQ(*s->ReadU32LE("x"), 0x08070605u);
  StatusOr<uint8_t> past = s->ReadU8("past");
  EXPECT_EQ(past.status().message(), "offset 108: need 1 bytes for past, 0 left");
  // position + length wraps around 2^64: must still be refused.
  StatusOr<ByteCursor> wrap = c.Slice(8, UINT64_MAX - 4, "item");
  ASSERT_FALSE(wrap.ok());
  EXPECT_EQ(wrap.status().code(), StatusCode::kTruncated);
  EXPECT_FALSE(c.Slice(13, 0, "item").ok());
  EXPECT_TRUE(c.Slice(12, 0, "item").ok());
}

TEST(ByteCursorTest, EmptyInput) {
  ByteCursor c(ByteSpan{});
  EXPECT_TRUE(c.at_end());
  EXPECT_EQ(c.ReadU8("PROTO").status().message(), "offset 0: need 1 bytes for PROTO, 0 left");
  EXPECT_FALSE(c.ReadLine("x").ok());
}

TEST(UncheckedLoadTest, LittleEndian) {
  const std::byte* p = AsBytes(kBytes).data();
  EXPECT_EQ(LoadU16LEUnchecked(p), 0x0201);
  EXPECT_EQ(LoadU32LEUnchecked(p), 0x04030201u);
  EXPECT_EQ(LoadU64LEUnchecked(p), 0x0807060504030201ull);
}

}  // namespace
}  // namespace optstate
