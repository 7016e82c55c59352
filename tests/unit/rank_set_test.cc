// Rank order from file names for the per-rank files of a sharded save. The rank sets themselves (real HeavyBall + FSDP2 files) are
// covered by the CLI golden cases and interop_heavyball_fsdp2.
#include "optstate/collisions.h"

#include <gtest/gtest.h>

namespace optstate {
namespace {

TEST(OrderByRank, NamesCarryingEveryRankAreSortedByIt) {
  auto r = OrderByRank({"out/step5-rank2.pt", "out/step5-rank0.pt", "out/step5-rank1.pt"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<std::string>{"out/step5-rank0.pt", "out/step5-rank1.pt", "out/step5-rank2.pt"}));
}

TEST(OrderByRank, TheLastRankInTheNameCountsNotTheDirectory) {
  auto r = OrderByRank({"rank7/optim_rank1.pt", "rank7/optim_rank0.pt"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<std::string>{"rank7/optim_rank0.pt", "rank7/optim_rank1.pt"}));
}

TEST(OrderByRank, RanksTenAndUpSortAsNumbers) {
  std::vector<std::string> files;
  for (int i = 11; i >= 0; --i) files.push_back("rank" + std::to_string(i) + ".pt");
  auto r = OrderByRank(files);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->front(), "rank0.pt");
  EXPECT_EQ((*r)[10], "rank10.pt");
  EXPECT_EQ(r->back(), "rank11.pt");
}

TEST(OrderByRank, WithoutRankNamesTheGivenOrderStays) {
  auto r = OrderByRank({"b.pt", "a.pt"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<std::string>{"b.pt", "a.pt"}));
  // Ranks 1 and 2 only: not 0..n-1, so the names are not taken as ranks.
  auto gap = OrderByRank({"rank2.pt", "rank1.pt"});
  ASSERT_TRUE(gap.ok());
  EXPECT_EQ(*gap, (std::vector<std::string>{"rank2.pt", "rank1.pt"}));
}

TEST(OrderByRank, ARepeatedRankIsRefused) {
  auto r = OrderByRank({"a/rank0.pt", "b/rank0.pt"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "b/rank0.pt and a/rank0.pt both name rank 0");
}

}  // namespace
}  // namespace optstate
