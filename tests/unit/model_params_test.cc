// Parameters from a model state_dict: tied duplicates and buffers dropped, the
// order taken only when it can be decided, and a manifest asked for otherwise.
#include "optstate/params.h"

#include <gtest/gtest.h>

#include "fixtures.h"
#include "optstate/collisions.h"

namespace optstate {
namespace {

std::unique_ptr<CheckpointFile> Open(const std::string& fixture) {
  auto f = OpenCheckpoint(testing::RepoPath(fixture));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(*f) : nullptr;
}

std::vector<std::string> Names(const std::vector<ParamInfo>& params) {
  std::vector<std::string> out;
  for (const ParamInfo& p : params) out.push_back(p.name);
  return out;
}

// The params a model gives for the optimizer state of `optimizer_fixture`.
StatusOr<ModelParams> FromModel(const std::string& model_fixture, const std::string& model_key,
                                const std::string& optimizer_fixture, const std::string& state_key) {
  auto model = Open(model_fixture);
  auto opt = Open(optimizer_fixture);
  if (!model || !opt) return InternalError("fixture unreadable");
  StatusOr<OptimizerState> st = LocateOptimizerState(opt->checkpoint(), state_key);
  if (!st.ok()) return st.status();
  std::string found_at;
  StatusOr<NodeId> dict = LocateModelStateDict(model->checkpoint(), model_key, &found_at);
  if (!dict.ok()) return dict.status();
  return ParamsFromModel(model->checkpoint(), *dict, opt->checkpoint(), *st);
}

TEST(ModelParamsTest, TiedDuplicatesAndBuffersAreDroppedAndModelOrderUsed) {
  for (const char* line : {"torch113", "torch26"}) {
    std::string dir = std::string("testdata/good/") + line + "/";
    for (const char* model : {"heavyball_tied.pt", "heavyball_tied_model.pt"}) {
      SCOPED_TRACE(dir + model);
      StatusOr<ModelParams> p = FromModel(dir + model, "", dir + "heavyball_tied.pt", "optimizer");
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      // What the generator's manifest (from the live optimizer) says, minus pointers.
      auto manifest = ReadParamManifest(testing::RepoPath(dir + "heavyball_tied.manifest.json"));
      ASSERT_TRUE(manifest.ok());
      EXPECT_EQ(Names(p->params), Names(*manifest));
      for (size_t i = 0; i < p->params.size(); ++i) {
        EXPECT_EQ(p->params[i].shape, (*manifest)[i].shape);
        EXPECT_EQ(p->params[i].nbytes, (*manifest)[i].nbytes);
        EXPECT_FALSE(p->params[i].data_ptr.has_value());
      }
      EXPECT_EQ(p->tied, (std::vector<std::string>{"out.weight (tied to emb.weight)"}));
      EXPECT_EQ(p->buffers, (std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}));
      EXPECT_EQ(p->order, "model order (one param group; 4 parameters once 1 tied duplicate and 3 buffers are dropped)");
    }
  }
}

TEST(ModelParamsTest, TheModelEntryOfTheSameFileIsFound) {
  auto f = Open("testdata/good/torch26/heavyball_tied.pt");
  ASSERT_TRUE(f);
  std::string found_at = "unset";
  StatusOr<NodeId> dict = LocateModelStateDict(f->checkpoint(), "", &found_at);
  ASSERT_TRUE(dict.ok()) << dict.status().ToString();
  EXPECT_EQ(found_at, "model");
  auto model_only = Open("testdata/good/torch26/heavyball_tied_model.pt");
  ASSERT_TRUE(model_only);
  dict = LocateModelStateDict(model_only->checkpoint(), "", &found_at);
  ASSERT_TRUE(dict.ok());
  EXPECT_EQ(found_at, "");
  EXPECT_EQ(LocateModelStateDict(f->checkpoint(), "optimizer", &found_at).status().ToString(),
            "invalid argument: the object at 'optimizer' is a dict, not a model state_dict {name: tensor}");
  auto opt_only = Open("testdata/good/torch113/adamw_index.pt");
  ASSERT_TRUE(opt_only);
  EXPECT_EQ(LocateModelStateDict(opt_only->checkpoint(), "", &found_at).status().code(), StatusCode::kNotFound);
}

// combined.pt splits weights and biases into two groups (weight decay): each
// group keeps module order, and only one assignment fits the state's shapes,
// the one gen_fixtures.py built (decay: every weight but the norm's).
TEST(ModelParamsTest, SeveralParamGroupsTakeTheOneAssignmentThatFits) {
  for (const char* line : {"torch113", "torch26"}) {
    const std::string file = std::string("testdata/good/") + line + "/combined.pt";
    StatusOr<ModelParams> p = FromModel(file, "", file, "optimizer");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(Names(p->params),
              (std::vector<std::string>{"emb.weight", "fc1.weight", "fc2.weight", "head.weight", "fc1.bias",
                                        "fc2.bias", "norm.weight", "norm.bias", "head.bias"}));
    std::vector<int64_t> groups;
    for (const ParamInfo& q : p->params) groups.push_back(q.group.value_or(-1));
    EXPECT_EQ(groups, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 1}));
    EXPECT_TRUE(p->frozen.empty());
    EXPECT_EQ(p->order,
              "module order within each of 2 param groups: the one assignment that fits every state shape (9 "
              "parameters once 0 tied duplicates and 0 buffers are dropped)");
  }
}

// Frozen parameters are skipped where the shapes allow only one choice, and
// refused, naming what could move, where they allow several
// (gen_param_groups.py records the truth in each case's manifest).
TEST(ModelParamsTest, FrozenParametersAreSkippedOrTheAmbiguityNamed) {
  const std::string dir = "testdata/frameworks/groups_torch26/";
  StatusOr<ModelParams> p = FromModel(dir + "frozen_and_split.pt", "", dir + "frozen_and_split.pt", "optimizer");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Names(p->params), (std::vector<std::string>{"q.weight", "k.weight", "head.weight", "q.bias", "k.bias",
                                                        "norm.weight", "norm.bias", "head.bias"}));
  EXPECT_EQ(p->frozen, (std::vector<std::string>{"emb.weight"}));
  StatusOr<ModelParams> ambiguous =
      FromModel(dir + "frozen_ambiguous.pt", "", dir + "frozen_ambiguous.pt", "optimizer");
  EXPECT_EQ(ambiguous.status().ToString(),
            "invalid argument: 1 param group listing 6 of the model's 9 parameters once 0 tied duplicates and 0 "
            "buffers are dropped: several assignments keep each group in module order with every state shape its "
            "parameter's; these parameters could each be trained or frozen, or swapped: q.weight, q.bias, "
            "k.weight, k.bias, norm.weight, norm.bias; write a manifest from the training script (README) and "
            "pass --manifest");
}

TEST(ModelParamsTest, FewerModelParametersThanIndicesIsRefused) {
  StatusOr<ModelParams> p = FromModel("testdata/good/torch113/heavyball_tied_model.pt", "",
                                      "testdata/good/torch113/heavyball_ptr_shape.pt", "");
  EXPECT_EQ(p.status().ToString(),
            "invalid argument: the model has 4 parameters once 1 tied duplicate and 3 buffers are dropped, but "
            "param_groups lists 9: unrecognised buffers, or this state was saved for another model; write a "
            "manifest from the training script (README) and pass --manifest");
}

// DSD's layout names its parameters in param_groups: the order is theirs, and
// the model only supplies shapes and dtypes.
TEST(ModelParamsTest, FqnParamGroupsGiveTheOrder) {
  StatusOr<ModelParams> p = FromModel("testdata/good/torch26/heavyball_param_view.pt", "model",
                                      "testdata/good/torch26/fqn_state.pt", "");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Names(p->params), (std::vector<std::string>{"emb.weight", "fc1.weight", "fc1.bias", "fc2.weight",
                                                        "fc2.bias", "norm.weight", "norm.bias", "head.weight",
                                                        "head.bias"}));
  EXPECT_EQ(p->params[0].shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(p->order, "param_groups' order (it lists names)");
  StatusOr<ModelParams> wrong = FromModel("testdata/good/torch26/heavyball_tied_model.pt", "",
                                          "testdata/good/torch26/fqn_state.pt", "");
  EXPECT_EQ(wrong.status().ToString(),
            "invalid argument: param_groups[0] names 'fc1.weight', which the model state_dict does not have");
}

// The whole path collisions and remap take: with the model in the same file,
// every key of heavyball_tied.pt is placed by its unique shape, as the truth says.
TEST(ModelParamsTest, OpenAndMatchUsesTheFilesOwnModel) {
  ParamSource source;
  auto m = OpenAndMatch(testing::RepoPath("testdata/good/torch113/heavyball_tied.pt"), "", source, {}, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->params_from, "'model' in " + testing::RepoPath("testdata/good/torch113/heavyball_tied.pt"));
  EXPECT_TRUE(m->match.orphans.empty());
  EXPECT_TRUE(m->match.ambiguous.empty());
  EXPECT_TRUE(m->match.without_state.empty());
  for (const ParamMatch& pm : m->match.params) {
    ASSERT_EQ(pm.keys.size(), 1u);
    EXPECT_EQ(pm.confidence, Confidence::kShapeUnique);
  }
  // The state's pointers are in the truth file's order; the shapes decide.
  EXPECT_EQ(m->state.keys[m->match.params[1].keys[0]].shape, (std::vector<int64_t>{6, 4}));

  auto none = OpenAndMatch(testing::RepoPath("testdata/good/torch113/heavyball_ptr_shape.pt"), "", source, {}, {});
  EXPECT_EQ(none.status().ToString(),
            "not found: " + testing::RepoPath("testdata/good/torch113/heavyball_ptr_shape.pt") +
                ": no parameter list: pass --manifest FILE or --model FILE (this checkpoint has no 'model', "
                "'model_state_dict' or 'state_dict' entry; --model-key names another)");
}

TEST(CanonicalFqnsTest, DropsWrapperSegmentsAsTorchDsdDoes) {
  EXPECT_EQ(CanonicalFqns({"module.0.weight", "module.fc.bias"}), (std::vector<std::string>{"0.weight", "fc.bias"}));
  EXPECT_EQ(CanonicalFqns({"_orig_mod.encoder._fsdp_wrapped_module.w", "_orig_mod.b"}),
            (std::vector<std::string>{"encoder.w", "b"}));
  EXPECT_EQ(CanonicalFqns({"layers.1._checkpoint_wrapped_module.weight"}),
            (std::vector<std::string>{"layers.1.weight"}));
  // `module.` is DDP's only when every name has it: here it is a submodule's own name.
  EXPECT_EQ(CanonicalFqns({"module.w", "head.w"}), (std::vector<std::string>{"module.w", "head.w"}));
}

}  // namespace
}  // namespace optstate
