// Every fixture, read by optstate, equals what torch.load showed Python when the
// fixture was written (its .expected.json): structure, key types, dtypes, shapes,
// strides, storage offsets, shared storages, and a CRC-32 of every tensor's values
// and of every storage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>

#include "fixtures.h"
#include "graph_compare.h"
#include "optstate/checkpoint.h"

namespace optstate {
namespace {

using nlohmann::json;
using testing::GraphComparer;

TEST(ReaderFixtureTest, EveryFixtureReadsAsTorchSawIt) {
  int checked = 0;
  for (const std::string& fixture : testing::AllFixtures()) {
    SCOPED_TRACE(fixture);
    StatusOr<std::unique_ptr<CheckpointFile>> file = OpenCheckpoint(testing::RepoPath(fixture));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    json want = testing::ExpectedJson(fixture);
    GraphComparer cmp((*file)->checkpoint().graph, file->get());
    cmp.SetExpectedStorages(want["storages"]);
    EXPECT_EQ(cmp.Compare((*file)->checkpoint().graph.root, want["root"], "$"), "");
    EXPECT_EQ(cmp.CompareStorages(want["storages"]), "");
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace optstate
