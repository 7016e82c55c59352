// What an optimizer state dict shows about merged state with no parameter list.
// The real HeavyBall 0.24.4 + FSDP2 files are covered end to end by the CLI and
// interop tests; here the counting rules, on graphs built by hand.
#include "optstate/collisions.h"

#include <gtest/gtest.h>

namespace optstate {
namespace {

class StateGraph {
 public:
  NodeId Add(Node n) {
    cp_.graph.nodes.push_back(std::move(n));
    return static_cast<NodeId>(cp_.graph.nodes.size() - 1);
  }
  NodeId Int(int64_t v) {
    Node n;
    n.kind = NodeKind::kInt;
    n.int_value = v;
    return Add(n);
  }
  NodeId Str(const std::string& s) {
    Node n;
    n.kind = NodeKind::kStr;
    n.text = s;
    return Add(n);
  }
  NodeId Tuple(std::vector<NodeId> items) {
    Node n;
    n.kind = NodeKind::kTuple;
    n.items = std::move(items);
    return Add(n);
  }
  NodeId Dict(std::vector<std::pair<NodeId, NodeId>> entries) {
    Node n;
    n.kind = NodeKind::kDict;
    n.entries = std::move(entries);
    return Add(n);
  }
  // HeavyBall 0.12-0.24's key: (data_ptr, shape).
  NodeId PtrShapeKey(int64_t ptr, std::vector<int64_t> shape) {
    std::vector<NodeId> dims;
    for (int64_t d : shape) dims.push_back(Int(d));
    return Tuple({Int(ptr), Tuple(dims)});
  }
  // {"state": {key: {"step": s}}, "param_groups": [{"params": [0..n-1]}]}
  Checkpoint& Build(const std::vector<std::pair<NodeId, int64_t>>& keys_and_steps, int64_t params) {
    std::vector<std::pair<NodeId, NodeId>> state;
    for (auto [key, step] : keys_and_steps) state.emplace_back(key, Dict({{Str("step"), Int(step)}}));
    std::vector<NodeId> ids;
    for (int64_t i = 0; i < params; ++i) ids.push_back(Int(i));
    Node list;
    list.kind = NodeKind::kList;
    list.items = ids;
    NodeId group = Dict({{Str("params"), Add(list)}});
    Node groups;
    groups.kind = NodeKind::kList;
    groups.items = {group};
    cp_.graph.root = Dict({{Str("state"), Dict(state)}, {Str("param_groups"), Add(groups)}});
    return cp_;
  }

 private:
  Checkpoint cp_;
};

CollisionEvidence Evidence(Checkpoint& cp) {
  StatusOr<OptimizerState> st = ReadOptimizerState(cp, "");
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  return FindCollisionEvidence(cp, ByteSpan(), *st);
}

TEST(CollisionEvidence, PointerZeroAndFewerEntriesIsMergedWithMultiplicityFromSteps) {
  StateGraph b;
  // 3 optimizer steps; the [64] entry was stepped by 4 parameters, [64, 64] by 2.
  Checkpoint& cp = b.Build({{b.PtrShapeKey(0, {96, 64}), 3}, {b.PtrShapeKey(0, {64, 64}), 6},
                            {b.PtrShapeKey(0, {64}), 12}}, 7);
  CollisionEvidence e = Evidence(cp);
  EXPECT_TRUE(e.merged);
  EXPECT_EQ(e.entries, 3u);
  EXPECT_EQ(e.params, 7u);
  ASSERT_TRUE(e.pointer.has_value());
  EXPECT_EQ(*e.pointer, 0u);
  ASSERT_TRUE(e.reference_step.has_value());
  EXPECT_EQ(*e.reference_step, 3.0);
  ASSERT_EQ(e.keys.size(), 3u);
  EXPECT_FALSE(e.keys[0].multiplicity.has_value());
  EXPECT_EQ(e.keys[1].multiplicity, std::optional<int64_t>(2));
  EXPECT_EQ(e.keys[2].multiplicity, std::optional<int64_t>(4));
  EXPECT_EQ(e.reason,
            "3 state entries for the 7 parameters param_groups lists, every key at pointer 0 (what FSDP and FSDP2 "
            "DTensor parameters report): parameters of one shape shared one entry, so 4 parameters' state was "
            "merged into others'");
}

TEST(CollisionEvidence, CountersThatAreNoWholeMultipleShowNoMultiplicity) {
  StateGraph b;
  Checkpoint& cp = b.Build({{b.PtrShapeKey(0, {8}), 3}, {b.PtrShapeKey(0, {4}), 5}}, 3);
  CollisionEvidence e = Evidence(cp);
  EXPECT_TRUE(e.merged);
  EXPECT_FALSE(e.keys[1].multiplicity.has_value());
}

TEST(CollisionEvidence, DistinctPointersProveNothing) {
  // Fewer entries than parameters is also what frozen or never-stepped parameters give.
  StateGraph b;
  Checkpoint& cp = b.Build({{b.PtrShapeKey(4096, {8}), 3}, {b.PtrShapeKey(8192, {4}), 3}}, 3);
  CollisionEvidence e = Evidence(cp);
  EXPECT_FALSE(e.merged);
  EXPECT_FALSE(e.pointer.has_value());
  EXPECT_NE(e.reason.find("keyed at different pointers"), std::string::npos) << e.reason;
}

TEST(CollisionEvidence, OneNonzeroPointerOnSeveralKeysIsMerged) {
  StateGraph b;
  Checkpoint& cp = b.Build({{b.PtrShapeKey(4096, {8}), 3}, {b.PtrShapeKey(4096, {4}), 3}}, 3);
  CollisionEvidence e = Evidence(cp);
  EXPECT_TRUE(e.merged);
  EXPECT_EQ(e.pointer, std::optional<uint64_t>(4096));
}

TEST(CollisionEvidence, AsManyEntriesAsParametersIsNotEvidence) {
  StateGraph b;
  Checkpoint& cp = b.Build({{b.PtrShapeKey(0, {8}), 3}, {b.PtrShapeKey(0, {4}), 3}}, 2);
  EXPECT_FALSE(Evidence(cp).merged);
}

TEST(CollisionEvidence, IndexKeysCannotCollide) {
  StateGraph b;
  Checkpoint& cp = b.Build({{b.Int(0), 3}}, 2);
  CollisionEvidence e = Evidence(cp);
  EXPECT_FALSE(e.merged);
  EXPECT_EQ(e.reason, "its keys are index keys, not pointers, so no two parameters can have shared one by address");
}

}  // namespace
}  // namespace optstate
