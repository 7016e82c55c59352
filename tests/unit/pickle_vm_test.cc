// The pickle machine on real pickles of every protocol (made by Python's pickler,
// testdata/pickles), on DCP's protocol-4 .metadata, and on byte surgery of those
// files for the opcodes Python 3 never writes (Python 2 strings, INST/OBJ, DUP,
// POP, PERSID) and for corruption.
#include "pickle/pickle_vm.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fixtures.h"
#include "graph_compare.h"
#include "io/byte_cursor.h"
#include "optstate/file_io.h"
#include "optstate/torch_objects.h"
#include "parse_pickle.h"
#include "pickle/graph_walk.h"
#include "pickle/pickle_text.h"
#include "torch/security.h"

namespace optstate {
namespace {

using testing::ReadFileOrFail;

using testing::Parse;
using testing::Replace;

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

// Only globals and calls with BUILD state or keyword arguments carry the
// out-of-line fields; ints, strings, tuples, plain calls and persistent ids
// do not (issue 42: a tensor's calls and persistent id held 3 blocks of 32
// bytes). A copy of a node owns its own extra.
TEST(PickleVmTest, OnlyGlobalsAndCallsWithStateCarryTheOutOfLineFields) {
  StatusOr<PickleResult> r = Parse(ReadFileOrFail("testdata/pickles/p2.pkl"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  size_t plain = 0, calls = 0;
  for (const Node& n : r->graph.nodes) {
    bool carries = n.kind == NodeKind::kGlobal || n.state() != kNoNode || n.kwargs() != kNoNode;
    EXPECT_EQ(n.has_extra(), carries) << "offset " << n.offset;
    if (!n.has_extra()) {
      ++plain;
      calls += n.callable() != kNoNode;  // OrderedDict()
      EXPECT_EQ(n.state(), kNoNode);
      EXPECT_TRUE(n.module().empty());
    }
  }
  EXPECT_GT(plain, 10u);
  EXPECT_GT(calls, 0u);  // a call's callable and arguments are held in the node
  static_assert(sizeof(Node) == 56);
  // Offsets are 40 bits: exact below 2^40, kOffsetUnknown at and past it.
  Node far;
  for (uint64_t at : {(uint64_t{1} << 40) - 2, uint64_t{1} << 40, UINT64_MAX}) {
    far.set_offset(at);
    EXPECT_EQ(far.offset, at < Node::kOffsetUnknown ? at : Node::kOffsetUnknown);
  }
  Node call;
  call.kind = NodeKind::kObject;
  call.set_callable(3);
  call.set_class_name("collections.OrderedDict");
  Node copy = call;
  copy.set_callable(4);
  copy.set_class_name("x.Y");
  EXPECT_EQ(call.callable(), 3u);
  EXPECT_EQ(call.class_name(), "collections.OrderedDict");
  EXPECT_EQ(copy.callable(), 4u);
  EXPECT_EQ(copy.class_name(), "x.Y");
  EXPECT_EQ(copy.module(), "");
  EXPECT_EQ(copy.name(), "");
  // A global's module and name share the out-of-line text a call keeps its
  // class in: neither reads as the other.
  Node global;
  global.kind = NodeKind::kGlobal;
  global.set_global("torch._utils", "_rebuild_tensor_v2");
  EXPECT_EQ(global.module(), "torch._utils");
  EXPECT_EQ(global.name(), "_rebuild_tensor_v2");
  EXPECT_EQ(global.class_name(), "");
  EXPECT_EQ(GlobalName(global), "torch._utils._rebuild_tensor_v2");
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

// A walk counts a node's children without naming them (so that a search
// passing a large dict by builds no paths); the count must be the number of
// children it then walks, for every kind, calls with args, kwargs and state
// among them.
TEST(PickleVmTest, WalkCountsTheChildrenItWalks) {
  const std::string original = ReadFileOrFail("testdata/pickles/p0.pkl");
  std::vector<std::string> pickles;
  for (const char* name : {"p0", "p1", "p2", "p3", "p4", "p5"}) {
    pickles.push_back(ReadFileOrFail(std::string("testdata/pickles/") + name + ".pkl"));
  }
  pickles.push_back(Replace(original, "Vplain\n", "(Vx\nicollections\nOrderedDict\n"));
  size_t checked = 0;
  for (const std::string& bytes : pickles) {
    StatusOr<PickleResult> r = Parse(bytes);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<WalkStep> steps;
    WalkTree(r->graph, r->graph.root, 64, [&](const WalkStep& s) {
      steps.push_back(s);
      return true;
    });
    // Pre-order: a step's children are the steps one level down before the
    // walk comes back to its level.
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].repeat) continue;
      size_t walked = 0;
      for (size_t j = i + 1; j < steps.size() && steps[j].depth > steps[i].depth; ++j) {
        if (steps[j].depth == steps[i].depth + 1) {
          EXPECT_EQ(steps[j].siblings, steps[i].children) << steps[j].path;
          ++walked;
        }
      }
      EXPECT_EQ(walked, steps[i].children) << (steps[i].path.empty() ? "(root)" : steps[i].path);
      checked += walked > 0;
    }
  }
  EXPECT_GT(checked, 20u);
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
  const Node& pid = persid->graph.at(*id);  // its argument in the node, no block (4 * 10^6 at 10^6 parameters)
  EXPECT_EQ(pid.kind, NodeKind::kPersistentId);
  EXPECT_FALSE(pid.has_extra());
  EXPECT_EQ(pid.args() == kNoNode ? "" : persid->graph.at(pid.args()).text.view(), "key");
  // The machine counts what it made, for the torch layer's reserve.
  size_t calls = 0;
  for (const Node& n : persid->graph.nodes) calls += n.kind == NodeKind::kObject;
  EXPECT_GT(calls, 0u);
  EXPECT_EQ(persid->graph.calls_made, calls);
  EXPECT_EQ(persid->graph.persistent_ids_made, 1u);
}

}  // namespace
}  // namespace optstate

namespace optstate {
namespace {

// A long parse stops on RequestCancellation (Ctrl-C in the CLI or Python) at
// its next check, every 2^16 opcodes (here the 65536th, a BININT1 at byte
// 131068), naming where; a short one never looks.
TEST(PickleVmTest, CancellationStopsALongParse) {
  std::string list("\x80\x02]q\x00(", 6);  // PROTO 2, EMPTY_LIST, BINPUT 0, MARK
  for (int i = 0; i < 70000; ++i) list += "K\x01";
  list += "e.";
  RequestCancellation();
  StatusOr<PickleResult> long_parse = Parse(list);
  StatusOr<PickleResult> short_parse = Parse(std::string("\x80\x02K\x05.", 5));
  ClearCancellation();
  ASSERT_FALSE(long_parse.ok());
  EXPECT_EQ(long_parse.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(long_parse.status().message(), "offset 131068: 0x4b 'K': cancelled");
  EXPECT_TRUE(short_parse.ok());
  StatusOr<PickleResult> again = Parse(list);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->graph.at(again->graph.root).items.size(), 70000u);
}

}  // namespace
}  // namespace optstate
