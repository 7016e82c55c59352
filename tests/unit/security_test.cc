// Hostile checkpoints (testdata/hostile, made by Python's pickler) are reported,
// and nothing in them runs: their payload would create a marker file.
#include "torch/security.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "fixtures.h"
#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "optstate/torch_objects.h"

namespace optstate {
namespace {

constexpr const char* kMarker = "/tmp/optstate-hostile-pickle-ran";

std::vector<std::string> Codes(const std::string& fixture) {
  StatusOr<std::unique_ptr<CheckpointFile>> f = OpenCheckpoint(testing::RepoPath(fixture));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  std::vector<std::string> codes;
  if (!f.ok()) return codes;
  for (const Finding& x : (*f)->checkpoint().findings) {
    codes.push_back(std::string(SeverityName(x.severity)) + " " + x.code + " " + x.where);
  }
  return codes;
}

TEST(SecurityTest, HostilePicklesAreReportedAndNeverRun) {
  std::filesystem::remove(kMarker);
  EXPECT_EQ(Codes("testdata/hostile/os_system_global.pt"),
            std::vector<std::string>{"error dangerous-global os_system_global/data.pkl offset 383"});
  EXPECT_EQ(Codes("testdata/hostile/os_system_stack_global.pt"),
            std::vector<std::string>{"error dangerous-global os_system_stack_global/data.pkl offset 422"});
  EXPECT_EQ(Codes("testdata/hostile/builtins_eval.pt"),
            std::vector<std::string>{"error dangerous-global builtins_eval/data.pkl offset 383"});
  EXPECT_EQ(Codes("testdata/hostile/nested_pickle_bytes.pt"),
            (std::vector<std::string>{"warning nested-pickle extra",
                                      "error dangerous-global extra (nested pickle) offset 28"}));
  EXPECT_EQ(Codes("testdata/hostile/heavyball_rng_bytes.pt"),
            (std::vector<std::string>{"warning nested-pickle extra",
                                      "warning nested-global extra (nested pickle) offset 29"}));
  EXPECT_FALSE(std::filesystem::exists(kMarker)) << "a hostile pickle ran";
}

// Every file in testdata/hostile/ (tests/fuzz's list in gen_hostile.py) is
// either refused with the error that names its trick or read with an error
// finding; none runs anything. A new hostile file needs a line here.
TEST(SecurityTest, EveryHostileFileIsRefusedOrFlagged) {
  const std::map<std::string, std::string> want = {
      {"binbytes8_huge.pt", "refused: limit exceeded: BINBYTES8 of 4611686018427387904 bytes exceeds"},
      {"binunicode8_huge.pt", "refused: limit exceeded: BINUNICODE8 of 1099511627779 bytes exceeds"},
      {"builtins_eval.pt", "flagged: error dangerous-global"},
      {"builtins_exec.pt", "flagged: error dangerous-global"},
      // Read without --verify-crc; with it, inspect refuses and still names the call (tests/cli).
      {"crc_damaged_os_system.pt", "flagged: error dangerous-global"},
      {"dtensor_state_cycle.pt", "refused: corrupt data: DTensor without a _local_tensor"},
      {"heavyball_rng_bytes.pt", "flagged: warning nested-pickle, warning nested-global"},
      {"importlib_import_module.pt", "flagged: error dangerous-global"},
      {"inst_os_system.pt", "flagged: error dangerous-global"},
      {"long4_2g.pt", "refused: limit exceeded: integer of 2147483647 bytes (limit max_long_bytes, 1024)"},
      {"marks_million.pt", "refused: limit exceeded: more than 1000 open marks (limit max_depth)"},
      {"memo_hidden_global.pt", "flagged: error dangerous-global"},
      {"memo_index_2g.pt", "refused: corrupt data: memo index 2147483632 was never stored"},
      {"nested_million.pt", "refused: limit exceeded: stack deeper than 524288 (limit max_stack)"},
      {"nested_pickle_bytes.pt", "flagged: warning nested-pickle, error dangerous-global"},
      // Nested pickles behind a codec, in protocol 0, after padding, and inside a nested torch zip.
      {"nested_pickle_cp1252.pt", "flagged: warning nested-pickle, error dangerous-global"},
      {"nested_pickle_protocol0.pt", "flagged: warning nested-pickle, error dangerous-global"},
      {"nested_pickle_padded.pt", "flagged: warning nested-pickle, error dangerous-global"},
      {"nested_torch_zip.pt", "flagged: warning nested-pickle, error dangerous-global"},
      {"newobj_ex_subprocess.pt", "flagged: error dangerous-global"},
      {"obj_os_system.pt", "flagged: error dangerous-global"},
      {"os_system_global.pt", "flagged: error dangerous-global"},
      {"os_system_stack_global.pt", "flagged: error dangerous-global"},
      {"runpy_run_path.pt", "flagged: error dangerous-global"},
      {"storage_numel_2e40.pt", "refused: limit exceeded: storage '0': 4398046511104 bytes (limit max_storage_bytes)"},
      {"subprocess_check_output.pt", "flagged: error dangerous-global"},
      // Bytes for the terminal in a key, a module and a name: what the text renderers must escape.
      {"terminal_escapes.pt", "flagged: error unknown-global-called"},
      {"newline_key.pt", "flagged: error dangerous-global"},
      {"timeit_timeit.pt", "flagged: error dangerous-global"},
      {"unknown_callable.pt", "flagged: error unknown-global-called"},
      // A tensor's class is called too (_rebuild_from_type_v2), though its node is a tensor once read.
      {"tensor_subclass_unknown.pt", "flagged: error unknown-global-called"},
      // What torch.load runs of files optstate cannot read (validate reports it: tests/cli hostile_unreadable_*).
      {"raw_pickle_os_system.pt", "refused: unsupported: not a PyTorch checkpoint (zip, legacy, zstd) or safetensors"},
      {"legacy_magic_hides_call.pt", "refused: unsupported: not a PyTorch checkpoint (zip, legacy, zstd) or safetensors"},
      {"legacy_computed_magic.pt", "refused: unsupported: not a PyTorch checkpoint (zip, legacy, zstd) or safetensors"},
      {"deflated_data_pkl.pt", "refused: unsupported: record 'archive/data.pkl' is compressed (method 8)"},
      {"tar_legacy_os_system.pt", "refused: unsupported: a tar checkpoint (torch before 0.4)"},
      {"tar_storage_views_call.pt", "refused: unsupported: a tar checkpoint (torch before 0.4)"},
      {"call_then_broken_pickle.pt", "refused: corrupt data: memo index 424242 was never stored"},
      // Read as torch.load reads a zip's data.pkl, the frame's last byte is dropped and the pickle
      // breaks later, as it does in torch (validate reports the crossing: pickle-tampered).
      {"frame_ends_mid_opcode.pt", "refused: unsupported: persistent id of type tuple is not a torch storage reference"},
      // torch accepts objects left beneath the root at STOP; the call below it is found.
      {"stop_leaves_call_below_root.pt", "flagged: error pickle-tampered, error dangerous-global"},
      {"duplicate_data_pkl.pt", "flagged: error zip-duplicate-record, error dangerous-global"},
      {"zip_name_absolute.pt", "refused: corrupt data: record '/etc/cron.d/job' lies outside the archive directory"},
      {"zip_name_dotdot.pt", "flagged: error zip-name-escapes"},
      // A record name that is not UTF-8 (with ESC and BEL) is harmless to load; it is here for
      // output safety: inspect --json used to abort on it (tests/cli: hostile_zip_name_invalid_utf8_json).
      {"zip_name_invalid_utf8.pt", "flagged: (nothing)"},
      {"zstd_bomb.pt.zst", "refused: limit exceeded: zstd frames declare 18253611008 bytes of content, more than 268435456"},
      {"zstd_stream_bomb.pt.zst", "refused: limit exceeded: zstd content expands more than 1024-fold"},
      // Claims 15 GiB and holds 1 MiB; under the default cap see ReaderCorruptionTest.ZstdSizeThatLies.
      {"zstd_lying_size.pt.zst", "refused: limit exceeded: zstd frames declare 16106127360 bytes of content"},
  };
  std::filesystem::remove(kMarker);
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::RepoPath("testdata/hostile"))) {
    if (!entry.is_regular_file()) continue;
    std::string name = entry.path().filename().string();
    ++seen;
    auto it = want.find(name);
    ASSERT_NE(it, want.end()) << "testdata/hostile/" << name << " has no expectation here";
    ReadOptions options;
    options.max_decompressed_bytes = 256u << 20;  // the bombs stop here, not at 16 GiB
    StatusOr<std::unique_ptr<CheckpointFile>> f = OpenCheckpoint(entry.path().string(), options);
    if (!f.ok()) {
      // "refused: <code>: <fragment>" -- the fragment may sit after the path and record context.
      std::string got = f.status().ToString();
      std::string code = it->second.substr(9, it->second.find(": ", 9) - 9);
      std::string fragment = it->second.substr(it->second.find(": ", 9) + 2);
      EXPECT_TRUE(it->second.starts_with("refused: ")) << name << " was refused: " << got;
      EXPECT_TRUE(got.starts_with(code + ": ")) << name << ": " << got;
      EXPECT_NE(got.find(fragment), std::string::npos) << name << ": " << got;
      continue;
    }
    std::string got = "flagged: ";
    for (const Finding& x : (*f)->checkpoint().findings) {
      if (x.severity == Severity::kInfo) continue;
      got += (got.size() > 9 ? ", " : "") + std::string(SeverityName(x.severity)) + " " + x.code;
    }
    EXPECT_EQ(got == "flagged: " ? "flagged: (nothing)" : got, it->second) << name;
  }
  EXPECT_EQ(seen, want.size());
  EXPECT_FALSE(std::filesystem::exists(kMarker)) << "a hostile pickle ran";
}

// torch 2.6 loaded every real fixture with weights_only=True (their
// .expected.json records it); our scan must agree: no warnings or errors.
std::string Codes(const std::vector<Finding>& findings) {
  std::string out;
  for (const Finding& f : findings) out += (out.empty() ? "" : ", ") + std::string(SeverityName(f.severity)) + " " + f.code;
  return out;
}

// levels of `fan` references each to the list below: fan^levels objects as a tree.
std::string Laughs(int levels, int fan) {
  std::string p = "\x80\x02]q";
  p += '\0';
  for (int k = 1; k <= levels; ++k) {
    p += "0(";
    for (int i = 0; i < fan; ++i) p += std::string("h") + static_cast<char>(k - 1);
    p += std::string("lq") + static_cast<char>(k);
  }
  return p + "0h" + static_cast<char>(levels) + ".";
}

std::vector<Finding> ScanBytes(const std::string& bytes, const PickleLimits& limits = {}) {
  ByteCursor c(AsBytes(bytes));
  std::vector<Finding> findings;
  (void)ScanPickleGlobals(c, "data.pkl", limits, findings);
  return findings;
}

// The tree is counted against the file: 2^24 objects and 64 per byte.
TEST(SecurityTest, ExpansionIsMeasuredAgainstTheFile) {
  EXPECT_EQ(Codes(ScanBytes(Laughs(7, 10))), "") << "10^7 objects: below 2^24";
  const std::vector<Finding> big = ScanBytes(Laughs(8, 10));
  EXPECT_EQ(Codes(big), "error pickle-expansion");
  EXPECT_EQ(big[0].message.substr(0, 85),
            "the objects this pickle shares expand to more than 16777216 as a tree, from a file of");
  EXPECT_EQ(Codes(ScanBytes(std::string("\x80\x02]q\x00h\x00" "a.", 9))), "info pickle-cycle");
}

// Only the built-in limits make a stop a finding: a limit the user lowered is their choice.
TEST(SecurityTest, BuiltInLimitsStopAsAFinding) {
  const std::string deep = "\x80\x02" + std::string(1100, ']') + std::string(1099, 'a') + ".";
  const std::vector<Finding> stopped = ScanBytes(deep);
  EXPECT_EQ(Codes(stopped), "error resource-limit");
  EXPECT_EQ(stopped[0].message.substr(0, 60), "offset 2101: 0x61 'a': objects nested deeper than 1000 level");
  PickleLimits lowered;
  lowered.max_nodes = 50;
  EXPECT_EQ(Codes(ScanBytes(deep, lowered)), "");
}

TEST(SecurityTest, RealFixturesHaveNoWarningsAsTorch26Agrees) {
  for (const std::string& fixture : testing::AllFixtures()) {
    nlohmann::json want = testing::ExpectedJson(fixture);
    if (want.contains("weights_only_load") && !want["weights_only_load"].is_null()) {
      EXPECT_TRUE(want["weights_only_load"]["ok"].get<bool>()) << fixture;
    }
    for (const std::string& c : Codes(fixture)) {
      EXPECT_TRUE(c.starts_with("info ")) << fixture << ": " << c;
    }
  }
  EXPECT_EQ(Codes("testdata/good/torch26/fsdp2_rank0_optim.pt").size(), 5u);  // the DTensor classes
}

TEST(SecurityTest, AllowlistMatchesTorch26) {
  EXPECT_TRUE(IsWeightsOnlyAllowed("torch._utils", "_rebuild_tensor_v2"));
  EXPECT_TRUE(IsWeightsOnlyAllowed("collections", "OrderedDict"));
  EXPECT_TRUE(IsWeightsOnlyAllowed("__builtin__", "set"));  // Python 2 name, mapped
  EXPECT_TRUE(IsWeightsOnlyAllowed("torch", "BFloat16Storage"));
  EXPECT_TRUE(IsWeightsOnlyAllowed("torch", "bfloat16"));
  EXPECT_TRUE(IsWeightsOnlyAllowed("torch", "float8_e4m3fn"));
  EXPECT_FALSE(IsWeightsOnlyAllowed("torch.distributed.checkpoint.metadata", "Metadata"));
  EXPECT_FALSE(IsWeightsOnlyAllowed("builtins", "getattr"));
  EXPECT_FALSE(IsWeightsOnlyAllowed("random", "Random"));
  EXPECT_TRUE(IsDangerousGlobal("posix", "system"));
  EXPECT_TRUE(IsDangerousGlobal("os.path", "join"));
  EXPECT_TRUE(IsDangerousGlobal("__builtin__", "eval"));
  EXPECT_TRUE(IsDangerousGlobal("subprocess", "Popen"));
  EXPECT_FALSE(IsDangerousGlobal("random", "Random"));
  EXPECT_FALSE(IsDangerousGlobal("torch._utils", "_rebuild_tensor_v2"));
}

// Default-deny (issue 20): what each kind of global becomes, with Python 2
// names mapped and dotted names resolved before matching.
TEST(SecurityTest, DefaultDenyJudgesEveryGlobal) {
  auto judge = [](const std::string& module, const std::string& name, bool called) {
    std::vector<GlobalRef> refs = {{module, name, 10, "STACK_GLOBAL"}};
    std::set<uint64_t> calls;
    if (called) calls.insert(10);
    std::vector<Finding> findings;
    ScanGlobals(refs, "data.pkl", /*nested=*/false, findings, &calls);
    return findings.empty() ? std::string("none") : findings[0].code;
  };
  // The peers' lists, and the names they were bypassed with.
  for (auto [m, n] : std::vector<std::pair<std::string, std::string>>{
           {"timeit", "timeit"}, {"cProfile", "run"}, {"pdb", "run"}, {"bdb", "Bdb"}, {"pip", "main"},
           {"pkgutil", "resolve_name"}, {"operator", "attrgetter"}, {"functools", "partial"}, {"types", "CodeType"},
           {"torch.serialization", "load"}, {"torch.storage", "_load_from_bytes"}, {"torch.hub", "load"},
           {"cPickle", "loads"}, {"urllib2", "urlopen"}, {"requests.api", "get"}, {"pathlib", "os.system"},
           {"torch.serialization", "os.system"}, {"builtins", "eval.__call__"}, {"__builtin__", "getattr"}}) {
    EXPECT_EQ(judge(m, n, false), "dangerous-global") << m << "." << n;
  }
  // torch's own submodules named like stdlib ones are torch's.
  EXPECT_EQ(judge("torch.multiprocessing.reductions", "rebuild_storage_fd", true), "unknown-global-called");
  EXPECT_EQ(judge("torch._utils", "_rebuild_tensor_v2", true), "none");
  // Called and unknown: an error; only named: a warning; known data: a warning.
  EXPECT_EQ(judge("mypackage.layers", "Block", true), "unknown-global-called");
  EXPECT_EQ(judge("mypackage.layers", "Block", false), "global-not-allowlisted");
  EXPECT_EQ(judge("numpy._core.multiarray", "_reconstruct", true), "global-not-allowlisted");
  EXPECT_EQ(judge("argparse", "Namespace", true), "global-not-allowlisted");
  EXPECT_EQ(judge("deepspeed.runtime.fp16.loss_scaler", "LossScaler", true), "global-not-allowlisted");
  EXPECT_EQ(judge("torch.distributed.tensor.placement_types", "Shard", true), "global-needs-import");
}

// The call that built a tensor is read by the scans (its class argument is
// called), then let go: the tensor's node keeps no call, and what only that
// call reached (arguments, storage reference, hooks, globals) is gone from the
// graph, which the root then reaches whole.
TEST(SecurityTest, TensorCallsAreReleasedAfterTheScans) {
  StatusOr<std::unique_ptr<CheckpointFile>> f =
      OpenCheckpoint(testing::RepoPath("testdata/hostile/tensor_subclass_unknown.pt"), ReadOptions{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const Checkpoint& cp = (*f)->checkpoint();
  bool called = false;
  for (const Finding& x : cp.findings) called |= x.code == "unknown-global-called" && x.global == "mypackage_tensors.Tagged";
  EXPECT_TRUE(called);
  size_t tensors = 0, globals = 0;
  for (const Node& n : cp.graph.nodes) {
    if (n.kind == NodeKind::kTensor) {
      ++tensors;
      EXPECT_FALSE(n.has_extra()) << n.text;
    }
    globals += n.kind == NodeKind::kGlobal;
  }
  EXPECT_EQ(tensors, 3u);  // step, exp_avg and the subclass tensor
  EXPECT_EQ(globals, 0u);  // every global was a callable or argument of a tensor's call
  std::set<NodeId> reached = {cp.graph.root};
  std::vector<NodeId> todo = {cp.graph.root};
  while (!todo.empty()) {
    const Node& n = cp.graph.at(todo.back());
    todo.pop_back();
    std::vector<NodeId> kids(n.items.begin(), n.items.end());
    for (const Entry& e : n.entries) kids.insert(kids.end(), {e.first, e.second});
    for (NodeId c : {n.callable(), n.args(), n.kwargs(), n.state()}) kids.push_back(c);
    for (NodeId c : kids) {
      if (c != kNoNode && reached.insert(c).second) todo.push_back(c);
    }
  }
  EXPECT_EQ(reached.size(), cp.graph.nodes.size());
}

}  // namespace
}  // namespace optstate

namespace optstate {
namespace {

// getattr(obj, name) is how Python pickles a bound method; it is benign only
// when obj is an instance this pickle builds (object.__new__, no constructor
// run) of a known data class and name is no dunder.
std::set<uint64_t> LookupsIn(const std::string& cls_module, const std::string& cls, const std::string& base,
                             const std::string& attr) {
  std::string p = "\x80\x02" "c__builtin__\ngetattr\n" "ccopyreg\n_reconstructor\n";
  p += "c" + cls_module + "\n" + cls + "\n" + "c__builtin__\n" + base + "\n" + "N\x87R";
  p += "X" + std::string(1, static_cast<char>(attr.size())) + std::string(3, '\0') + attr + "\x86R.";
  ByteCursor c(AsBytes(p));
  StatusOr<PickleResult> r = ReadPickle(c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? BoundMethodLookups(r->graph) : std::set<uint64_t>{};
}

TEST(SecurityTest, BoundMethodOfAKnownObjectIsALookupNotACall) {
  EXPECT_EQ(LookupsIn("torch.optim.lr_scheduler", "OneCycleLR", "object", "_annealing_cos"), std::set<uint64_t>{2});
  EXPECT_TRUE(LookupsIn("mypackage.layers", "Block", "object", "forward").empty());       // unknown class
  EXPECT_TRUE(LookupsIn("torch.optim.adamw", "AdamW", "object", "__reduce_ex__").empty());  // a dunder
  EXPECT_TRUE(LookupsIn("torch.optim.adamw", "AdamW", "dict", "step").empty());  // another base runs its __init__
  // A lookup whose result is called is no lookup: getattr(AdamW instance, "step")(...).
  {
    std::string q = "\x80\x02" "c__builtin__\ngetattr\n" "ccopyreg\n_reconstructor\n";
    q += "ctorch.optim.adamw\nAdamW\n" "c__builtin__\nobject\n" "N\x87R";
    q += std::string("X\x04\0\0\0", 5) + "step\x86R)R.";
    ByteCursor cq(AsBytes(q));
    StatusOr<PickleResult> rq = ReadPickle(cq);
    ASSERT_TRUE(rq.ok()) << rq.status().ToString();
    EXPECT_TRUE(BoundMethodLookups(rq->graph).empty());
  }
  // getattr(SWALR, "_cosine_anneal"): a function nested in a known class.
  std::string p = "\x80\x02" "c__builtin__\ngetattr\n" "ctorch.optim.swa_utils\nSWALR\n";
  p += std::string("X\x0e\0\0\0", 5) + "_cosine_anneal\x86R.";
  ByteCursor c(AsBytes(p));
  StatusOr<PickleResult> r = ReadPickle(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(BoundMethodLookups(r->graph), std::set<uint64_t>{2});
  // Judged: a warning for the lookup; without it, getattr stays dangerous.
  std::vector<GlobalRef> refs = {{"__builtin__", "getattr", 2, "GLOBAL"}};
  std::set<uint64_t> lookups{2}, calls{2};
  std::vector<Finding> findings;
  ScanGlobals(refs, "data.pkl", /*nested=*/false, findings, &calls, &lookups);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].code, "global-not-allowlisted");
  findings.clear();
  ScanGlobals(refs, "data.pkl", /*nested=*/false, findings, &calls);
  EXPECT_EQ(findings[0].code, "dangerous-global");
}

}  // namespace
}  // namespace optstate
