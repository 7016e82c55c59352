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
#include "optstate/torch_objects.h"

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

// A tensor of up to two dimensions keeps its sizes and strides in its
// record, not in two heap blocks (3 * 10^6 of them at 10^6 [16, 8]
// parameters with AdamW); a third dimension moves them to the heap intact.
TEST(TensorDimsTest, UpToTwoDimensionsLiveInTheRecord) {
  auto inside = [](const TensorRef& t, const TensorDims& d) {
    const char* self = reinterpret_cast<const char*>(&t);
    const char* at = reinterpret_cast<const char*>(d.data());
    return at >= self && at < self + sizeof t;
  };
  int small = 0;
  for (const std::string& fixture : testing::AllFixtures()) {
    StatusOr<std::unique_ptr<CheckpointFile>> file = OpenCheckpoint(testing::RepoPath(fixture));
    ASSERT_TRUE(file.ok()) << fixture << ": " << file.status().ToString();
    for (const TensorRef& t : (*file)->checkpoint().tensors) {
      if (t.sizes.size() > 2) continue;
      EXPECT_TRUE(inside(t, t.sizes) && inside(t, t.strides)) << fixture;
      ++small;
    }
  }
  EXPECT_GE(small, 100);
  TensorRef t;
  t.sizes = {16, 8};
  t.strides = {8, 1};
  EXPECT_TRUE(inside(t, t.sizes));
  t.sizes.insert(t.sizes.begin(), 2);
  EXPECT_FALSE(inside(t, t.sizes));
  EXPECT_EQ(t.sizes, (std::vector<int64_t>{2, 16, 8}));
  TensorRef copy = t;
  EXPECT_EQ(copy.sizes, (std::vector<int64_t>{2, 16, 8}));
  EXPECT_EQ(copy.strides, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(copy.numel(), 256u);
  EXPECT_EQ(copy.whole_sizes(), (std::vector<int64_t>{2, 16, 8}));
}

// Each tensor's node is labelled from its record once the read is done:
// plain, Parameter, DTensor, a view into its storage, a meta tensor.
TEST(LabelTensorsTest, NamesKindDtypeShapeAndStorage) {
  ObjectGraph g;
  std::vector<TensorRef> tensors(5);
  std::vector<StorageRef> storages(2);
  storages[0].key = "0";
  storages[1].key = "17";
  tensors[0].storage = 0;
  tensors[0].sizes = {16, 8};
  tensors[1].storage = 1;
  tensors[1].is_parameter = true;
  tensors[1].dtype = DType::kBFloat16;
  tensors[1].sizes = {4};
  tensors[2].storage = 1;
  tensors[2].storage_offset = 12;
  tensors[2].sizes = {};
  tensors[3].storage = -1;
  tensors[3].sizes = {2, 3};
  tensors[4].storage = 0;
  tensors[4].is_dtensor = true;
  tensors[4].sizes = {8};
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    Node& n = g.nodes.emplace_back();
    n.kind = NodeKind::kTensor;
    n.tensor = i;
  }
  g.nodes.emplace_back().kind = NodeKind::kInt;  // not a tensor: no label
  LabelTensors(g, tensors, storages);
  EXPECT_EQ(g.at(0).text, "Tensor(float32 [16, 8], storage 0)");
  EXPECT_EQ(g.at(1).text, "Parameter(bfloat16 [4], storage 17)");
  EXPECT_EQ(g.at(2).text, "Tensor(float32 [], storage 17 +12)");
  EXPECT_EQ(g.at(3).text, "Tensor(float32 [2, 3], meta)");
  EXPECT_EQ(g.at(4).text, "DTensor(float32 [8], storage 0)");
  EXPECT_TRUE(g.at(5).text.empty());
}

}  // namespace
}  // namespace optstate
