// regenerate: sizes parse, synthetic models have the size asked for, output is
// reproducible bit for bit whatever kernel runs, and each key scheme reads
// back as that scheme.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "optim/synthetic_values.h"
#include "optstate/checkpoint.h"
#include "optstate/optimizer.h"
#include "optstate/params.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Temp(const std::string& name) {
  return (fs::temp_directory_path() / ("optstate-regen-" + std::to_string(::getpid()) + "-" + name)).string();
}

TEST(RegenerateTest, SizesParse) {
  EXPECT_EQ(*ParseSize("4GiB"), 4ull << 30);
  EXPECT_EQ(*ParseSize("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseSize("10MB"), 10000000u);
  EXPECT_EQ(*ParseSize("1.5KiB"), 1536u);
  EXPECT_EQ(*ParseSize("123"), 123u);
  EXPECT_EQ(ParseSize("4 GiB").status().ToString(),
            "invalid argument: '4 GiB' is not a size: use e.g. 4GiB, 512MiB, 10MB or 123");
  EXPECT_FALSE(ParseSize("GiB").ok());
  EXPECT_FALSE(ParseSize("1.2.3M").ok());
}

TEST(RegenerateTest, SyntheticModelsHaveTheSizeAskedFor) {
  for (uint64_t bytes : {1ull << 20, 100ull << 20, 2ull << 30}) {
    std::vector<ParamInfo> params = SyntheticParams(bytes);
    uint64_t total = 0;
    for (const ParamInfo& p : params) total += p.nbytes;
    EXPECT_LE(total, bytes) << bytes;
    EXPECT_GE(total, bytes * 8 / 10) << bytes;  // whole layers only
  }
}

TEST(RegenerateTest, ReproducibleWhateverTheKernel) {
  std::vector<ParamInfo> params = SyntheticParams(300 << 10);
  RegenerateOptions o;
  o.scheme = KeyScheme::kPtrShape;
  o.split_rows = 50;
  o.hyper.amsgrad = true;
  o.with_model = true;
  o.write.durability = Durability::kUnsynced;
  std::string first;
  for (Isa isa : {Isa::kGeneric, DetectIsa()}) {
    for (int threads : {1, 2}) {
      o.kernel.isa = isa;
      o.kernel.threads = threads;
      std::string path = Temp("repro.pt");
      auto r = Regenerate(params, o, path);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::string bytes = Slurp(path);
      fs::remove(path);
      if (first.empty()) first = bytes;
      EXPECT_EQ(bytes, first) << IsaName(isa) << " threads " << threads;
    }
  }
}

TEST(RegenerateTest, EachSchemeReadsBackAsItself) {
  std::vector<ParamInfo> params = SyntheticParams(200 << 10);
  struct Case {
    KeyScheme scheme;
    KeyKind kind;
  };
  for (Case c : {Case{KeyScheme::kIndex, KeyKind::kIndex}, Case{KeyScheme::kFqn, KeyKind::kFqn},
                 Case{KeyScheme::kStringIndex, KeyKind::kStringIndex}, Case{KeyScheme::kPtrShape, KeyKind::kPtrShape},
                 Case{KeyScheme::kPtrShapeFsdp, KeyKind::kPtrShape}}) {
    SCOPED_TRACE(std::string(KeySchemeName(c.scheme)));
    RegenerateOptions o;
    o.scheme = c.scheme;
    o.write.durability = Durability::kUnsynced;
    std::string path = Temp("scheme.pt");
    auto r = Regenerate(params, o, path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto f = OpenCheckpoint(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto st = ReadOptimizerState((*f)->checkpoint(), "");
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->scheme, c.kind);
    EXPECT_FALSE(st->mixed);
    EXPECT_EQ(st->param_count, params.size());
    // Under FSDP's pointer 0 there is one entry per distinct shape.
    size_t shapes = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      bool first = true;
      for (size_t j = 0; j < i; ++j) first = first && params[j].shape != params[i].shape;
      shapes += first;
    }
    EXPECT_EQ(st->keys.size(), c.scheme == KeyScheme::kPtrShapeFsdp ? shapes : params.size());
    EXPECT_EQ(r->state_entries, st->keys.size());
    fs::remove(path);
  }
}

TEST(RegenerateTest, BadParametersAreRefused) {
  std::vector<ParamInfo> params = SyntheticParams(100 << 10);
  params[1].dtype = DType::kInt64;
  RegenerateOptions o;
  std::string path = Temp("bad.pt");
  EXPECT_EQ(Regenerate(params, o, path).status().ToString(),
            "invalid argument: " + params[1].name +
                ": regenerate steps float32, bfloat16 and float16 parameters, not int64");
  o.steps = 0;
  EXPECT_EQ(Regenerate(SyntheticParams(100 << 10), o, path).status().ToString(),
            "invalid argument: steps must be at least 1");
  EXPECT_FALSE(fs::exists(path));
}

// --optimizer: each algorithm's state fields in torch's order, and values that
// are exactly the scalar reference's K steps from the same synthetic start
// (FillSynthetic, as regenerate draws them).
TEST(RegenerateTest, EachAlgorithmWritesItsOwnState) {
  ParamInfo p;
  p.name = "w";
  p.shape = {3, 5};
  p.dtype = DType::kFloat32;
  struct Case {
    Algorithm algorithm;
    std::vector<std::string> fields;  // of the entry, in order
  };
  for (const Case& c : {Case{Algorithm::kSgd, {"momentum_buffer"}}, Case{Algorithm::kAdam, {"step", "exp_avg",
                                                                                            "exp_avg_sq"}},
                        Case{Algorithm::kAdagrad, {"step", "sum"}},
                        Case{Algorithm::kRmsprop, {"step", "square_avg", "momentum_buffer", "grad_avg"}}}) {
    SCOPED_TRACE(std::string(AlgorithmName(c.algorithm)));
    RegenerateOptions o;
    o.algorithm = c.algorithm;
    o.hyper = OptimizerHyper::Defaults(c.algorithm);
    o.hyper.momentum = 0.9;
    o.hyper.centered = true;
    o.hyper.initial_accumulator_value = 0.1;
    o.with_model = true;
    o.write.durability = Durability::kUnsynced;
    std::string path = Temp("family.pt");
    auto r = Regenerate({p}, o, path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto f = OpenCheckpoint(path);
    ASSERT_TRUE(f.ok());
    const ObjectGraph& g = (*f)->checkpoint().graph;
    const Node& state_dict = g.at(DictLookup(g, DictLookup(g, g.root, "optimizer"), "state"));
    ASSERT_EQ(state_dict.entries.size(), 1u);
    NodeId entry = state_dict.entries.front().second;
    std::vector<std::string> fields;
    for (auto [k, v] : g.at(entry).entries) fields.push_back(g.at(k).text);
    EXPECT_EQ(fields, c.fields);
    // The same three steps by the reference, from regenerate's own synthetic start.
    std::vector<float> param(15), grad(15), state[3];
    FillSynthetic(param.data(), 15, 0, 0, 0, 0, 0.05f);
    float step = 0;
    OptimizerTensor t;
    t.param = param.data();
    t.grad = grad.data();
    t.numel = 15;
    t.step = &step;
    std::vector<StateSlot> slots = StateSlots(c.algorithm, o.hyper);
    for (size_t k = 0; k < slots.size(); ++k) {
      if (slots[k].kept) state[k].assign(15, 0.0f);
      t.state[k] = slots[k].kept ? state[k].data() : nullptr;
    }
    InitOptimizerState(c.algorithm, o.hyper, t);
    for (int s = 1; s <= 3; ++s) {
      FillSynthetic(grad.data(), 15, 0, 0, s, 0, 0.01f);
      ASSERT_TRUE(OptimizerStepReference(c.algorithm, std::span<const OptimizerTensor>(&t, 1), o.hyper).ok());
      t.fresh_momentum_buffer = false;
    }
    auto read = [&](NodeId id) {
      auto v = ReadTensorAsFloat((*f)->bytes(), (*f)->checkpoint(), (*f)->checkpoint().tensors[g.at(id).tensor]);
      EXPECT_TRUE(v.ok());
      return *v;
    };
    EXPECT_EQ(read(DictLookup(g, DictLookup(g, g.root, "model"), "w")), param);
    for (size_t k = 0; k < slots.size(); ++k) {
      if (slots[k].kept) {
        EXPECT_EQ(read(DictLookup(g, entry, slots[k].name)), state[k]) << slots[k].name;
      }
    }
    fs::remove(path);
  }
}

}  // namespace
}  // namespace optstate
