// Matching optimizer state to parameters, checked against the truth the fixture
// generator recorded: which parameter (and view) really used each state key.
#include "optstate/collisions.h"

#include <gtest/gtest.h>

#include <set>

#include "fixtures.h"

namespace optstate {
namespace {

struct Loaded {
  std::unique_ptr<CheckpointFile> file;
  OptimizerState state;
  std::vector<ParamInfo> params;
};

Loaded Load(const std::string& fixture, const std::string& path = "") {
  Loaded l;
  auto f = OpenCheckpoint(testing::RepoPath(fixture));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  l.file = std::move(*f);
  auto st = ReadOptimizerState(l.file->checkpoint(), path);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  l.state = std::move(*st);
  std::string manifest = fixture.substr(0, fixture.size() - 3) + ".manifest.json";
  auto p = ReadParamManifest(testing::RepoPath(manifest));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  l.params = std::move(*p);
  return l;
}

using Owners = std::set<std::pair<std::string, int64_t>>;

// What the truth file says about key i, and what the match says.
Owners Truth(const nlohmann::json& truth, size_t i) {
  Owners o;
  for (const auto& u : truth["keys"][i]["used_by"]) o.emplace(u["param"].get<std::string>(), u["view"].get<int64_t>());
  return o;
}

Owners Matched(const Loaded& l, const MatchReport& r, size_t i) {
  Owners o;
  for (size_t p : r.CandidatesOf(i)) o.emplace(l.params[p].name, r.keys[i].view);
  return o;
}

void ExpectMatchesTruth(const std::string& fixture, const std::string& path, size_t collisions) {
  SCOPED_TRACE(fixture);
  Loaded l = Load(fixture, path);
  StatusOr<MatchReport> r = MatchState(l.file->checkpoint(), l.state, l.params);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string text = testing::ReadFileOrFail(fixture.substr(0, fixture.size() - 3) + ".truth.json");
  nlohmann::json truth = nlohmann::json::parse(text);
  ASSERT_EQ(truth["keys"].size(), l.state.keys.size());
  std::vector<size_t> temporaries;
  std::set<std::string> used;
  for (size_t i = 0; i < l.state.keys.size(); ++i) {
    EXPECT_EQ(Matched(l, *r, i), Truth(truth, i)) << "key " << i << " " << l.state.keys[i].text;
    EXPECT_NE(r->keys[i].fate, KeyFate::kAmbiguous) << l.state.keys[i].text;
    // A key of a temporary copy is an orphan; every other key has its owner.
    bool temporary = truth["keys"][i].contains("temporary_of");
    if (temporary) temporaries.push_back(i);
    EXPECT_EQ(r->keys[i].fate == KeyFate::kOrphan, temporary) << l.state.keys[i].text << ": " << r->keys[i].reason;
    for (const auto& [name, view] : Truth(truth, i)) used.insert(name);
  }
  EXPECT_EQ(r->collisions.size(), collisions);
  EXPECT_EQ(r->orphans, temporaries);
  std::vector<size_t> unused;
  for (size_t p = 0; p < l.params.size(); ++p) {
    if (!used.count(l.params[p].name)) unused.push_back(p);
  }
  EXPECT_EQ(r->without_state, unused);
}

TEST(StateMatchingTest, PointerKeysMatchTheTruthExactly) {
  for (const char* line : {"torch113", "torch26"}) {
    std::string dir = std::string("testdata/good/") + line + "/";
    ExpectMatchesTruth(dir + "heavyball_ptr_shape.pt", "", 0);
    ExpectMatchesTruth(dir + "heavyball_bare_ptr.pt", "", 0);
    ExpectMatchesTruth(dir + "ptr_shape_fp16.pt", "", 0);
    ExpectMatchesTruth(dir + "heavyball_param_view.pt", "optimizer", 0);
    ExpectMatchesTruth(dir + "heavyball_fsdp_collision.pt", "", 2);
    ExpectMatchesTruth(dir + "heavyball_tied.pt", "optimizer", 0);
  }
}

// HeavyBall 0.24's merge_dims keyed a channels_last weight through a reshape
// copy: that state belongs to no parameter, and the weight has none.
TEST(StateMatchingTest, KeysOfTemporaryCopiesAreOrphans) {
  for (const char* line : {"torch113", "torch26"}) {
    std::string fixture = std::string("testdata/good/") + line + "/heavyball_orphan.pt";
    ExpectMatchesTruth(fixture, "", 0);
    Loaded l = Load(fixture);
    StatusOr<MatchReport> r = MatchState(l.file->checkpoint(), l.state, l.params);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->orphans.size(), 3u);
    const StateKey& k = l.state.keys[r->orphans[0]];
    EXPECT_EQ(r->keys[r->orphans[0]].reason,
              "pointer " + std::to_string(k.ptr) +
                  " lies inside no parameter: state of a temporary (a reshape copy of conv2.weight [4, 4, 3, 3]?), "
                  "never used by any parameter");
    ASSERT_EQ(r->without_state.size(), 1u);
    EXPECT_EQ(l.params[r->without_state[0]].name, "conv2.weight");
    // conv1's merged (4, 27) key is a view at conv1's own pointer: exact.
    EXPECT_EQ(l.state.keys[r->params[0].keys.at(0)].shape, (std::vector<int64_t>{4, 27}));
    EXPECT_EQ(r->params[0].confidence, Confidence::kExact);
  }
}

// Without data_ptr, a key whose shape no parameter has may be a view (split or
// merged dims) or a temporary copy: held back, never guessed.
TEST(StateMatchingTest, ViewShapedKeysWithoutPointersAreAmbiguous) {
  Loaded l = Load("testdata/good/torch113/heavyball_orphan.pt");
  for (ParamInfo& p : l.params) p.data_ptr.reset();
  StatusOr<MatchReport> r = MatchState(l.file->checkpoint(), l.state, l.params);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->orphans.empty());
  // conv1's merged key, conv2's three copies, and the two [4] biases (pointer order could pair those).
  ASSERT_EQ(r->ambiguous.size(), 6u);
  size_t conv1 = r->ambiguous[0];
  EXPECT_EQ(l.state.keys[conv1].shape, (std::vector<int64_t>{4, 27}));
  EXPECT_EQ(r->keys[conv1].reason,
            "no parameter has shape [4, 27]; it may be a view of conv1.weight [4, 3, 3, 3] (split or merged dims) "
            "or a temporary copy: data_ptr in a manifest decides");
}

TEST(StateMatchingTest, KeySchemesAreClassified) {
  struct Case {
    const char* fixture;
    const char* path;
    KeyKind scheme;
  } cases[] = {
      {"testdata/good/torch113/adamw_index.pt", "", KeyKind::kIndex},
      {"testdata/good/torch113/string_index.pt", "", KeyKind::kStringIndex},
      {"testdata/good/torch26/fqn_state.pt", "", KeyKind::kFqn},
      {"testdata/good/torch113/heavyball_ptr_shape.pt", "", KeyKind::kPtrShape},
      {"testdata/good/torch113/heavyball_bare_ptr.pt", "", KeyKind::kBarePtr},
      {"testdata/good/torch113/heavyball_param_view.pt", "optimizer", KeyKind::kParamView},
      {"testdata/good/torch113/combined.pt", "optimizer", KeyKind::kIndex},
      {"testdata/good/torch26/fsdp2_rank0_optim.pt", "", KeyKind::kIndex},
      {"testdata/good/torch26/fsdp2_dcp.consolidated.pt", "optim", KeyKind::kFqn},
  };
  for (const Case& c : cases) {
    auto f = OpenCheckpoint(testing::RepoPath(c.fixture));
    ASSERT_TRUE(f.ok());
    auto st = ReadOptimizerState((*f)->checkpoint(), c.path);
    ASSERT_TRUE(st.ok()) << c.fixture << ": " << st.status().ToString();
    EXPECT_EQ(st->scheme, c.scheme) << c.fixture;
    EXPECT_FALSE(st->mixed) << c.fixture;
  }
}

TEST(StateMatchingTest, FsdpCollisionGroupsNameTheMergedParameters) {
  Loaded l = Load("testdata/good/torch113/heavyball_fsdp_collision.pt");
  StatusOr<MatchReport> r = MatchState(l.file->checkpoint(), l.state, l.params);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->collisions.size(), 2u);
  std::vector<std::string> names;
  for (size_t p : r->collisions[0].params) names.push_back(l.params[p].name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc2.weight"}));
  EXPECT_EQ(r->collisions[0].reason,
            "2 parameters of shape [8, 8] keyed at pointer 0 (FSDP) shared one state entry: their moments were "
            "merged in training and cannot be split");
  EXPECT_EQ(r->collisions[1].params.size(), 4u);  // fc1.bias, fc2.bias, norm.weight, norm.bias
  EXPECT_EQ(r->unattributable_bytes, 2u * 256 + 2u * 32);  // exp_avg + exp_avg_sq of each merged entry
}

TEST(StateMatchingTest, WithoutPointersSameShapeParametersAreHeldBack) {
  Loaded l = Load("testdata/good/torch113/heavyball_bare_ptr.pt");
  for (ParamInfo& p : l.params) p.data_ptr.reset();
  StatusOr<MatchReport> r = MatchState(l.file->checkpoint(), l.state, l.params);
  EXPECT_EQ(r.status().ToString(),
            "invalid argument: bare pointer keys carry no shape: matching them needs data_ptr for every "
            "parameter in the manifest");

  Loaded s = Load("testdata/good/torch113/ptr_shape_fp16.pt");
  for (ParamInfo& p : s.params) p.data_ptr.reset();
  r = MatchState(s.file->checkpoint(), s.state, s.params);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // emb [16, 8] and head.weight [4, 8] are unique shapes; fc1/fc2 weights and the
  // four [8] vectors are not.
  EXPECT_EQ(r->ambiguous.size(), 6u);
  EXPECT_EQ(r->keys[0].confidence, Confidence::kShapeUnique);
  EXPECT_EQ(r->keys[r->ambiguous[0]].reason,
            "2 parameters of shape [8, 8] and 2 keys: same-shape parameters cannot be told apart without their "
            "data_ptr (a manifest)");
  // Each shape's candidates are held once, by its group, not once per key.
  ASSERT_EQ(r->candidate_groups.size(), 2u);
  for (size_t k : r->ambiguous) {
    EXPECT_TRUE(r->keys[k].params.empty());
    ASSERT_GE(r->keys[k].candidates, 0);
  }
  std::vector<std::string> names;
  for (size_t p : r->CandidatesOf(r->ambiguous[0])) names.push_back(s.params[p].name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc2.weight"}));
  EXPECT_EQ(r->candidate_groups[r->keys[r->ambiguous[0]].candidates].keys, (std::vector<size_t>{1, 3}));
}

// What regenerate --manifest-out writes is what ReadParamManifest reads.
TEST(StateMatchingTest, ManifestTextReadsBack) {
  auto params = ReadParamManifest(testing::RepoPath("testdata/good/torch26/heavyball_orphan.manifest.json"));
  ASSERT_TRUE(params.ok());
  (*params)[1].data_ptr.reset();
  (*params)[2].dtype = DType::kBFloat16;
  (*params)[2].nbytes /= 2;
  auto back = ParseParamManifest(ParamManifestText(*params));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), params->size());
  for (size_t i = 0; i < params->size(); ++i) {
    EXPECT_EQ((*back)[i].name, (*params)[i].name);
    EXPECT_EQ((*back)[i].shape, (*params)[i].shape);
    EXPECT_EQ((*back)[i].dtype, (*params)[i].dtype);
    EXPECT_EQ((*back)[i].data_ptr, (*params)[i].data_ptr);
    EXPECT_EQ((*back)[i].nbytes, (*params)[i].nbytes);
  }
}

TEST(StateMatchingTest, ManifestErrorsNameTheField) {
  EXPECT_EQ(ParseParamManifest("{\"format\": \"optstate-param-manifest\", \"version\": 1, \"params\": "
                               "[{\"name\": \"w\", \"shape\": [2, -1], \"dtype\": \"float32\"}]}")
                .status()
                .ToString(),
            "invalid argument: params[0].shape: expected an array of non-negative integers");
  EXPECT_EQ(ParseParamManifest("{\"format\": 3}").status().ToString(),
            "invalid argument: not a parameter manifest: \"format\" must be \"optstate-param-manifest\" (or the "
            "file a plain list of parameters)");
  EXPECT_EQ(ParseParamManifest("{\"format\": \"optstate-param-manifest\", \"version\": 1, \"params\": "
                               "[{\"name\": \"w\", \"shape\": [2], \"dtype\": 7}]}")
                .status()
                .ToString(),
            "invalid argument: params[0].dtype: unknown dtype ''");
  EXPECT_EQ(ParseParamManifest("not json").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(ParseParamManifest("[{\"name\": \"w\", \"shape\": [2], \"dtype\": \"float32\"}, 3]").status().ToString(),
            "invalid argument: [1]: expected an object");
}

// A plain JSON list of parameters is the params array alone, read the same way.
TEST(StateMatchingTest, APlainListIsAManifest) {
  auto params = ParseParamManifest(
      "[{\"name\": \"emb.weight\", \"shape\": [10, 4], \"dtype\": \"float32\", \"group\": 0},"
      " {\"name\": \"head.bias\", \"shape\": [10], \"dtype\": \"bfloat16\", \"data_ptr\": 4096}]");
  ASSERT_TRUE(params.ok()) << params.status().ToString();
  ASSERT_EQ(params->size(), 2u);
  EXPECT_EQ((*params)[0].name, "emb.weight");
  EXPECT_EQ((*params)[0].shape, (std::vector<int64_t>{10, 4}));
  EXPECT_EQ((*params)[0].group, 0);
  EXPECT_EQ((*params)[1].dtype, DType::kBFloat16);
  EXPECT_EQ((*params)[1].data_ptr, 4096u);
  EXPECT_EQ((*params)[1].nbytes, 20u);
}

}  // namespace
}  // namespace optstate
