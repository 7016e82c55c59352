// The pickle machine on real pickles of every protocol (made by Python's pickler,
// testdata/pickles), on DCP's protocol-4 .metadata, and on byte surgery of those
// files for the opcodes Python 3 never writes (Python 2 strings, INST/OBJ, DUP,
// POP, PERSID) and for corruption.
#include "optstate/pickle_vm.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fixtures.h"
#include "graph_compare.h"
#include "optstate/security.h"
#include "optstate/torch_objects.h"
#include "pickle/graph_walk.h"
#include "pickle/pickle_text.h"

namespace optstate {
namespace {

using testing::ReadFileOrFail;

StatusOr<PickleResult> Parse(const std::string& bytes, const PickleLimits& limits = {}) {
  ByteCursor c(AsBytes(bytes));
  OPTSTATE_ASSIGN_OR_RETURN(PickleResult r, ReadPickle(c, limits));
  auto no_storage = [](StorageRef&) { return CorruptError("plain pickles have no storages"); };
  OPTSTATE_RETURN_IF_ERROR(ResolveTorchObjects(r.graph, no_storage, limits.max_depth).status());
  return r;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "pattern not in fixture";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

std::string Describe(const PickleResult& r, const nlohmann::json& want) {
  testing::GraphComparer cmp(r.graph, nullptr);
  return cmp.Compare(r.graph.root, want, "$");
}

TEST(PickleVmTest, EveryProtocolReadsAsPythonSawIt) {
  for (int p = 0; p <= 5; ++p) {
    std::string path = "testdata/pickles/p" + std::to_string(p) + ".pkl";
    SCOPED_TRACE(path);
    StatusOr<PickleResult> r = Parse(ReadFileOrFail(path));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->protocol, p >= 2 ? p : 0);
    EXPECT_EQ(Describe(*r, testing::ExpectedJson(path)["root"]), "");
  }
}

TEST(PickleVmTest, SharedObjectsStayShared) {
  StatusOr<PickleResult> r = Parse(ReadFileOrFail("testdata/pickles/p2.pkl"));
  ASSERT_TRUE(r.ok());
  std::optional<NodeId> a = FindPath(r->graph, r->graph.root, "shared[0]");
  std::optional<NodeId> b = FindPath(r->graph, r->graph.root, "shared[1]");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);  // one node, reached twice through the memo
}

TEST(PickleVmTest, ExtensionCodesAreReportedAsGlobals) {
  StatusOr<PickleResult> r = Parse(ReadFileOrFail("testdata/pickles/ext.pkl"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->globals.size(), 3u);
  EXPECT_EQ(r->globals[0].module + "." + r->globals[0].name, "copyreg._extension_registry.1");
  EXPECT_EQ(r->globals[0].opcode, "0x82");
  EXPECT_EQ(r->globals[1].name, "300");
  EXPECT_EQ(r->globals[1].opcode, "0x83");
  EXPECT_EQ(r->globals[2].name, "70000");
  EXPECT_EQ(r->globals[2].opcode, "0x84");
}

// DCP's .metadata: a protocol-4 pickle of dataclasses, as torch 2.6 wrote it.
TEST(PickleVmTest, DcpMetadataGlobalsInOrder) {
  StatusOr<PickleResult> r = Parse(ReadFileOrFail("testdata/good/torch26/fsdp2_dcp/.metadata"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->protocol, 4);
  std::vector<std::string> unique;
  for (const GlobalRef& g : r->globals) {
    std::string n = g.module + "." + g.name;
    if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(n);
  }
  std::vector<std::string> want = {
      "torch.distributed.checkpoint.metadata.Metadata",
      "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
      "torch.distributed.checkpoint.metadata.TensorProperties",
      "torch.float32",
      "torch.serialization._get_layout",
      "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
      "torch.Size",
      "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
      "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
      "torch.distributed.checkpoint.metadata.MetadataIndex",
      "torch.distributed.checkpoint.filesystem._StorageInfo",
      "torch.distributed.checkpoint.metadata.StorageMeta",
      "pathlib._local.PosixPath",
  };
  EXPECT_EQ(unique, want);
}

// Opcodes Python 3 never writes, spliced into a real protocol-0 pickle in place
// of `Vplain\n` (the str 'plain'): the result must read as the original.
TEST(PickleVmTest, Python2StringOpcodesAndStackOpsReadTheSame) {
  const std::string original = ReadFileOrFail("testdata/pickles/p0.pkl");
  const nlohmann::json want = testing::ExpectedJson("testdata/pickles/p0.pkl")["root"];
  const std::string plain = "Vplain\n";
  struct Case {
    const char* name;
    std::string replacement;
  } cases[] = {
      {"STRING", "S'plain'\n"},
      {"STRING with escapes", "S'pl\\x61in'\n"},
      {"SHORT_BINSTRING", std::string("U\x05plain", 7)},
      {"BINSTRING", std::string("T\x05\x00\x00\x00plain", 10)},
      {"BINUNICODE8", std::string("\x8d\x05\x00\x00\x00\x00\x00\x00\x00plain", 14)},
      {"DUP then POP", "Vplain\n20"},
      {"MARK ... POP_MARK", "(NN1Vplain\n"},
      {"POP of an empty mark", "(0Vplain\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    StatusOr<PickleResult> r = Parse(Replace(original, plain, c.replacement));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Describe(*r, want), "");
  }
}

// Only calls, persistent ids, globals and refined containers carry the
// out-of-line fields; the ints, strings and tuples that make up most of a
// checkpoint's graph do not (issue 21: 72 bytes a node, not 120). A copy of a
// node owns its own extra.
TEST(PickleVmTest, OnlyCallsAndGlobalsCarryTheOutOfLineFields) {
  StatusOr<PickleResult> r = Parse(ReadFileOrFail("testdata/pickles/p2.pkl"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  size_t plain = 0;
  for (const Node& n : r->graph.nodes) {
    bool carries = n.kind == NodeKind::kObject || n.kind == NodeKind::kGlobal || n.kind == NodeKind::kPersistentId ||
                   !n.class_name().empty();
    EXPECT_EQ(n.has_extra(), carries) << "offset " << n.offset;
    if (!n.has_extra()) {
      ++plain;
      EXPECT_EQ(n.callable(), kNoNode);
      EXPECT_EQ(n.state(), kNoNode);
      EXPECT_TRUE(n.module().empty());
    }
  }
  EXPECT_GT(plain, 10u);
  static_assert(sizeof(Node) == 64);
  // Offsets are 40 bits: exact below 2^40, kOffsetUnknown at and past it.
  Node far;
  far.set_offset((uint64_t{1} << 40) - 2);
  EXPECT_EQ(far.offset, (uint64_t{1} << 40) - 2);
  far.set_offset(uint64_t{1} << 40);
  EXPECT_EQ(far.offset, Node::kOffsetUnknown);
  far.set_offset(UINT64_MAX);
  EXPECT_EQ(far.offset, Node::kOffsetUnknown);

  Node call;
  call.kind = NodeKind::kObject;
  call.extra().callable = 3;
  call.extra().module = "collections";
  Node copy = call;
  copy.extra().callable = 4;
  EXPECT_EQ(call.callable(), 3u);
  EXPECT_EQ(copy.callable(), 4u);
  EXPECT_EQ(copy.module(), "collections");
}

// None, True, False and () are one node each, as they are one object each in
// CPython; BUILD, the one opcode that could change such a node, gets a node of
// its own, and the others stay as they were.
TEST(PickleVmTest, NoneBooleansAndTheEmptyTupleAreOneNodeEach) {
  StatusOr<PickleResult> r = Parse(std::string("\x80\x02(NN\x88\x88\x89\x89))(tN}bNt.", 19));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Node& top = r->graph.at(r->graph.root);
  ASSERT_EQ(top.items.size(), 11u);
  const auto& it = top.items;
  EXPECT_EQ(it[0], it[1]);
  EXPECT_EQ(it[2], it[3]);
  EXPECT_EQ(it[4], it[5]);
  EXPECT_EQ(it[6], it[7]);
  EXPECT_NE(it[0], it[2]);
  EXPECT_NE(it[2], it[4]);
  EXPECT_TRUE(r->graph.at(it[2]).bool_value);
  EXPECT_FALSE(r->graph.at(it[4]).bool_value);
  EXPECT_NE(it[8], it[6]) << "(t makes a tuple of its own, as CPython's TUPLE does";
  EXPECT_EQ(r->graph.at(it[6]).offset, 9u) << "the first ) is where the shared node was made";
  EXPECT_NE(it[9], it[0]) << "BUILD's target is a node of its own";
  EXPECT_NE(r->graph.at(it[9]).state(), kNoNode);
  EXPECT_EQ(it[10], it[0]);
  EXPECT_EQ(r->graph.at(it[0]).state(), kNoNode) << "the shared None is unchanged";
  EXPECT_EQ(r->graph.nodes.size(), 8u);  // None, True, False, (), (t's tuple, BUILD's None, {}, the outer tuple
}

// Ints and short strs are immutable in Python too, and a torch.save file
// repeats a few of them (sizes, strides, 'storage', 'cpu') for every tensor:
// a recurring one is one node. Long strs are not kept; BUILD on a shared
// value gets a node of its own.
TEST(PickleVmTest, RecurringIntsAndShortStrsAreOneNodeEach) {
  const std::string sixteen_bytes = "0123456789abcdef";
  const std::string pickle = std::string("\x80\x02(K\x10K\x10M\x00\x01\x8a\x02\x00\x01", 14) +
                             std::string("X\x07\x00\x00\x00storage", 12) + std::string("X\x07\x00\x00\x00storage", 12) +
                             std::string("X\x10\x00\x00\x00", 5) + sixteen_bytes +
                             std::string("X\x10\x00\x00\x00", 5) + sixteen_bytes +
                             std::string("K\x11K\x10Nbt.", 9);
  StatusOr<PickleResult> r = Parse(pickle);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Node& top = r->graph.at(r->graph.root);
  ASSERT_EQ(top.items.size(), 10u);
  const auto& it = top.items;
  EXPECT_EQ(it[0], it[1]) << "K 16 twice";
  EXPECT_EQ(it[2], it[3]) << "BININT2 256 and LONG1 256 are the same int";
  EXPECT_NE(it[0], it[2]);
  EXPECT_EQ(r->graph.at(it[2]).offset, 7u) << "made where the value first occurs";
  EXPECT_EQ(it[4], it[5]) << "'storage' twice";
  EXPECT_EQ(r->graph.at(it[4]).text, "storage");
  EXPECT_NE(it[6], it[7]) << "strs longer than 15 bytes are not kept";
  EXPECT_EQ(r->graph.at(it[6]).text, sixteen_bytes);
  EXPECT_NE(it[8], it[0]);
  EXPECT_EQ(r->graph.at(it[8]).int_value, 17);
  EXPECT_NE(it[9], it[0]) << "BUILD's target is a node of its own";
  EXPECT_EQ(r->graph.at(it[9]).int_value, 16);
  EXPECT_NE(r->graph.at(it[9]).state(), kNoNode);
  EXPECT_FALSE(r->graph.at(it[9]).shared);
  EXPECT_EQ(r->graph.at(it[0]).state(), kNoNode) << "the shared 16 is unchanged";
  EXPECT_TRUE(r->graph.at(it[0]).shared);
  EXPECT_FALSE(r->graph.at(it[6]).shared);

  // A memoized str is the one object its memo index names (torch 2.x writes
  // 'exp_avg' once and refers to it by index after): its node is its own;
  // an unmemoized 'exp_avg' after it is another object.
  const std::string memoized = std::string("\x80\x02(X\x07\x00\x00\x00" "exp_avgq\x00h\x00", 19) +
                               std::string("X\x07\x00\x00\x00" "exp_avgX\x07\x00\x00\x00" "exp_avgt.", 26);
  r = Parse(memoized);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& m = r->graph.at(r->graph.root).items;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0], m[1]);
  EXPECT_FALSE(r->graph.at(m[0]).shared);
  EXPECT_NE(m[2], m[0]);
  EXPECT_EQ(m[2], m[3]);
  EXPECT_TRUE(r->graph.at(m[2]).shared);

  // An empty str, memoized: forgetting it reads its text, whose data() is
  // null (UBSan flagged a memcmp of it in the interop tests' files).
  r = Parse(std::string("\x80\x02(X\x00\x00\x00\x00q\x00X\x00\x00\x00\x00h\x00t.", 19));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& e = r->graph.at(r->graph.root).items;
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0], e[2]);
  EXPECT_NE(e[0], e[1]);
  EXPECT_EQ(r->graph.at(e[1]).text, "");
}

// A short tuple of shared values is immutable too: a tensor's size (16, 8)
// recurs for every parameter; so is a 1-tuple of one (torch.Size's REDUCE
// arguments). Any other tuple holding a tuple, or one holding a list, is not
// shared.
// One the pickle memoized still is (torch memoizes every tuple and reads back
// almost none), and a BINGET of it gives the same shared node.
TEST(PickleVmTest, ShortTuplesOfSharedValuesAreOneNodeEach) {
  const std::string pickle = std::string("\x80\x02(K\x10K\x08\x86K\x10K\x08\x86", 13) +  // (16, 8) twice
                             std::string("K\x10K\x08\x86\x85K\x10K\x08\x86\x85", 12) +    // ((16, 8),) twice
                             std::string("K\x01K\x10K\x08\x86\x86K\x01K\x10K\x08\x86\x86", 16) +  // (1, (16, 8)) twice
                             std::string("]\x85]\x85", 4) +                                  // ([],) twice
                             std::string("K\x01K\x02\x86q\x00K\x01K\x02\x86h\x00t.", 16);  // (1, 2) memoized, again, BINGET
  StatusOr<PickleResult> r = Parse(pickle);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& it = r->graph.at(r->graph.root).items;
  ASSERT_EQ(it.size(), 11u);
  EXPECT_EQ(it[0], it[1]);
  EXPECT_TRUE(r->graph.at(it[0]).shared);
  EXPECT_EQ(it[2], it[3]) << "a 1-tuple of a value tuple is one node";
  EXPECT_EQ(r->graph.at(it[2]).items[0], it[0]);
  EXPECT_NE(it[4], it[5]) << "a state key (ptr, shape) keeps its own node";
  EXPECT_EQ(r->graph.at(it[4]).items[1], it[0]);
  EXPECT_NE(it[6], it[7]) << "a tuple holding a list keeps its own node";
  EXPECT_EQ(it[8], it[9]) << "a memoized value tuple stays shared";
  EXPECT_EQ(it[9], it[10]);
  EXPECT_TRUE(r->graph.at(it[8]).shared);

  // Walks see each occurrence as its own value, not as the same object again.
  std::vector<std::string> repeats;
  WalkTree(r->graph, r->graph.root, 10, [&](const WalkStep& s) {
    if (s.repeat) repeats.push_back(s.path);
    return true;
  });
  EXPECT_EQ(repeats, std::vector<std::string>{});
  std::optional<NodeId> inner = FindPath(r->graph, r->graph.root, "[1][1]");
  ASSERT_TRUE(inner);
  EXPECT_EQ(r->graph.at(*inner).int_value, 8);
}

TEST(PickleVmTest, InstObjAndPersidBuildNodesWithoutCalling) {
  const std::string original = ReadFileOrFail("testdata/pickles/p0.pkl");
  StatusOr<PickleResult> inst = Parse(Replace(original, "Vplain\n", "(Vx\nicollections\nOrderedDict\n"));
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  std::optional<NodeId> id = FindPath(inst->graph, inst->graph.root, "text[1]");
  ASSERT_TRUE(id);
  EXPECT_EQ(TypeName(inst->graph, *id), "collections.OrderedDict");
  EXPECT_TRUE(std::any_of(inst->globals.begin(), inst->globals.end(), [](const GlobalRef& g) {
    return g.opcode == "0x69 'i'" && g.module == "collections" && g.name == "OrderedDict";
  }));

  StatusOr<PickleResult> obj = Parse(Replace(original, "Vplain\n", "(cos\nsystem\nVecho hi\no"));
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  id = FindPath(obj->graph, obj->graph.root, "text[1]");
  ASSERT_TRUE(id);
  EXPECT_EQ(obj->graph.at(*id).kind, NodeKind::kObject);
  EXPECT_EQ(obj->graph.at(*id).call, CallOpcode::kObj);
  EXPECT_EQ(TypeName(obj->graph, *id), "os.system");

  const std::string with_persid = Replace(original, "Vplain\n", "Pkey\n");
  ByteCursor c(AsBytes(with_persid));
  StatusOr<PickleResult> persid = ReadPickle(c);
  ASSERT_TRUE(persid.ok()) << persid.status().ToString();
  id = FindPath(persid->graph, persid->graph.root, "text[1]");
  ASSERT_TRUE(id);
  EXPECT_EQ(persid->graph.at(*id).kind, NodeKind::kPersistentId);
}

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
  auto nested = [](size_t n) { return "\x80\x02" + std::string(n + 1, ']') + std::string(n, 'a') + "."; };
  small = {};
  small.max_depth = 70000;
  std::string shallower = nested(4999), deep = nested(5000);
  ByteCursor fits(AsBytes(shallower));
  EXPECT_TRUE(ReadPickle(fits, small).ok());
  ByteCursor past(AsBytes(deep));
  StatusOr<PickleResult> too_deep = ReadPickle(past, small);
  EXPECT_EQ(too_deep.status().code(), StatusCode::kLimitExceeded);
  EXPECT_NE(too_deep.status().message().find("nested deeper than 5000 levels (limit max_depth)"), std::string::npos)
      << too_deep.status().ToString();
}

}  // namespace
}  // namespace optstate

namespace optstate {
namespace {

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

}  // namespace
}  // namespace optstate

namespace optstate {
namespace {

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
