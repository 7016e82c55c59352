// Numbers as Python has them: LONG1/LONG4 integers of any length (in decimal
// when they do not fit 64 bits, ints when padded ones do), floats rendered as
// Python's repr.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fixtures.h"
#include "parse_pickle.h"
#include "pickle/graph_walk.h"
#include "pickle/pickle_text.h"
#include "pickle/pickle_vm.h"

namespace optstate {
namespace {

using testing::Parse;
using testing::ReadFileOrFail;
using testing::Replace;

// LONG1/LONG4 payloads (two's complement, little-endian) to decimal, checked
// against Python's int.to_bytes for values around every 10^9 limb boundary.
TEST(PickleVmTest, LongIntegersInDecimal) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "0"},
      {"01", "1"},
      {"ff", "-1"},
      {"7f", "127"},
      {"8000", "128"},
      {"80ff", "-128"},
      {"7fff", "-129"},
      {"ff00", "255"},
      {"0001", "256"},
      {"ffc99a3b", "999999999"},
      {"00ca9a3b", "1000000000"},
      {"01ca9a3b", "1000000001"},
      {"000064a7b3b6e00d", "1000000000000000000"},
      {"00009c584c491ff2", "-1000000000000000000"},
      {"ffffffffffffff7f", "9223372036854775807"},
      {"0000000000000080ff", "-9223372036854775808"},
      {"000000000000000001", "18446744073709551616"},
      {"fffffffffffffffffe", "-18446744073709551617"},
      {"050000e83c80d09f3c2e3b03", "1000000000000000000000000005"},
      {"00000000009f0a4654405ba33c0ed69ce2", "-10000000000000000000000000000000000000000"},
      {"3930000000000000000000000000000000000000000000000001", "1606938044258990275541962092341162602522202993782792835313721"},
      {"f5b165224a58b791df6af1d8303e61cdc4bb86c3d1c427103c344c4189eb2f1e7bd5d47e2c04", "531387607866916073078218667906413574238342856452056515432942247604507891269235966742999541"},
      {"a3d811736110e5781bcccea696762e6116c6e9c92d99bf358c2e0718822ce47ca8c741074b06", "801201831712607032344083788910793213086619015715796170143885790093448921970635095189608611"},
      {"b2b3f4d58d82ca6386d2c96e760e819b85c924c3597164c4a6058a00581a22b22de5047242fc", "-476214159079173773637984811660747765543322359981862916929375263397182523825787091987156046"},
  };
  for (auto& [hex, decimal] : cases) {
    std::string bytes;
    for (size_t i = 0; i < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    EXPECT_EQ(LittleEndianToDecimal(AsBytes(bytes)), decimal) << hex;
  }
}

// Python writes the shortest LONG1; a longer one whose extra bytes only repeat
// the sign is the same int and must read as one (a big int before, so the
// writer's short form came back as another kind). p2.pkl's 2**64 is edited.
TEST(PickleVmTest, PaddedLongsThatFitAreInts) {
  const std::string original = ReadFileOrFail("testdata/pickles/p2.pkl");
  const std::string two_to_64("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01", 11);
  // Occurrences, not nodes: one node stands for every occurrence of an int.
  auto count = [](const PickleResult& r, NodeKind kind, int64_t value) {
    auto is = [&](NodeId id) {
      const Node& node = r.graph.at(id);
      return node.kind == kind && (kind != NodeKind::kInt || node.int_value == value);
    };
    size_t n = 0;
    for (const Node& node : r.graph.nodes) {
      for (NodeId item : node.items) n += is(item);
      for (auto [k, v] : node.entries) n += is(k) + is(v);
    }
    return n;
  };
  StatusOr<PickleResult> before = Parse(original);
  ASSERT_TRUE(before.ok());
  const std::pair<std::string, int64_t> cases[] = {
      {std::string("\x05\x00\x00\x00\x00\x00\x00\x00\x00", 9), 5},
      {std::string(9, '\xff'), -1},
      {std::string("\x00\x00\x00\x00\x00\x00\x00\x80\xff", 9), INT64_MIN},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\x7f\x00", 9), INT64_MAX},
  };
  for (const auto& [payload, value] : cases) {
    SCOPED_TRACE(value);
    StatusOr<PickleResult> r = Parse(Replace(original, two_to_64, "\x8a\x09" + payload));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(count(*r, NodeKind::kInt, value), count(*before, NodeKind::kInt, value) + 1);
    EXPECT_EQ(count(*r, NodeKind::kBigInt, 0), count(*before, NodeKind::kBigInt, 0) - 1);
  }
  // One more byte of magnitude is still a big int: 2**63 needs nine.
  StatusOr<PickleResult> big =
      Parse(Replace(original, two_to_64, std::string("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00", 11)));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(count(*big, NodeKind::kBigInt, 0), count(*before, NodeKind::kBigInt, 0));
}

// ValueText renders floats as Python's repr does, so reports read like Python.
TEST(ValueTextTest, FloatsLikePythonRepr) {
  std::vector<std::pair<double, std::string>> cases = {
      {1000.0, "1000.0"}, {0.001, "0.001"}, {1e-08, "1e-08"}, {0.0001, "0.0001"}, {1e-05, "1e-05"},
      {3.141592653589793, "3.141592653589793"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"},
      {-0.5, "-0.5"}, {0.1, "0.1"}, {2.5e-07, "2.5e-07"}, {123456789.0, "123456789.0"}, {0.0, "0.0"}};
  for (auto& [v, want] : cases) {
    ObjectGraph g;
    Node n;
    n.kind = NodeKind::kFloat;
    n.float_value = v;
    g.nodes.push_back(n);
    EXPECT_EQ(ValueText(g, 0), want) << v;
  }
}

// Protocol 0's STRING argument is a Python 2 repr: every escape it can hold,
// decoded as Python's string-escape codec does (checked with Python 3's
// codecs.escape_decode on the same bytes).
TEST(PickleTextTest, StringReprEscapes) {
  auto decoded = DecodeStringRepr(R"('a\\b\'c\"d\n\r\t\a\b\f\v|\x41\101\7\q')");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, std::string("a\\b'c\"d\n\r\t\a\b\f\v|AA\7\\q", 20));
  EXPECT_EQ(DecodeStringRepr("'ends in \\'").status().ToString(),
            "corrupt data: STRING argument ends in a backslash");
}

}  // namespace
}  // namespace optstate
