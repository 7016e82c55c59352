// Which block of a DTensor each rank holds. The expected offsets are the ones
// torch 2.6's compute_local_shape_and_global_offset gave for the real
// FSDP2 + TP run in testdata/heavyball/fsdp2_tp_0.24.4 (truth.rank<N>.json).
#include "torch/shard_layout.h"

#include <gtest/gtest.h>

namespace optstate {
namespace {

using Shape = std::vector<int64_t>;

ShardView V(Shape local, Shape coordinate, std::string where = "") {
  return ShardView{std::move(local), std::move(coordinate), std::move(where), std::nullopt};
}

std::vector<Shape> Offsets(const ShardTiling& t) {
  std::vector<Shape> out;
  for (const ShardBox& b : t.boxes) out.push_back(b.offsets);
  return out;
}

TEST(ParsePlacement, AsTorchReprPrintsThem) {
  EXPECT_EQ(ParsePlacement("Shard(dim=2)").kind, Placement::Kind::kShard);
  EXPECT_EQ(ParsePlacement("Shard(dim=2)").dim, 2);
  EXPECT_EQ(ParsePlacement("Replicate()").kind, Placement::Kind::kReplicate);
  EXPECT_EQ(ParsePlacement("Partial(sum)").kind, Placement::Kind::kPartial);
  Placement s = ParsePlacement("_StridedShard(dim=0, sf=2)");
  EXPECT_EQ(s.kind, Placement::Kind::kStridedShard);
  EXPECT_EQ(s.dim, 0);
  EXPECT_EQ(s.split_factor, 2);
  EXPECT_EQ(ParsePlacement("Shard(dim=x)").kind, Placement::Kind::kUnknown);
  EXPECT_EQ(ParsePlacement("Shard(dim=)").kind, Placement::Kind::kUnknown);
  EXPECT_EQ(ParsePlacement("_StridedShard(dim=0)").kind, Placement::Kind::kUnknown);
}

TEST(TileShards, ColwiseParallelUnderFsdp2IsTpsChunkThenFsdpsChunk) {
  auto t = TileShards({48, 32}, {"_StridedShard(dim=0, sf=2)", "Shard(dim=0)"}, {2, 2},
                      {V({12, 32}, {0, 0}), V({12, 32}, {0, 1}), V({12, 32}, {1, 0}), V({12, 32}, {1, 1})});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(Offsets(*t), (std::vector<Shape>{{0, 0}, {24, 0}, {12, 0}, {36, 0}}));
  EXPECT_EQ(t->owners, (std::vector<size_t>{0, 2, 1, 3}));  // by offset
  EXPECT_TRUE(t->row_slabs);
  EXPECT_EQ(t->replicas, 0u);
}

TEST(TileShards, RowwiseParallelUnderFsdp2IsAGridOfBlocks) {
  auto t = TileShards({32, 48}, {"Shard(dim=0)", "Shard(dim=1)"}, {2, 2},
                      {V({16, 24}, {0, 0}), V({16, 24}, {0, 1}), V({16, 24}, {1, 0}), V({16, 24}, {1, 1})});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(Offsets(*t), (std::vector<Shape>{{0, 0}, {0, 24}, {16, 0}, {16, 24}}));
  EXPECT_FALSE(t->row_slabs);
}

TEST(TileShards, ReplicatedMeshDimsAndSubMeshesHoldCopies) {
  auto bias = TileShards({32}, {"Shard(dim=0)", "Replicate()"}, {2, 2},
                         {V({16}, {0, 0}), V({16}, {0, 1}), V({16}, {1, 0}), V({16}, {1, 1})});
  ASSERT_TRUE(bias.ok()) << bias.status().ToString();
  EXPECT_EQ(bias->owners, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(bias->replicas, 2u);
  // FSDP2's dp sub-mesh beside TP: four files, two positions; 9 rows chunk 5 + 4.
  auto emb = TileShards({9, 32}, {"Shard(dim=0)"}, {2},
                        {V({5, 32}, {0}), V({5, 32}, {0}), V({4, 32}, {1}), V({4, 32}, {1})});
  ASSERT_TRUE(emb.ok()) << emb.status().ToString();
  EXPECT_EQ(Offsets(*emb), (std::vector<Shape>{{0, 0}, {0, 0}, {5, 0}, {5, 0}}));
  EXPECT_EQ(emb->owners, (std::vector<size_t>{0, 2}));
}

TEST(TileShards, ChunksAsTorchChunkDoesWithEmptyLastShards) {
  auto t = TileShards({5}, {"Shard(dim=0)"}, {4}, {V({2}, {}), V({2}, {}), V({1}, {}), V({0}, {})});
  ASSERT_TRUE(t.ok()) << t.status().ToString();  // no coordinates: file order, unravelled
  EXPECT_EQ(Offsets(*t), (std::vector<Shape>{{0}, {2}, {4}, {5}}));
}

TEST(TileShards, ErrorsNameTheRankAndWhatIsWrong) {
  auto wrong = TileShards({48, 32}, {"Shard(dim=0)"}, {2}, {V({24, 32}, {0}, "a.pt (rank 0)"), V({20, 32}, {1}, "b.pt (rank 1)")});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "b.pt (rank 1): local shard [20, 32] where [48, 32] placed so at mesh coordinate [1] of [2] is [24, 32]");
  auto repeated = TileShards({4}, {"Shard(dim=0)"}, {2}, {V({2}, {1}), V({2}, {1})});
  ASSERT_FALSE(repeated.ok());
  EXPECT_EQ(repeated.status().message(),
            "rank 1 and rank 0 both hold mesh coordinate [1]: a file is repeated or from another save");
  auto mismatched = TileShards({4}, {"Shard(dim=0)"}, {2, 2}, {V({4}, {0, 0}), V({4}, {0, 1}), V({4}, {0, 0})});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.status().message(), "1 placement for a mesh of shape [2, 2]");
  auto gone = TileShards({4}, {"Shard(dim=0)", "Replicate()"}, {2, 2}, {V({2}, {0, 0}), V({2}, {0, 1}), V({2}, {0, 0})});
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().message(), "no file holds mesh coordinate [1, 0] of [2, 2]: a rank's file is missing");
  auto uncounted = TileShards({4}, {"Shard(dim=0)"}, {2}, {V({2}, {}), V({2}, {}), V({2}, {})});
  ASSERT_FALSE(uncounted.ok());
  EXPECT_EQ(uncounted.status().message(),
            "rank 0: the file does not record its mesh coordinate, and the mesh [2] has 2 positions for 3 files");
}

TEST(TileShards, WhatTheShardsCannotMakeWholeIsUnsupported) {
  auto partial = TileShards({4}, {"Partial(sum)"}, {2}, {V({4}, {0}), V({4}, {1})});
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(partial.status().message(), "placement Partial(sum) on mesh dim 0 cannot be made whole from the shards alone");
  auto sf = TileShards({8}, {"_StridedShard(dim=0, sf=4)", "Shard(dim=0)"}, {2, 2},
                       {V({2}, {0, 0}), V({2}, {0, 1}), V({2}, {1, 0}), V({2}, {1, 1})});
  ASSERT_FALSE(sf.ok());
  EXPECT_EQ(sf.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(sf.status().message(),
            "placement _StridedShard(dim=0, sf=4) on mesh dim 0: split factor 4 where the later mesh dims make 2 "
            "shards of dim 0");
}

// FSDP1's ShardedTensor blocks, as the distributed corpus's SHARDED_STATE_DICT
// files hold them: 2.weight [3, 8] chunked over 2 ranks is rows 0-1 on rank 0
// and row 2 at offset [2, 0] on rank 1.
ShardView B(Shape local, std::optional<Shape> offsets, int64_t rank) {
  return ShardView{std::move(local), {rank}, "r" + std::to_string(rank) + ".pt", std::move(offsets)};
}

TEST(TileExplicitBlocks, TwoRanksChunkedByRows) {
  auto t = TileExplicitBlocks({3, 8}, {B({2, 8}, Shape{0, 0}, 0), B({1, 8}, Shape{2, 0}, 1)});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(Offsets(*t), (std::vector<Shape>{{0, 0}, {2, 0}}));
  EXPECT_EQ(t->owners, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(t->row_slabs);
  EXPECT_EQ(t->replicas, 0u);
}

TEST(TileExplicitBlocks, ARankPastTheRowsHoldsNoBlockAndOwnersFollowOffsets) {
  // Given in rank order 2, 0, 1 with rank 1 holding nothing: owners in offset order.
  auto t = TileExplicitBlocks({3}, {B({1}, Shape{2}, 2), B({2}, Shape{0}, 0), B({0}, std::nullopt, 1)});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->owners, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(t->boxes[2].sizes, (Shape{0}));
}

TEST(TileExplicitBlocks, ColumnBlocksAreNotRowSlabs) {
  auto t = TileExplicitBlocks({2, 4}, {B({2, 2}, Shape{0, 0}, 0), B({2, 2}, Shape{0, 2}, 1)});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->row_slabs);
}

TEST(TileExplicitBlocks, ErrorsNameTheFileAndWhatIsWrong) {
  auto missing = TileExplicitBlocks({8}, {B({4}, Shape{0}, 0), B({0}, std::nullopt, 1)});
  EXPECT_EQ(missing.status().message(),
            "the blocks of 2 files cover 4 of the 8 elements of [8]: a rank's file is missing");
  auto overlap = TileExplicitBlocks({8}, {B({5}, Shape{0}, 0), B({4}, Shape{4}, 1)});
  EXPECT_EQ(overlap.status().message(), "r1.pt: its block at [4] overlaps r0.pt's at [0]");
  auto outside = TileExplicitBlocks({8}, {B({4}, Shape{0}, 0), B({4}, Shape{5}, 1)});
  EXPECT_EQ(outside.status().message(), "r1.pt: the block at [5] of size [4] reaches outside the whole [8]");
  auto repeated = TileExplicitBlocks({8}, {B({4}, Shape{0}, 0), B({4}, Shape{0}, 0)});
  EXPECT_EQ(repeated.status().message(), "r0.pt and r0.pt were both saved by rank 0: a file is repeated or from another save");
  auto replica = TileExplicitBlocks({8}, {B({8}, Shape{0}, 0), B({8}, Shape{0}, 1)});
  ASSERT_TRUE(replica.ok()) << replica.status().ToString();
  EXPECT_EQ(replica->replicas, 1u);
}

}  // namespace
}  // namespace optstate
