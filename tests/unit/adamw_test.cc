// The fused AdamW: bit-identical to the scalar reference on every instruction
// set and thread count, within a stated error of real torch.optim.AdamW, and a
// DCP-style initialisation that changes no parameter and freezes no lr.
#include "optstate/optimizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "fixtures.h"
#include "optstate/checkpoint.h"
#include "optstate/params.h"
#include "parity_file.h"
#include "torch/element_values.h"

namespace optstate {
namespace {

// Parameters, gradients and state of several tensors, owned here.
struct Model {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> numels;
  std::vector<std::vector<uint32_t>> params, grads;  // raw bits, 2 or 4 bytes used
  std::vector<std::vector<float>> m, v, vmax;
  std::vector<float> steps;

  std::vector<AdamWTensor> Tensors(bool with_grads = true) {
    std::vector<AdamWTensor> out;
    for (size_t i = 0; i < numels.size(); ++i) {
      AdamWTensor t;
      t.param = params[i].data();
      t.grad = with_grads ? grads[i].data() : nullptr;
      t.dtype = dtype;
      t.exp_avg = m[i].data();
      t.exp_avg_sq = v[i].data();
      t.max_exp_avg_sq = vmax[i].data();
      t.step = &steps[i];
      t.numel = numels[i];
      out.push_back(t);
    }
    return out;
  }
};

size_t ElementSize(DType d) { return GetDTypeInfo(d).element_size; }

// Packs floats into `dtype` elements inside a uint32 buffer (bf16/f16 use 2 bytes each).
std::vector<uint32_t> Pack(const std::vector<float>& values, DType dtype) {
  std::vector<uint32_t> out((values.size() * ElementSize(dtype) + 3) / 4 + 1);
  for (size_t i = 0; i < values.size(); ++i) StoreFromFloat(out.data(), dtype, i, values[i]);
  return out;
}

float Unpack(const std::vector<uint32_t>& buf, DType dtype, size_t i) { return LoadAsFloat(buf.data(), dtype, i); }

Model RandomModel(DType dtype, const std::vector<int64_t>& numels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Model m;
  m.dtype = dtype;
  m.numels = numels;
  for (int64_t n : numels) {
    std::vector<float> p(static_cast<size_t>(n)), g(static_cast<size_t>(n));
    for (float& x : p) x = normal(rng);
    for (float& x : g) x = 0.1f * normal(rng);
    m.params.push_back(Pack(p, dtype));
    m.grads.push_back(Pack(g, dtype));
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = std::abs(normal(rng)) * 1e-3f;
    m.m.emplace_back(static_cast<size_t>(n), 0.01f);
    m.v.push_back(v);
    m.vmax.emplace_back(static_cast<size_t>(n), 2e-4f);
    m.steps.push_back(static_cast<float>(seed % 5));
  }
  return m;
}

bool SameBits(const Model& a, const Model& b) {
  return a.params == b.params && a.m == b.m && a.v == b.v && a.vmax == b.vmax && a.steps == b.steps;
}

std::vector<Isa> AvailableIsas() {
  std::vector<Isa> out = {Isa::kGeneric};
  if (static_cast<int>(DetectIsa()) >= static_cast<int>(Isa::kAvx2)) out.push_back(Isa::kAvx2);
  if (DetectIsa() == Isa::kAvx512) out.push_back(Isa::kAvx512);
  return out;
}

TEST(AdamWTest, FusedEqualsReferenceBitForBit) {
  // Odd sizes, vector tails, empty and single-element (0-d) tensors, one that
  // spans several chunks, and enough in all for the threaded path.
  const std::vector<int64_t> numels = {0, 1, 7, 15, 16, 17, 33, 1000, (1 << 16) + 13, 300001};
  std::vector<AdamWHyper> hypers(5);
  hypers[1].amsgrad = true;
  hypers[1].weight_decay = 0.1;
  hypers[2].maximize = true;
  hypers[2].beta1 = 0.3;  // lerp from the far end: weight 0.7 >= 0.5
  hypers[3].lr = 0.5;
  hypers[3].eps = 1e-3;
  hypers[3].amsgrad = true;
  hypers[3].maximize = true;
  hypers[4].weight_decay = 0;
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (size_t h = 0; h < hypers.size(); ++h) {
      Model want = RandomModel(dtype, numels, static_cast<uint32_t>(h * 7 + 1));
      Model start = want;
      ASSERT_TRUE(AdamWStepReference(want.Tensors(), hypers[h]).ok());
      ASSERT_TRUE(AdamWStepReference(want.Tensors(false), hypers[h]).ok());  // and a zero gradient
      for (Isa isa : AvailableIsas()) {
        for (int threads : {1, 2}) {
          SCOPED_TRACE(std::string(GetDTypeInfo(dtype).name) + " hyper " + std::to_string(h) + " " +
                       std::string(IsaName(isa)) + " threads " + std::to_string(threads));
          Model got = start;
          AdamWOptions o;
          o.isa = isa;
          o.threads = threads;
          ASSERT_TRUE(AdamWStep(got.Tensors(), hypers[h], o).ok());
          ASSERT_TRUE(AdamWStep(got.Tensors(false), hypers[h], o).ok());
          EXPECT_TRUE(SameBits(got, want));
        }
      }
    }
  }
}

TEST(AdamWTest, NaNsPropagateLikeTorch) {
  for (Isa isa : AvailableIsas()) {
    Model m = RandomModel(DType::kFloat32, {40}, 3);
    m.vmax[0][5] = std::nanf("");
    std::vector<float> g(40, 0.1f);
    g[9] = std::nanf("");
    m.grads[0] = Pack(g, DType::kFloat32);
    Model ref = m;
    AdamWHyper h;
    h.amsgrad = true;
    AdamWOptions o;
    o.isa = isa;
    ASSERT_TRUE(AdamWStep(m.Tensors(), h, o).ok());
    ASSERT_TRUE(AdamWStepReference(ref.Tensors(), h).ok());
    EXPECT_TRUE(std::isnan(m.vmax[0][5]));  // torch.maximum keeps a NaN from either side
    EXPECT_TRUE(std::isnan(Unpack(m.params[0], DType::kFloat32, 9)));
    EXPECT_FALSE(std::isnan(Unpack(m.params[0], DType::kFloat32, 10)));
    EXPECT_EQ(std::memcmp(m.params[0].data(), ref.params[0].data(), 40 * 4), 0);
  }
}

TEST(AdamWTest, BadInputIsRefusedWithTorchsMessages) {
  Model m = RandomModel(DType::kFloat32, {4}, 1);
  AdamWHyper h;
  h.lr = -1;
  EXPECT_EQ(AdamWStep(m.Tensors(), h).ToString(), "invalid argument: invalid learning rate: -1.000000");
  h = {};
  h.beta2 = 1.0;
  EXPECT_EQ(AdamWStep(m.Tensors(), h).ToString(), "invalid argument: invalid beta2: 1.000000");
  h = {};
  h.amsgrad = true;
  std::vector<AdamWTensor> ts = m.Tensors();
  ts[0].max_exp_avg_sq = nullptr;
  EXPECT_EQ(AdamWStep(ts, h).ToString(), "invalid argument: tensor 0: amsgrad needs max_exp_avg_sq");
  ts = m.Tensors();
  ts[0].dtype = DType::kFloat64;
  EXPECT_EQ(AdamWStep(ts, {}).ToString(),
            "invalid argument: AdamW parameters must be float32, bfloat16 or float16, not float64");
  EXPECT_EQ(m.steps[0], 1.0f);  // nothing ran: the step counter is untouched
}

// DCP builds optimizer state by one step with zero gradients at lr=0: that must
// leave every parameter bit-for-bit as it was, set step to 1, and leave nothing
// behind that keeps lr at 0 (HeavyBall's fake_param_groups kept it forever).
TEST(AdamWTest, InitStateChangesNoParameterAndFreezesNoLr) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    Model m = RandomModel(dtype, {1000, 3, 1}, 11);
    Model before = m;
    AdamWHyper h;
    h.lr = 1e-3;
    h.weight_decay = 0.1;
    h.amsgrad = true;
    ASSERT_TRUE(AdamWInitState(m.Tensors(), h).ok());
    EXPECT_EQ(m.params, before.params);
    EXPECT_EQ(m.steps, (std::vector<float>{1, 1, 1}));
    for (size_t i = 0; i < m.numels.size(); ++i) {
      EXPECT_EQ(m.m[i], std::vector<float>(m.m[i].size(), 0.0f));
      EXPECT_EQ(m.v[i], std::vector<float>(m.v[i].size(), 0.0f));
    }
    // The next step uses the lr it is given: exactly what a reference step from
    // the same state does, and the parameters move.
    Model ref = m;
    ASSERT_TRUE(AdamWStep(m.Tensors(), h).ok());
    ASSERT_TRUE(AdamWStepReference(ref.Tensors(), h).ok());
    EXPECT_TRUE(SameBits(m, ref));
    EXPECT_NE(m.params, before.params);
    EXPECT_EQ(m.steps, (std::vector<float>{2, 2, 2}));
  }
}

// --- parity with real torch (testdata/gen/gen_adamw_parity.py) ---

using testing::ParityFile;

struct ParityResult {
  double max_abs_param = 0, max_abs_state = 0, max_rel_param = 0;
};

// Runs one recorded case through the fused kernel and measures how far it strays.
ParityResult RunParityCase(const ParityFile& f, NodeId c) {
  const ObjectGraph& g = f.g();
  std::string dtype_name = g.at(f.Get(c, "dtype")).text;
  DType dtype = *DTypeFromName(dtype_name);
  std::vector<int64_t> numels;
  for (NodeId n : g.at(f.Get(c, "numels")).items) numels.push_back(g.at(n).int_value);
  int64_t total = 0;
  for (int64_t n : numels) total += n;
  AdamWHyper h;
  h.lr = f.Number(c, "lr");
  h.beta1 = f.Number(c, "beta1");
  h.beta2 = f.Number(c, "beta2");
  h.eps = f.Number(c, "eps");
  h.weight_decay = f.Number(c, "weight_decay");
  h.amsgrad = g.at(f.Get(c, "amsgrad")).bool_value;
  h.maximize = g.at(f.Get(c, "maximize")).bool_value;
  std::vector<float> params = f.Floats(c, "params"), grads = f.Floats(c, "grads");
  std::vector<float> exp_avg = f.Floats(c, "exp_avg"), exp_avg_sq = f.Floats(c, "exp_avg_sq");
  std::vector<float> vmax = f.Floats(c, "max_exp_avg_sq"), steps = f.Floats(c, "step");
  const size_t n = static_cast<size_t>(total);
  const size_t step_count = grads.size() / n;
  EXPECT_EQ(step_count, 20u);

  Model m;
  m.dtype = dtype;
  m.numels = numels;
  size_t at = 0;
  for (int64_t k : numels) {
    auto slice = [&](const std::vector<float>& all, size_t row) {
      return std::vector<float>(all.begin() + static_cast<long>(row * n + at),
                                all.begin() + static_cast<long>(row * n + at + static_cast<size_t>(k)));
    };
    m.params.push_back(Pack(slice(params, 0), dtype));
    m.grads.emplace_back();
    m.m.emplace_back(static_cast<size_t>(k), 0.0f);
    m.v.emplace_back(static_cast<size_t>(k), 0.0f);
    m.vmax.emplace_back(static_cast<size_t>(k), 0.0f);
    m.steps.push_back(0);
    at += static_cast<size_t>(k);
  }
  ParityResult r;
  for (size_t s = 0; s < step_count; ++s) {
    at = 0;
    for (size_t i = 0; i < numels.size(); ++i) {
      std::vector<float> g_row(grads.begin() + static_cast<long>(s * n + at),
                               grads.begin() + static_cast<long>(s * n + at + static_cast<size_t>(numels[i])));
      m.grads[i] = Pack(g_row, dtype);
      at += static_cast<size_t>(numels[i]);
    }
    EXPECT_TRUE(AdamWStep(m.Tensors(), h).ok());
    at = 0;
    for (size_t i = 0; i < numels.size(); ++i) {
      EXPECT_EQ(m.steps[i], steps[s * numels.size() + i]);
      for (size_t e = 0; e < static_cast<size_t>(numels[i]); ++e) {
        size_t k = (s + 1) * n + at + e, ks = s * n + at + e;
        double want = params[k], got = Unpack(m.params[i], dtype, e);
        r.max_abs_param = std::max(r.max_abs_param, std::abs(got - want));
        r.max_rel_param = std::max(r.max_rel_param, std::abs(got - want) / std::max(std::abs(want), 1e-3));
        r.max_abs_state = std::max(r.max_abs_state, double(std::abs(m.m[i][e] - exp_avg[ks])));
        r.max_abs_state = std::max(r.max_abs_state, double(std::abs(m.v[i][e] - exp_avg_sq[ks])));
        if (!vmax.empty()) r.max_abs_state = std::max(r.max_abs_state, double(std::abs(m.vmax[i][e] - vmax[ks])));
      }
      at += static_cast<size_t>(numels[i]);
    }
  }
  return r;
}

TEST(AdamWTest, MatchesTorchOptimAdamW) {
  testing::ForEachParityCase("adamw_parity.pt", 6, [](const ParityFile& f, NodeId c, const char* line,
                                                       const std::string& name) {
    ParityResult r = RunParityCase(f, c);
    // Measured: float32 parameters at most 9.5e-7 from torch's (lr 0.5);
    // bf16/f16 ones rounding the other way nowhere.
    testing::ExpectParamsMatchTorch(f, c, r.max_abs_param, r.max_rel_param);
    EXPECT_LE(r.max_abs_state, 1e-6);
    std::printf("[ parity ] %s %-20s max |param - torch| %.3g (relative %.3g), max |state - torch| %.3g\n", line,
                name.c_str(), r.max_abs_param, r.max_rel_param, r.max_abs_state);
  });
}

}  // namespace
}  // namespace optstate
