// migrate through the library: SOAP's change of basis on exact values, and a
// real HeavyBall 0.24.4 ForeachSOAP file migrated, written and read back.
#include "optstate/state_migrate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "fixtures.h"
#include "optstate/collisions.h"
#include "state/eigenbasis_projection.h"
#include "state/migrate_layout.h"
#include "state/split_views.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

TEST(EigenbasisProjectionTest, ContractsEachDimensionWithItsBasis) {
  // x = [[1, 2], [3, 4]]; Q0 swaps rows, Q1 = [[1, 2], [0, 1]]:
  // y[A, B] = sum_ab x[a, b] Q0[a, A] Q1[b, B].
  std::vector<float> x{1, 2, 3, 4};
  std::vector<Basis> bases{{0, 1, 1, 0}, {1, 2, 0, 1}};
  EXPECT_EQ(ProjectIntoEigenbasis(x, {2, 2}, bases), (std::vector<float>{3, 10, 1, 4}));
  // Only the second dimension has a basis: rows are transformed independently.
  EXPECT_EQ(ProjectIntoEigenbasis(x, {2, 2}, {{}, {1, 2, 0, 1}}), (std::vector<float>{1, 4, 3, 10}));
  // No basis at all (1-D state without a preconditioner): unchanged.
  EXPECT_EQ(ProjectIntoEigenbasis(std::vector<float>{5, -6}, {2}, {{}}), (std::vector<float>{5, -6}));
  // The middle of three dimensions: [2, 2, 1] with Q1 swapping.
  EXPECT_EQ(ProjectIntoEigenbasis(x, {2, 2, 1}, {{}, {0, 1, 1, 0}, {}}), (std::vector<float>{2, 1, 4, 3}));
}

TEST(SplitViewsTest, MergedShapeIsHeavyBallsDimMerger) {
  EXPECT_EQ(HeavyBallMergedShape({64, 3, 3, 3}, 2048), (std::vector<int64_t>{64, 27}));
  EXPECT_EQ(HeavyBallMergedShape({128, 64, 3, 3}, 100), (std::vector<int64_t>{128, 64, 9}));
  EXPECT_EQ(HeavyBallMergedShape({96, 64}, 32), (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(HeavyBallMergedShape({64}, 32), (std::vector<int64_t>{64}));
}

TEST(SplitViewsTest, LastDimensionIsSplitFirst) {
  // emb [96, 64] split by 32, as HeavyBall 0.24.4 keyed it (state dict order): element
  // offsets 0, 2048, 4096, 32, 2080, 4128. Given in address order, they come back in that order.
  std::vector<ViewPlacement> by_address;
  for (uint64_t off : {0, 32, 2048, 2080, 4096, 4128}) by_address.push_back({off, {32, 32}});
  auto order = HeavyBallSplitOrder({96, 64}, by_address);
  ASSERT_TRUE(order.has_value());
  std::vector<uint64_t> offsets;
  for (size_t i : *order) offsets.push_back(by_address[i].offset);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 2048, 4096, 32, 2080, 4128}));
  // A 1-D bias [64] -> [32], [32]: address order is split order.
  order = HeavyBallSplitOrder({64}, {{32, {32}}, {0, {32}}});
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(*order, (std::vector<size_t>{1, 0}));
  // Views that are not blocks of the parameter (an offset off the grid, a rank that does not
  // match): no HeavyBall order, the caller keeps address order.
  EXPECT_FALSE(HeavyBallSplitOrder({96, 64}, {{0, {32, 32}}, {40, {32, 32}}}).has_value());
  EXPECT_FALSE(HeavyBallSplitOrder({96, 64}, {{0, {32}}, {32, {32}}}).has_value());
}

TEST(PickledNumberTest, ReadsOnlyAFloatOrNoneAndNothingElse) {
  // pickle.dumps(0.5) and pickle.dumps(None) at protocol 4, as HeavyBall 3.x stores precond_schedule.
  const std::string half("\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00G?\xe0\x00\x00\x00\x00\x00\x00.", 21);
  EXPECT_EQ(PickledNumber(half), std::optional<std::optional<double>>(0.5));
  EXPECT_EQ(PickledNumber(std::string("\x80\x04N.", 4)), std::optional<std::optional<double>>(std::optional<double>()));
  EXPECT_EQ(PickledNumber(std::string("\x80\x02G?\xd0\x00\x00\x00\x00\x00\x00.", 12)),
            std::optional<std::optional<double>>(0.25));
  // A callable (functools.partial of a schedule), a reduce, trailing bytes: never read as a number.
  EXPECT_EQ(PickledNumber("\x80\x04cos\nsystem\n(S'id'\ntR."), std::nullopt);
  EXPECT_EQ(PickledNumber(half + "."), std::nullopt);
  EXPECT_EQ(PickledNumber(""), std::nullopt);
}

// The value of `name` in view 0 of state entry `index` of a migrated graph.
NodeId ViewField(const Checkpoint& cp, int64_t index, const std::string& name) {
  const ObjectGraph& g = cp.graph;
  NodeId state = DictLookup(g, g.root, "state");
  for (auto [k, v] : g.at(state).entries) {
    if (g.at(k).int_value == index) return DictLookup(g, g.at(v).entries.at(0).second, name);
  }
  return kNoNode;
}

TEST(StateMigrateTest, Soap0xExpAvgIsRotatedIntoTheEigenbasis) {
  const std::string dir = testing::RepoPath("testdata/heavyball/migrate/0.24.4/soap/");
  ParamSource source;
  source.manifest = dir + "manifest.json";
  auto m = OpenAndMatch(dir + "optim.pt", "", source, ReadOptions(), MatchOptions());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto r = MigrateState(m->file->checkpoint(), m->state, m->params, m->match, MigrateOptions());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->steps, 3);  // every entry's step is 2; 0.x does not count its first, update-less step
  EXPECT_EQ(r->computed.size(), 13u + 1u);  // each exp_avg, and the step counter
  // 1-D parameters have no preconditioner: 3.x keeps [None].
  NodeId q = ViewField(r->checkpoint, 2, "scale_by_soap_Q_3");
  ASSERT_NE(q, kNoNode);
  ASSERT_EQ(r->checkpoint.graph.at(q).items.size(), 1u);
  EXPECT_EQ(r->checkpoint.graph.at(r->checkpoint.graph.at(q).items[0]).kind, NodeKind::kNone);

  fs::path out = fs::temp_directory_path() / ("optstate-migrate-" + std::to_string(::getpid()) + ".pt");
  ASSERT_TRUE(WriteMigrated(*m->file, *r, out.string(), WriteOptions()).ok());
  auto written = OpenCheckpoint(out.string());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  const Checkpoint& w = (*written)->checkpoint();
  auto tensor = [&](const Checkpoint& cp, NodeId id) { return cp.tensors.at(cp.graph.at(id).tensor); };
  NodeId step = ViewField(w, 0, "step");
  ASSERT_NE(step, kNoNode);
  EXPECT_EQ(tensor(w, step).dtype, DType::kInt64);
  EXPECT_EQ(NumberValue(w, (*written)->bytes(), step), 3.0);

  // Parameter 0 (emb, [96, 64]): projecting the written moment back with Q
  // (orthogonal: x = y Q^T per dimension) gives the legacy exp_avg.
  const Checkpoint& in = m->file->checkpoint();
  NodeId legacy = kNoNode;
  for (const StateKey& k : m->state.keys) {
    if (k.text.find("(96, 64)") != std::string::npos) legacy = k.value;
  }
  ASSERT_NE(legacy, kNoNode);
  auto x = ReadTensorAsFloat(m->file->bytes(), in, tensor(in, DictLookup(in.graph, legacy, "exp_avg")));
  auto y = ReadTensorAsFloat((*written)->bytes(), w, tensor(w, ViewField(w, 0, "scale_by_soap_exp_avg_2")));
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(tensor(w, ViewField(w, 0, "scale_by_soap_exp_avg_2")).sizes, (std::vector<int64_t>{1, 96, 64}));
  NodeId qs = DictLookup(in.graph, legacy, "Q");
  std::vector<Basis> back;
  for (NodeId qi : in.graph.at(qs).items) {
    auto qv = ReadTensorAsFloat(m->file->bytes(), in, tensor(in, qi));
    ASSERT_TRUE(qv.ok());
    const size_t n = static_cast<size_t>(std::sqrt(static_cast<double>(qv->size())));
    Basis t(qv->size());
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) t[j * n + i] = (*qv)[i * n + j];
    }
    back.push_back(std::move(t));
  }
  std::vector<float> recovered = ProjectIntoEigenbasis(*y, {96, 64}, back);
  double worst = 0, largest = 0;
  for (size_t i = 0; i < x->size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(recovered[i]) - (*x)[i]));
    largest = std::max(largest, std::abs(static_cast<double>((*x)[i])));
  }
  EXPECT_GT(largest, 0);
  EXPECT_LT(worst, 1e-5 * largest);
  // And the rotation really changed the values (a rename alone diverges in 3.x).
  double moved = 0;
  for (size_t i = 0; i < x->size(); ++i) moved = std::max(moved, std::abs(static_cast<double>((*y)[i]) - (*x)[i]));
  EXPECT_GT(moved, 0.1 * largest);
  fs::remove(out);
}

TEST(StateMigrateTest, SoapHasNoTorchCounterpart) {
  const std::string dir = testing::RepoPath("testdata/heavyball/migrate/0.24.4/soap/");
  ParamSource source;
  source.manifest = dir + "manifest.json";
  auto m = OpenAndMatch(dir + "optim.pt", "", source, ReadOptions(), MatchOptions());
  ASSERT_TRUE(m.ok());
  auto r = MigrateState(m->file->checkpoint(), m->state, m->params, m->match, MigrateOptions());
  ASSERT_TRUE(r.ok());
  fs::path out = fs::temp_directory_path() / ("optstate-migrate-torch-" + std::to_string(::getpid()) + ".pt");
  auto w = WriteAsTorchAdamW(*m->file, m->state, *r, out.string(), WriteOptions(), nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace optstate
