// Where a tensor's node keeps the call that built it between the resolve and
// ReleaseTensorCalls: its arguments in the node beside its tensor index, its
// callable (a torch rebuild function) in the graph's tensor_callables, so no
// out-of-line block is made per tensor (4 * 10^6 of them at 10^6 parameters),
// and the security scans still see the whole call.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fixtures.h"
#include "io/byte_cursor.h"
#include "optstate/torch_objects.h"
#include "pickle/pickle_vm.h"
#include "torch/security.h"

namespace optstate {
namespace {

// adamw_index.pt (torch 1.13) stores data.pkl uncompressed from byte 64: 27
// tensors (step, exp_avg and exp_avg_sq of 9 parameters).
constexpr const char* kAdamW = "testdata/good/torch113/adamw_index.pt";
constexpr size_t kPickleAt = 64;

struct Resolved {
  PickleResult pickle;
  TorchObjects objects;
};

Resolved ReadAndResolve() {
  const std::string bytes = testing::ReadFileOrFail(kAdamW);
  ByteCursor c(AsBytes(bytes).subspan(kPickleAt), kPickleAt);
  StatusOr<PickleResult> r = ReadPickle(c, PickleLimits{});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  auto located = [](StorageRef&) { return Status(); };
  StatusOr<TorchObjects> objects = ResolveTorchObjects(r->graph, located, kMaxPickleDepth);
  EXPECT_TRUE(objects.ok()) << objects.status().ToString();
  if (!objects.ok()) return {};
  return {std::move(*r), std::move(*objects)};
}

TEST(TensorCallTest, APlainTensorKeepsItsArgumentsInItsNodeAndNoBlock) {
  Resolved got = ReadAndResolve();
  const ObjectGraph& g = got.pickle.graph;
  size_t tensors = 0;
  for (const Node& n : g.nodes) {
    if (n.kind != NodeKind::kTensor) continue;
    ++tensors;
    EXPECT_FALSE(n.has_extra()) << "a 32-byte block per tensor";
    EXPECT_LT(n.tensor, got.objects.tensors.size());
    EXPECT_EQ(n.callable(), kNoNode);
    ASSERT_NE(n.args(), kNoNode);
    const Node& args = g.at(n.args());
    ASSERT_EQ(args.kind, NodeKind::kTuple);
    ASSERT_GE(args.items.size(), 6u);  // storage, offset, size, stride, requires_grad, hooks
    EXPECT_EQ(g.at(args.items[0]).kind, NodeKind::kStorage);
  }
  EXPECT_EQ(tensors, 27u);
  EXPECT_EQ(got.objects.tensors.size(), 27u);
  // One callable for all: the memoized global, counted as called.
  ASSERT_EQ(g.tensor_callables.size(), 1u);
  const Node& rebuild = g.at(g.tensor_callables[0]);
  EXPECT_EQ(GlobalName(rebuild), "torch._utils._rebuild_tensor_v2");
  EXPECT_TRUE(CalledGlobalOffsets(g).count(rebuild.offset));
}

TEST(TensorCallTest, ReleaseDropsTheArgumentsAndTheCallables) {
  Resolved got = ReadAndResolve();
  ObjectGraph& g = got.pickle.graph;
  const size_t before = g.nodes.size();
  const size_t kept = ReleaseTensorCalls(g, got.objects.tensors);
  EXPECT_LT(kept, before / 2);
  EXPECT_TRUE(g.tensor_callables.empty());
  size_t tensors = 0;
  for (const Node& n : g.nodes) {
    if (n.kind != NodeKind::kTensor) continue;
    ++tensors;
    EXPECT_EQ(n.args(), kNoNode);
    EXPECT_EQ(n.callable(), kNoNode);
    EXPECT_LT(n.tensor, got.objects.tensors.size());
  }
  EXPECT_EQ(tensors, got.objects.tensors.size());
  for (const Node& n : g.nodes) EXPECT_NE(n.kind, NodeKind::kStorage) << "storage references are freed";
}

}  // namespace
}  // namespace optstate
