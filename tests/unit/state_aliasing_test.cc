// state-tensors-alias and state-step-shared on graphs built here: which
// overlaps are aliasing (same bytes, partly the same bytes), which are not
// (neighbouring views of one flat buffer), and one step tensor of several
// entries (FSDP1's flat parameter) told apart from both.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "check/finding_sink.h"
#include "check/validate_checkpoint.h"
#include "optstate/params.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

class AliasingTest : public ::testing::Test {
 protected:
  AliasingTest() : b_(cp_) {
    cp_.graph.root = b_.Dict();
    state_ = b_.Dict();
    b_.Set(cp_.graph.root, "state", state_);
  }

  // An entry {step, exp_avg, exp_avg_sq} under index `i`; each field the given node.
  void Entry(int64_t i, NodeId step, NodeId m, NodeId v, bool listed = true) {
    NodeId e = b_.Dict();
    b_.Set(e, "step", step);
    b_.Set(e, "exp_avg", m);
    b_.Set(e, "exp_avg_sq", v);
    b_.Set(state_, b_.Int(i), e);
    if (listed) params_.push_back(b_.Int(i));
  }
  NodeId Own(int64_t n) { return b_.Tensor(DType::kFloat32, {n}); }
  // A 1-D view of `n` elements at element `offset` of `base`'s storage.
  NodeId View(NodeId base, int64_t offset, int64_t n) {
    NodeId v = b_.TensorOver(cp_.tensors[cp_.graph.at(base).tensor], {n}, {1});
    cp_.tensors[cp_.graph.at(v).tensor].storage_offset = static_cast<uint64_t>(offset);
    return v;
  }

  std::vector<ValidationFinding> Findings() {
    NodeId group = b_.Dict();
    b_.Set(group, "params", b_.List(params_));
    b_.Set(cp_.graph.root, "param_groups", b_.List({group}));
    StatusOr<OptimizerState> s = ReadOptimizerState(cp_, "");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return {};
    CheckStateAliasing(cp_, *s, "", sink_);
    return report_.findings;
  }

  Checkpoint cp_;
  GraphBuilder b_;
  NodeId state_;
  std::vector<NodeId> params_;
  ValidateOptions options_;
  ValidationReport report_;
  FindingSink sink_{options_, report_};
};

TEST_F(AliasingTest, TensorsOfTheirOwnAndNeighbouringViewsAreNotAliases) {
  Entry(0, Own(1), Own(8), Own(8));
  NodeId flat = Own(32);  // one buffer holding entry 1's moments side by side, as FSDP1 flattens them
  Entry(1, Own(1), View(flat, 0, 8), View(flat, 8, 8));
  Entry(2, Own(1), View(flat, 16, 8), View(flat, 24, 8));
  EXPECT_TRUE(Findings().empty());
}

TEST_F(AliasingTest, MomentsThatAreOneTensorAreAnError) {
  NodeId gathered = Own(16);
  Entry(0, Own(1), View(gathered, 0, 8), View(gathered, 0, 8));
  Entry(1, Own(1), View(gathered, 8, 8), View(gathered, 8, 8));
  std::vector<ValidationFinding> f = Findings();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].rule, "state-tensors-alias");
  EXPECT_EQ(f[0].severity, RuleSeverity::kError);
  EXPECT_EQ(f[0].path, "state[0].exp_avg");
  EXPECT_NE(f[0].message.find("state[0].exp_avg and state[0].exp_avg_sq are the same bytes (storage 0, bytes 0 to 32)"),
            std::string::npos)
      << f[0].message;
  EXPECT_NE(f[1].message.find("bytes 32 to 64"), std::string::npos) << f[1].message;
}

TEST_F(AliasingTest, PartlyOverlappingViewsOfDifferentEntriesAreAnError) {
  NodeId buffer = Own(12);
  Entry(0, Own(1), View(buffer, 0, 8), Own(8));
  Entry(1, Own(1), View(buffer, 4, 8), Own(8));
  std::vector<ValidationFinding> f = Findings();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find("state[0].exp_avg and state[1].exp_avg are the same bytes (storage 0, bytes 16 to 32)"),
            std::string::npos)
      << f[0].message;
}

TEST_F(AliasingTest, OneStepOfSeveralEntriesIsANoteWithTheirCount) {
  NodeId step = Own(1);
  Entry(0, step, Own(8), Own(8));
  Entry(1, View(step, 0, 1), Own(8), Own(8));
  Entry(2, View(step, 0, 1), Own(4), Own(4));
  std::vector<ValidationFinding> f = Findings();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule, "state-step-shared");
  EXPECT_EQ(f[0].severity, RuleSeverity::kInfo);
  EXPECT_NE(f[0].message.find("one step tensor serves 3 entries"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].message.find("counts each step 3 times"), std::string::npos) << f[0].message;
}

TEST_F(AliasingTest, AnEntryNoGroupListsMayShareBytesHarmlessly) {
  // A copy of entry 0 under a key no group lists (state-without-param's case): never used.
  NodeId m = Own(8), v = Own(8), step = Own(1);
  Entry(0, step, m, v);
  Entry(7, View(step, 0, 1), View(m, 0, 8), View(v, 0, 8), /*listed=*/false);
  EXPECT_TRUE(Findings().empty());
}

TEST_F(AliasingTest, ManyAliasesAreReportedEightTimesThenCounted) {
  NodeId gathered = Own(40);
  for (int64_t i = 0; i < 10; ++i) Entry(i, Own(1), View(gathered, 4 * i, 4), View(gathered, 4 * i, 4));
  std::vector<ValidationFinding> f = Findings();
  ASSERT_EQ(f.size(), 9u);
  EXPECT_EQ(f[8].path, "state");
  EXPECT_EQ(f[8].message, "2 more state tensors share bytes with another (10 in all).");
}

}  // namespace
}  // namespace optstate
