// migrate --to torch: a HeavyBall 3.x AdamW layout (what state_migrate.cc
// builds) rewritten as torch.optim.AdamW's state dict, moments rescaled one
// tensor at a time as the writer asks for them.
#include <cmath>
#include <cstring>

#include "optstate/params.h"
#include "optstate/state_migrate.h"
#include "state/migrate_layout.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

// A Python int or float hyperparameter (NumberValue), or `fallback`.
double NumberOr(const Checkpoint& cp, NodeId id, double fallback) {
  return id == kNoNode ? fallback : NumberValue(cp, ByteSpan(), id).value_or(fallback);
}

// What the writer must produce for each storage of the new checkpoint.
struct StoragePlan {
  const TensorRef* source = nullptr;  // a moment of the heavyball3 layout, scaled by `scale`
  double scale = 1;
  float value = 0;                    // else a 0-d float32 (the step)
  bool zeros = false;                 // source's shape, all zero (an entry --on-collision reset made)
};

}  // namespace

StatusOr<WriteReport> WriteAsTorchAdamW(const CheckpointFile& input, const OptimizerState& st,
                                        const MigrateResult& hb, const std::string& path,
                                        const WriteOptions& options, TorchConversion* conversion) {
  if (hb.algorithm.starts_with("SOAP")) {
    return UnsupportedError("torch.optim has no SOAP (its eigenbasis and preconditioner have nowhere to go): "
                            "migrate --to heavyball3 instead; nothing was written");
  }
  TorchConversion local;
  TorchConversion& c = conversion ? *conversion : local;
  const Checkpoint& in = hb.checkpoint;
  const ObjectGraph& g = in.graph;
  NodeId groups = DictLookup(g, st.node, "param_groups");
  NodeId state = DictLookup(g, st.node, "state");
  if (groups == kNoNode || state == kNoNode) return InvalidArgumentError("no optimizer state dict to convert");
  c.steps = hb.steps;
  const double t = static_cast<double>(hb.steps);

  Checkpoint out;
  GraphBuilder b(out);
  std::vector<StoragePlan> plans;
  NodeId root = b.Dict();
  NodeId new_state = b.Dict();
  NodeId new_groups = b.List({});
  b.Set(root, "state", new_state);
  b.Set(root, "param_groups", new_groups);

  // Which group each parameter index is in, for its betas.
  std::vector<std::pair<double, double>> betas_of;
  for (NodeId group : g.at(groups).items) {
    NodeId betas = DictLookup(g, group, "betas");
    double b1 = 0.9, b2 = 0.999;
    if (betas != kNoNode && g.at(betas).items.size() == 2) {
      b1 = NumberOr(in, g.at(betas).items[0], b1);
      b2 = NumberOr(in, g.at(betas).items[1], b2);
    }
    NodeId params = DictLookup(g, group, "params");
    size_t n = params == kNoNode ? 0 : g.at(params).items.size();
    for (size_t i = 0; i < n; ++i) betas_of.emplace_back(b1, b2);
    c.beta1 = b1;
    c.beta2 = b2;

    NodeId d = b.Dict();
    for (const char* field : {"lr", "eps", "weight_decay"}) {
      NodeId v = DictLookup(g, group, field);
      if (v != kNoNode) b.Set(d, field, b.Float(NumberOr(in, v, 0)));
    }
    b.Set(d, "betas", b.Tuple({b.Float(b1), b.Float(b2)}));
    b.Set(d, "amsgrad", b.Bool(false));
    b.Set(d, "foreach", b.New(NodeKind::kNone));
    b.Set(d, "maximize", b.Bool(false));
    b.Set(d, "capturable", b.Bool(false));
    b.Set(d, "differentiable", b.Bool(false));
    b.Set(d, "fused", b.New(NodeKind::kNone));
    std::vector<NodeId> indices;
    for (size_t i = 0; i < n; ++i) indices.push_back(b.Int(g.at(g.at(params).items[i]).int_value));
    b.Set(d, "params", b.List(std::move(indices)));
    out.graph.at(new_groups).items.push_back(d);
  }

  for (auto [key, per_view] : g.at(state).entries) {
    int64_t index = g.at(key).int_value;
    if (g.at(per_view).entries.size() != 1) {
      return UnsupportedError("state entry " + std::to_string(index) + " has " +
                              std::to_string(g.at(per_view).entries.size()) +
                              " views (a split parameter): torch.optim keeps no per-view state");
    }
    NodeId view = g.at(per_view).entries[0].second;
    NodeId m = DictLookup(g, view, hb3::kAdamExpAvg);
    NodeId v = DictLookup(g, view, hb3::kAdamExpAvgSq);
    if (m == kNoNode || v == kNoNode || g.at(m).kind != NodeKind::kTensor || g.at(v).kind != NodeKind::kTensor) {
      return UnsupportedError("state entry " + std::to_string(index) + " has no AdamW moments");
    }
    if (index < 0 || static_cast<size_t>(index) >= betas_of.size()) {
      return InvalidArgumentError("state entry " + std::to_string(index) + " is in no param group");
    }
    auto [b1, b2] = betas_of[static_cast<size_t>(index)];
    // An entry --on-collision reset made is fresh state: zero moments at step 0,
    // exactly what torch.optim.AdamW starts a parameter with.
    const TensorRef& m_ref = in.tensors[g.at(m).tensor];
    const bool reset = m_ref.storage >= 0 && in.storages[static_cast<size_t>(m_ref.storage)].zero_fill;
    NodeId d = b.Dict();
    NodeId step = b.Tensor(DType::kFloat32, {});
    plans.push_back(StoragePlan{nullptr, 1, reset ? 0.0f : static_cast<float>(t)});
    b.Set(d, "step", step);
    for (auto [name, node, scale] : {std::tuple{"exp_avg", m, 1 - std::pow(b1, t)},
                                     std::tuple{"exp_avg_sq", v, 1 - std::pow(b2, t)}}) {
      const TensorRef& src = in.tensors[g.at(node).tensor];
      if (src.dtype != DType::kFloat32 || src.is_dtensor) {
        return UnsupportedError("state entry " + std::to_string(index) + "." + name + " is " +
                                std::string(GetDTypeInfo(src.dtype).name) +
                                (src.is_dtensor ? " DTensor" : "") + ": only float32 whole tensors are converted");
      }
      b.Set(d, name, b.Tensor(DType::kFloat32, src.sizes));
      plans.push_back(StoragePlan{&src, scale, 0, reset});
    }
    b.Set(new_state, b.Int(index), d);
    ++c.entries;
  }
  c.notes.push_back("moments rescaled to torch's uncorrected running averages: exp_avg x (1 - beta1^" +
                    std::to_string(hb.steps) + "), exp_avg_sq x (1 - beta2^" + std::to_string(hb.steps) +
                    "); step " + std::to_string(hb.steps) + " per parameter");
  c.notes.push_back("tolerance: HeavyBall divides by max(sqrt(v), eps), torch by sqrt(v) + eps, so updates differ "
                    "by a relative eps / sqrt(v) (negligible unless exp_avg_sq is near eps^2)");
  if (!st.path.empty()) {
    c.notes.push_back("only the optimizer state dict at '" + st.path + "' is written; the rest of the file is not");
  }

  std::vector<float> buffer;
  auto source = [&](size_t storage) -> StatusOr<ByteSpan> {
    if (storage >= plans.size()) return InternalError("storage " + std::to_string(storage) + " has no plan");
    const StoragePlan& plan = plans[storage];
    if (plan.source == nullptr) {
      buffer.assign(1, plan.value);
    } else if (plan.zeros) {
      // Whatever the merged entry it was copied from held (its storage still names those bytes).
      buffer.assign(static_cast<size_t>(plan.source->numel()), 0.0f);
    } else {
      OPTSTATE_ASSIGN_OR_RETURN(buffer, ReadTensorAsFloat(input.bytes(), in, *plan.source));
      for (float& x : buffer) x = static_cast<float>(x * plan.scale);
    }
    return ByteSpan(reinterpret_cast<const std::byte*>(buffer.data()), buffer.size() * sizeof(float));
  };
  return WriteNewCheckpoint(out, root, path, source, options);
}

}  // namespace optstate
