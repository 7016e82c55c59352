// Pickles no pickler writes, read as torch.load's unpicklers read them or
// refused with an exact message: unknown opcodes, memo tricks, FRAMEs and
// PROTOs out of place, what STOP leaves, truncation at every offset, limits.
#include <gtest/gtest.h>

#include <string>

#include "fixtures.h"
#include "io/byte_cursor.h"
#include "parse_pickle.h"
#include "pickle/pickle_vm.h"
#include "torch/security.h"

namespace optstate {
namespace {

using testing::ReadFileOrFail;
using testing::Parse;
using testing::Replace;

TEST(PickleVmTest, OutOfBandBuffersAreUnsupported) {
  std::string bytes = Replace(ReadFileOrFail("testdata/pickles/p0.pkl"), "Vplain\n", "\x97");
  StatusOr<PickleResult> r = Parse(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ToString(),
            "unsupported: offset 376: 0x97: out-of-band pickle buffers cannot come from a file");
}

TEST(PickleVmTest, UnknownOpcodeNamesOffset) {
  std::string bytes = ReadFileOrFail("testdata/pickles/p2.pkl");
  bytes[420] = '\xff';  // a BINGET
  StatusOr<PickleResult> r = Parse(bytes);
  EXPECT_EQ(r.status().ToString(), "corrupt data: offset 420: 0xff: unknown opcode");
}

TEST(PickleVmTest, MemoIndexNeverStored) {
  std::string bytes = ReadFileOrFail("testdata/pickles/p2.pkl");
  bytes[421] = '\xfa';  // BINGET 250
  StatusOr<PickleResult> r = Parse(bytes);
  EXPECT_EQ(r.status().ToString(), "corrupt data: offset 420: 0x68 'h': memo index 250 was never stored");
}

std::string Anomalies(const PickleResult& r) {
  std::string out;
  for (const PickleAnomaly& a : r.anomalies) out += std::to_string(a.offset) + ": " + a.what + "\n";
  return out;
}

// A read that crosses a FRAME's end: pickle.loads reads on in order; torch.load,
// whose C unpickler reads a zip's data.pkl as a file without peek(), drops what
// is left of the frame and reads on after it. Both record the crossing.
TEST(PickleVmTest, FrameEndingInsideAnOpcodeIsReadAsEachReaderReadsIt) {
  std::string bytes = ReadFileOrFail("testdata/pickles/p4.pkl");
  ASSERT_EQ(bytes.substr(0, 3), std::string("\x80\x04\x95"));
  // Ends at 17, inside the text of SHORT_BINUNICODE 'none' (opcode at 14, text 16..20).
  bytes.replace(3, 8, std::string("\x06\0\0\0\0\0\0\0", 8));
  ByteCursor stream(AsBytes(bytes));
  StatusOr<PickleResult> in_order = ReadPickle(stream, {}, nullptr, PickleReadMode::kStream);
  ASSERT_TRUE(in_order.ok()) << in_order.status().ToString();
  EXPECT_EQ(Anomalies(*in_order),
            "14: the FRAME at offset 2 ends at offset 17, inside this opcode: Python's own unpickler refuses it, its "
            "C unpickler reads on\n");
  ByteCursor file(AsBytes(bytes));
  PickleResult partial;
  StatusOr<PickleResult> as_torch = ReadPickle(file, {}, &partial, PickleReadMode::kFileNoPeek);
  // The text is read from one byte later, as torch reads it. CPython stops there (the bytes are not
  // UTF-8, which optstate does not check) and optstate a little later: the stream is out of step.
  EXPECT_EQ(as_torch.status().ToString(), "corrupt data: offset 366: 0x68 'h': memo index 23 was never stored");
  EXPECT_EQ(Anomalies(partial),
            "14: the FRAME at offset 2 ends at offset 17, inside this opcode: torch.load (CPython's C unpickler on a "
            "zip record) skips the 1 byte(s) left of the frame and reads on after it, where a reader of the whole "
            "pickle does not\n");
  // A boundary between two reads of one opcode is no crossing: every reader agrees.
  std::string between = ReadFileOrFail("testdata/pickles/p4.pkl");
  between.replace(3, 8, std::string("\x05\0\0\0\0\0\0\0", 8));  // ends at 16, after 'none''s length byte
  ByteCursor c(AsBytes(between));
  StatusOr<PickleResult> agreed = ReadPickle(c, {}, nullptr, PickleReadMode::kFileNoPeek);
  ASSERT_TRUE(agreed.ok()) << agreed.status().ToString();
  EXPECT_EQ(Anomalies(*agreed), "");
  std::string nested = ReadFileOrFail("testdata/pickles/p4.pkl");
  nested.insert(11, std::string("\x95\x01\0\0\0\0\0\0\0", 9));  // a FRAME inside the one of offset 2
  StatusOr<PickleResult> inside = Parse(nested);
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_EQ(Anomalies(*inside), "11: a FRAME inside the frame of offset 2, which ends at offset 1481\n");
}

// PROTO anywhere but first: both unpicklers take it; no pickler writes it.
TEST(PickleVmTest, ProtoNotFirstIsAnAnomaly) {
  StatusOr<PickleResult> twice = Parse(std::string("\x80\x02\x80\x02}.", 6));
  ASSERT_TRUE(twice.ok()) << twice.status().ToString();
  EXPECT_EQ(Anomalies(*twice), "2: a second PROTO (protocol 2)\n");
  StatusOr<PickleResult> late = Parse(std::string("}\x80\x02.", 4));
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(Anomalies(*late), "1: PROTO 2 is not the first opcode\n");
  EXPECT_EQ(Anomalies(*Parse(std::string("\x80\x02}.", 4))), "");
}

// Memo gets and DUPs of containers are counted (the tree can outgrow the graph);
// of values they are not.
TEST(PickleVmTest, RepeatedContainersAreCounted) {
  StatusOr<PickleResult> lists = Parse(std::string("\x80\x02]q\x00h\x00h\x00" "2\x87.", 12));
  ASSERT_TRUE(lists.ok()) << lists.status().ToString();
  EXPECT_EQ(lists->compound_repeats, 3u);
  StatusOr<PickleResult> ints = Parse(std::string("\x80\x02K\x01q\x00h\x00\x86.", 10));
  ASSERT_TRUE(ints.ok()) << ints.status().ToString();
  EXPECT_EQ(ints->compound_repeats, 0u);
}

// STOP returns the top of the stack, as CPython does; what lies beneath is dropped.
TEST(PickleVmTest, StopReturnsTheTopAndDropsTheRest) {
  const std::string bytes("\x80\x02K\x01(K\x02.", 8);
  ByteCursor c(AsBytes(bytes));
  StatusOr<PickleResult> r = ReadPickle(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->graph.at(r->graph.root).int_value, 2);
  EXPECT_EQ(r->leftover_objects, 1u);
  EXPECT_EQ(r->leftover_marks, 1u);
}

// What the unpickler made before an error stays visible: CPython has already called it.
TEST(PickleVmTest, PartialResultKeepsTheCallsBeforeTheError) {
  const std::string bytes("\x80\x02" "cposix\nsystem\nX\x02\0\0\0ls\x85R0h\xfa.", 29);
  ByteCursor c(AsBytes(bytes));
  PickleResult partial;
  StatusOr<PickleResult> r = ReadPickle(c, {}, &partial);
  EXPECT_EQ(r.status().ToString(), "corrupt data: offset 26: 0x68 'h': memo index 250 was never stored");
  ASSERT_EQ(partial.globals.size(), 1u);
  EXPECT_EQ(partial.globals[0].module + "." + partial.globals[0].name, "posix.system");
  EXPECT_EQ(CalledGlobalOffsets(partial.graph), std::set<uint64_t>{2});
}

// Items set on a global (sys.modules, os.environ) change the live interpreter: counted as a call.
TEST(PickleVmTest, AGlobalChangedInPlaceCountsAsCalled) {
  const std::string bytes("\x80\x02" "csys\nmodules\nX\x01\0\0\0aX\x01\0\0\0bs.", 29);
  ByteCursor c(AsBytes(bytes));
  StatusOr<PickleResult> r = ReadPickle(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CalledGlobalOffsets(r->graph), std::set<uint64_t>{2});
}

TEST(PickleVmTest, TruncationAtEveryOffsetFailsCleanly) {
  for (int p : {0, 2, 4}) {
    std::string bytes = ReadFileOrFail("testdata/pickles/p" + std::to_string(p) + ".pkl");
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      StatusOr<PickleResult> r = Parse(bytes.substr(0, cut));
      ASSERT_FALSE(r.ok()) << "protocol " << p << " cut at " << cut;
      ASSERT_TRUE(r.status().code() == StatusCode::kTruncated || r.status().code() == StatusCode::kCorrupt)
          << r.status().ToString();
      ASSERT_TRUE(r.status().message().starts_with("offset ")) << r.status().ToString();
    }
  }
}

// `lists` empty lists, all pushed first, then each appended to the one below:
// `lists` objects on the stack at once, nested `lists` - 1 levels deep.
std::string PushedThenNested(size_t lists) {
  return "\x80\x02" + std::string(lists, ']') + std::string(lists - 1, 'a') + ".";
}

TEST(PickleVmTest, LimitsAreEnforced) {
  std::string bytes = ReadFileOrFail("testdata/pickles/p2.pkl");
  PickleLimits small;
  small.max_depth = 3;
  EXPECT_EQ(Parse(bytes, small).status().code(), StatusCode::kLimitExceeded);
  small = {};
  small.max_string_bytes = 4;
  StatusOr<PickleResult> r = Parse(bytes, small);
  EXPECT_EQ(r.status().code(), StatusCode::kLimitExceeded);
  EXPECT_NE(r.status().message().find("(limit max_string_bytes)"), std::string::npos) << r.status().ToString();
  small = {};
  small.max_memo = 5;
  EXPECT_EQ(Parse(bytes, small).status().code(), StatusCode::kLimitExceeded);
  small = {};
  small.max_nodes = 50;
  EXPECT_EQ(Parse(bytes, small).status().code(), StatusCode::kLimitExceeded);

  // A max_depth above kMaxPickleDepth (5000) acts as it: walks recurse once a
  // level. Lists each appended to the one below, no marks; read without
  // resolving torch objects (that walk recurses).
  small = {};
  small.max_depth = 70000;
  std::string shallower = PushedThenNested(5000), deep = PushedThenNested(5001);
  ByteCursor fits(AsBytes(shallower));
  EXPECT_TRUE(ReadPickle(fits, small).ok());
  ByteCursor past(AsBytes(deep));
  StatusOr<PickleResult> too_deep = ReadPickle(past, small);
  EXPECT_EQ(too_deep.status().code(), StatusCode::kLimitExceeded);
  EXPECT_NE(too_deep.status().message().find("nested deeper than 5000 levels (limit max_depth)"), std::string::npos)
      << too_deep.status().ToString();
}

// A pickle that pushes objects and nests them only afterwards holds them all
// before the depth limit can see one level: the stack limit stops it first.
// By default at 2^19 (Python's pickler writes lists 1000 items at a time).
TEST(PickleVmTest, StackLimitStopsObjectsPushedBeforeTheyNest) {
  EXPECT_EQ(PickleLimits{}.max_stack, 524288u);
  PickleLimits small;
  small.max_stack = 8;
  std::string fits = PushedThenNested(8), past = PushedThenNested(9);
  ByteCursor a(AsBytes(fits));
  EXPECT_TRUE(ReadPickle(a, small).ok());
  ByteCursor b(AsBytes(past));
  StatusOr<PickleResult> r = ReadPickle(b, small);
  EXPECT_EQ(r.status().code(), StatusCode::kLimitExceeded);
  EXPECT_NE(r.status().message().find("offset 10: 0x5d ']': stack deeper than 8 (limit max_stack)"), std::string::npos)
      << r.status().ToString();
}

// Memo indices out of CPython's 0, 1, 2, ... order: MEMOIZE numbers its entry
// by len(memo), an index set before the run it continues joins it, and every
// read gives what CPython's unpickler gives (8 and (6, 5, 9), checked in Python).
TEST(PickleVmTest, MemoIndicesOutOfOrderReadAsCPythonReadsThem) {
  StatusOr<PickleResult> r = Parse(std::string("\x80\x04K\x07q\x01K\x08\x94" "00h\x01.", 14));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->graph.at(r->graph.root).int_value, 8);
  r = Parse(std::string("\x80\x04K\x05q\x01" "0K\x06q\x00" "0K\x09\x94" "0(h\x00h\x01h\x02t.", 26));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Node& t = r->graph.at(r->graph.root);
  ASSERT_EQ(t.kind, NodeKind::kTuple);
  std::vector<int64_t> values;
  for (NodeId c : t.items) values.push_back(r->graph.at(c).int_value);
  EXPECT_EQ(values, (std::vector<int64_t>{6, 5, 9}));
}

}  // namespace
}  // namespace optstate
