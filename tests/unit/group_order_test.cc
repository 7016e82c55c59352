// The index -> parameter assignment for several param groups and frozen
// parameters: exactly one fit is used, several name what could move, none fits
// nothing, and the search stops at its budget instead of running away.
#include "state/group_order.h"

#include <gtest/gtest.h>

namespace optstate {
namespace {

using Shape = std::vector<int64_t>;

GroupOrderInput Input(std::vector<Shape> candidates, std::vector<size_t> groups,
                      std::vector<std::optional<Shape>> indices) {
  GroupOrderInput in;
  in.candidate_shapes = std::move(candidates);
  in.group_sizes = std::move(groups);
  in.index_shapes = std::move(indices);
  return in;
}

// HF Trainer's split of emb, q (w, b), norm (w, b), head (w, b): weights first,
// then biases and norm weights; 2-d and 1-d shapes interleave one way only.
TEST(GroupOrderTest, TheWeightDecaySplitHasOneFit) {
  GroupOrder r = AssignInGroupOrder(Input({{20, 8}, {8, 8}, {8}, {8}, {8}, {4, 8}, {4}}, {3, 4},
                                          {Shape{20, 8}, Shape{8, 8}, Shape{4, 8}, Shape{8}, Shape{8}, Shape{8},
                                           Shape{4}}));
  EXPECT_EQ(r.fits, 1u);
  EXPECT_FALSE(r.gave_up);
  EXPECT_EQ(r.candidate_of, (std::vector<size_t>{0, 1, 5, 2, 3, 4, 6}));
}

// A frozen parameter of a shape no group has can only be frozen.
TEST(GroupOrderTest, AFrozenParameterOfItsOwnShapeIsSkipped) {
  GroupOrder r = AssignInGroupOrder(Input({{20, 8}, {8, 8}, {8}, {4, 8}, {4}}, {4},
                                          {Shape{8, 8}, Shape{8}, Shape{4, 8}, Shape{4}}));
  EXPECT_EQ(r.fits, 1u);
  EXPECT_EQ(r.candidate_of, (std::vector<size_t>{1, 2, 3, 4}));
}

// Two identical layers, one frozen: either could be the trained one, and the
// bias could come from either; every candidate that can move is named.
TEST(GroupOrderTest, SameShapedFrozenLayersAreAmbiguous) {
  GroupOrder r = AssignInGroupOrder(Input({{8, 8}, {8}, {8, 8}, {8}, {4, 8}}, {3},
                                          {Shape{8, 8}, Shape{8}, Shape{4, 8}}));
  EXPECT_EQ(r.fits, 2u);
  EXPECT_TRUE(r.candidate_of.empty());
  EXPECT_EQ(r.ambiguous, (std::vector<size_t>{0, 1, 2, 3}));
}

// An index without state (no gradient yet) fits any parameter: with a frozen
// one beside it, which is which cannot be told.
TEST(GroupOrderTest, AnIndexWithoutStateFitsAnyParameter) {
  GroupOrder one = AssignInGroupOrder(Input({{8, 8}, {3}}, {2}, {Shape{8, 8}, std::nullopt}));
  EXPECT_EQ(one.fits, 1u);
  EXPECT_EQ(one.candidate_of, (std::vector<size_t>{0, 1}));
  GroupOrder two = AssignInGroupOrder(Input({{8, 8}, {3}, {5}}, {2}, {Shape{8, 8}, std::nullopt}));
  EXPECT_EQ(two.fits, 2u);
  EXPECT_EQ(two.ambiguous, (std::vector<size_t>{1, 2}));
}

// Groups that are no subsequence of module order, or shapes the model lacks: nothing fits.
TEST(GroupOrderTest, NothingFitsWhenOrderOrShapesDisagree) {
  EXPECT_EQ(AssignInGroupOrder(Input({{2}, {3}}, {2}, {Shape{3}, Shape{2}})).fits, 0u);
  EXPECT_EQ(AssignInGroupOrder(Input({{2}, {3}}, {1, 1}, {Shape{2}, Shape{7}})).fits, 0u);
  EXPECT_EQ(AssignInGroupOrder(Input({{2}}, {1, 1}, {Shape{2}, Shape{2}})).fits, 0u);  // more indices than params
}

// But the same swapped order in two groups is what groups allow.
TEST(GroupOrderTest, GroupsMayTakeParametersInAnyInterleaving) {
  GroupOrder r = AssignInGroupOrder(Input({{2}, {3}}, {1, 1}, {Shape{3}, Shape{2}}));
  EXPECT_EQ(r.fits, 1u);
  EXPECT_EQ(r.candidate_of, (std::vector<size_t>{1, 0}));
}

// 40 same-shaped parameters, 20 of them frozen: C(40, 20) fits; the budget stops it.
TEST(GroupOrderTest, TheSearchGivesUpAtItsBudget) {
  std::vector<Shape> candidates(40, Shape{4});
  std::vector<std::optional<Shape>> indices(20, Shape{4});
  GroupOrder small = AssignInGroupOrder(Input(candidates, {20}, indices), 100);
  EXPECT_TRUE(small.gave_up);
  EXPECT_EQ(small.fits, 0u);
  GroupOrder enough = AssignInGroupOrder(Input(candidates, {20}, indices));
  EXPECT_FALSE(enough.gave_up);
  EXPECT_EQ(enough.fits, 2u);
  EXPECT_EQ(enough.ambiguous.size(), 40u);
}

}  // namespace
}  // namespace optstate
