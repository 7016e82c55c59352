#include "optim/replay_steps.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "optim/group_fields.h"

namespace optstate {
namespace {

void ReadNumber(const ObjectGraph& g, NodeId group, std::string_view key, double& field) {
  NodeId v = DictLookup(g, group, key);
  if (v == kNoNode) return;
  if (g.at(v).kind == NodeKind::kFloat) field = g.at(v).float_value;
  if (g.at(v).kind == NodeKind::kInt) field = static_cast<double>(g.at(v).int_value);
}

void ReadBool(const ObjectGraph& g, NodeId group, std::string_view key, bool& field) {
  NodeId v = DictLookup(g, group, key);
  if (v != kNoNode && g.at(v).kind == NodeKind::kBool) field = g.at(v).bool_value;
}

void ReadBetas(const ObjectGraph& g, NodeId group, OptimizerHyper& h) {
  NodeId betas = DictLookup(g, group, "betas");
  if (betas == kNoNode || g.at(betas).items.size() != 2) return;
  for (int i = 0; i < 2; ++i) {
    const Node& b = g.at(g.at(betas).items[static_cast<size_t>(i)]);
    double v = b.kind == NodeKind::kFloat ? b.float_value : static_cast<double>(b.int_value);
    (i == 0 ? h.beta1 : h.beta2) = v;
  }
}

}  // namespace

OptimizerHyper GroupOptimizerHyper(const ObjectGraph& g, NodeId group, Algorithm a) {
  OptimizerHyper h = OptimizerHyper::Defaults(a);
  ReadNumber(g, group, "lr", h.lr);
  // Every key any class writes, so that h is the group's whatever `a` uses.
  for (std::span<const GroupField> table : EveryGroupFieldTable()) {
    for (const GroupField& f : table) {
      if (f.kind == GroupFieldKind::kNumber) ReadNumber(g, group, f.key, h.*f.number);
      if (f.kind == GroupFieldKind::kFlag) ReadBool(g, group, f.key, h.*f.flag);
      if (f.kind == GroupFieldKind::kBetas) ReadBetas(g, group, h);
    }
  }
  return h;
}

bool EqualsInitStep(Algorithm a, OptimizerHyper h, const std::vector<float>& values,
                    const std::vector<float> (&state)[3]) {
  std::vector<float> param = values, fresh[3];
  float step = 0;
  OptimizerTensor t;
  t.param = param.data();
  t.numel = static_cast<int64_t>(param.size());
  t.step = &step;
  for (size_t k = 0; k < 3; ++k) {
    fresh[k].assign(state[k].size(), 0.0f);
    t.state[k] = state[k].empty() ? nullptr : fresh[k].data();
  }
  InitOptimizerState(a, h, t);
  h.lr = 0;
  if (!OptimizerStep(a, std::span<const OptimizerTensor>(&t, 1), h).ok()) return false;
  for (size_t k = 0; k < 3; ++k) {
    if (!state[k].empty() && std::memcmp(state[k].data(), fresh[k].data(), state[k].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

void HeavyBallAdamWStep(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
                        std::vector<float>& v, const OptimizerHyper& h, double step) {
  double t = step + 1;
  double b1 = 1 - (1 - h.beta1) / (1 - std::pow(h.beta1, t));
  double b2 = 1 - (1 - h.beta2) / (1 - std::pow(h.beta2, t));
  for (size_t i = 0; i < p.size(); ++i) {
    m[i] = static_cast<float>(m[i] + (1 - b1) * (g[i] - m[i]));
    v[i] = static_cast<float>(v[i] + (1 - b2) * (static_cast<double>(g[i]) * g[i] - v[i]));
    double denom = std::max(std::sqrt(static_cast<double>(v[i])), h.eps);
    p[i] = static_cast<float>(p[i] * (1 - h.weight_decay * h.lr) - h.lr * m[i] / denom);
  }
}

std::optional<std::string> UseProbeLrWhereUpdatesVanish(OptimizerHyper& hyper, size_t group) {
  constexpr double kProbeLr = 1e-3, kTinyLr = 1e-9;
  const std::string at = "param_groups[" + std::to_string(group) + "] has lr ";
  if (hyper.lr == 0) {
    hyper.lr = kProbeLr;
    return at + "0 (a schedule's end, or a leak validate reports): replayed with a probe lr of 0.001, since an "
                "update at lr 0 is zero for any state";
  }
  if (std::abs(hyper.lr) < kTinyLr) {
    std::ostringstream lr;
    lr << hyper.lr;
    hyper.lr = kProbeLr;
    return at + lr.str() + " (a warmup's start): an update that small rounds away in float32 for any state, so it "
                "was replayed with a probe lr of 0.001";
  }
  return std::nullopt;
}

std::optional<Replay> ReplayFor(const std::string& family) {
  if (family == "heavyball3-adamw") return Replay{Algorithm::kAdamW, true};
  if (family == "adam-or-adamw") return Replay{Algorithm::kAdamW, false, true};  // the report says the file cannot tell
  std::optional<Algorithm> a = AlgorithmFromName(family);
  if (!a) return std::nullopt;
  return Replay{*a, false};
}

}  // namespace optstate
