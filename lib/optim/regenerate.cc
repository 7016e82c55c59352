#include "optstate/optimizer.h"

#include <algorithm>
#include <map>
#include <new>

#include "io/enum_names.h"
#include "io/parallel_for.h"
#include "optim/group_fields.h"
#include "optim/synthetic_values.h"
#include "optstate/checkpoint.h"
#include "torch/element_values.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

// Synthetic values are made in blocks, each seeded on its own, so that threads
// can fill them in any order.
constexpr int64_t kBlock = 1 << 20;

// Runs fn(block, begin, end) for every block of a tensor of n elements, on all hardware threads.
void ForEachBlock(int64_t n, const std::function<void(int64_t block, int64_t begin, int64_t end)>& fn) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  ParallelFor(static_cast<size_t>(blocks), 0, [&](size_t i) {
    auto b = static_cast<int64_t>(i);
    fn(b, b * kBlock, std::min(n, (b + 1) * kBlock));
  });
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}


void StoreAs(DType dtype, const float* in, std::byte* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) StoreFromFloat(out, dtype, static_cast<size_t>(i), in[i]);
}

// `values` (synthetic for this parameter and step, unless given) stored into `out` in `dtype`.
void Generate(std::vector<float>& values, std::byte* out, DType dtype, uint64_t seed, size_t param, int step,
              float scale, bool fill) {
  ForEachBlock(static_cast<int64_t>(values.size()), [&](int64_t block, int64_t begin, int64_t end) {
    if (fill) FillSynthetic(values.data() + begin, end - begin, seed, param, step, block, scale);
    StoreAs(dtype, values.data(), out, begin, end);
  });
}

// What one storage of the output holds.
enum class Field { kParam, kStep, kState0, kState1, kState2 };  // state slots: optimizer.h
struct StorageJob {
  size_t group;
  size_t member;        // kParam: which parameter of the group
  Field field;
  uint64_t byte_offset; // into the field's buffer (a view's slice)
  uint64_t nbytes;
};

// The parameters trained together: one, or (ptr-shape-fsdp) all of one shape,
// which share a single merged state.
struct Computed {
  size_t group = SIZE_MAX;
  std::vector<std::vector<std::byte>> params;  // final values, one per member, in the parameter dtype
  std::vector<float> state[3];  // StateSlots order
  float step = 0;
};

// GraphBuilder plus what each storage must hold, in storage order.
struct JobBuilder : GraphBuilder {
  using GraphBuilder::GraphBuilder;
  NodeId Tensor(DType dtype, const std::vector<int64_t>& shape, const StorageJob& job) {
    jobs.push_back(job);
    return GraphBuilder::Tensor(dtype, shape);
  }
  std::vector<StorageJob> jobs;  // parallel to the storages
};

// The param group as torch 2.6's class writes it: its constructor arguments in
// its own order (group_fields.h); "params" is added by the caller.
NodeId GroupHyperparameters(GraphBuilder& b, Algorithm a, const OptimizerHyper& h) {
  NodeId group = b.Dict();
  b.Set(group, "lr", b.Float(h.lr));
  for (const GroupField& f : GroupFields(a)) {
    NodeId value = kNoNode;
    switch (f.kind) {
      case GroupFieldKind::kNumber: value = b.Float(h.*f.number); break;
      case GroupFieldKind::kFlag: value = b.Bool(h.*f.flag); break;
      case GroupFieldKind::kBetas: value = b.Tuple({b.Float(h.beta1), b.Float(h.beta2)}); break;
      case GroupFieldKind::kNone: value = b.New(NodeKind::kNone); break;
      case GroupFieldKind::kFalse: value = b.Bool(false); break;
    }
    b.Set(group, std::string(f.key), value);
  }
  return group;
}

constexpr EnumNames<KeyScheme, 5> kKeySchemeNames({{
    {KeyScheme::kIndex, "index"}, {KeyScheme::kFqn, "fqn"}, {KeyScheme::kStringIndex, "string-index"},
    {KeyScheme::kPtrShape, "ptr-shape"}, {KeyScheme::kPtrShapeFsdp, "ptr-shape-fsdp"}}},
    "index");
}  // namespace

std::string_view KeySchemeName(KeyScheme scheme) { return kKeySchemeNames.Name(scheme); }

std::optional<KeyScheme> KeySchemeFromName(std::string_view name) { return kKeySchemeNames.Find(name); }

StatusOr<RegenerateReport> Regenerate(const std::vector<ParamInfo>& params_in, const RegenerateOptions& o,
                                      const std::string& out_path) {
  if (o.steps < 1) return InvalidArgumentError("steps must be at least 1");
  std::vector<ParamInfo> params = params_in;
  for (ParamInfo& p : params) {
    if (p.dtype != DType::kFloat32 && p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) {
      return InvalidArgumentError(p.name + ": regenerate steps float32, bfloat16 and float16 parameters, not " +
                                  std::string(GetDTypeInfo(p.dtype).name));
    }
    p.nbytes = static_cast<uint64_t>(Numel(p.shape)) * GetDTypeInfo(p.dtype).element_size;
  }
  // Addresses an allocator would hand out, unless the caller has real ones.
  bool have_ptrs = !params.empty() && std::all_of(params.begin(), params.end(), [](const ParamInfo& p) { return p.data_ptr.has_value(); });
  uint64_t next = 0x7f3a00000000ull;
  for (ParamInfo& p : params) {
    if (!have_ptrs) p.data_ptr = next;
    next += (p.nbytes + 63) / 64 * 64 + 64;
  }

  // Groups: one parameter each, or all of one shape under FSDP's pointer 0.
  std::vector<std::vector<size_t>> groups;
  if (o.scheme == KeyScheme::kPtrShapeFsdp) {
    std::map<std::vector<int64_t>, size_t> by_shape;
    for (size_t i = 0; i < params.size(); ++i) {
      auto [it, fresh] = by_shape.emplace(params[i].shape, groups.size());
      if (fresh) groups.emplace_back();
      groups[it->second].push_back(i);
    }
  } else {
    for (size_t i = 0; i < params.size(); ++i) groups.push_back({i});
  }

  Checkpoint cp;
  JobBuilder b(cp);
  RegenerateReport report;
  NodeId state = b.Dict();
  const std::vector<StateSlot> slots = StateSlots(o.algorithm, o.hyper);
  const bool keeps_state = KeepsStep(o.algorithm) || slots.front().kept;  // plain SGD keeps none
  auto add_entry = [&](size_t g, NodeId key, const std::vector<int64_t>& shape, uint64_t offset) {
    if (!keeps_state) return;  // torch 2.x writes no entry at all
    NodeId entry = b.Dict();
    uint64_t bytes = static_cast<uint64_t>(Numel(shape)) * 4;
    if (KeepsStep(o.algorithm)) {
      b.Set(entry, "step", b.Tensor(DType::kFloat32, {}, {g, 0, Field::kStep, 0, 4}));
      report.state_bytes += 4;
    }
    static constexpr Field kSlotField[3] = {Field::kState0, Field::kState1, Field::kState2};
    for (size_t k = 0; k < slots.size(); ++k) {
      if (!slots[k].kept) continue;
      b.Set(entry, slots[k].name, b.Tensor(DType::kFloat32, shape, {g, 0, kSlotField[k], offset, bytes}));
      report.state_bytes += bytes;
    }
    b.Set(state, key, entry);
    ++report.state_entries;
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    const ParamInfo& p = params[groups[g].front()];
    auto ptr_key = [&](uint64_t ptr, const std::vector<int64_t>& shape) {
      std::vector<NodeId> dims;
      for (int64_t d : shape) dims.push_back(b.Int(d));
      return b.Tuple({b.Int(static_cast<int64_t>(ptr)), b.Tuple(dims)});
    };
    switch (o.scheme) {
      case KeyScheme::kIndex: add_entry(g, b.Int(static_cast<int64_t>(g)), p.shape, 0); break;
      case KeyScheme::kStringIndex: add_entry(g, b.Str(std::to_string(g)), p.shape, 0); break;
      case KeyScheme::kFqn: add_entry(g, b.Str(p.name), p.shape, 0); break;
      case KeyScheme::kPtrShapeFsdp: add_entry(g, ptr_key(0, p.shape), p.shape, 0); break;
      case KeyScheme::kPtrShape: {
        // HeavyBall's split: views of split_rows rows at rising pointers, the last shorter.
        int64_t rows = p.shape.empty() ? 1 : p.shape[0];
        bool split = o.split_rows > 0 && !p.shape.empty() && rows > o.split_rows;
        int64_t row_bytes = rows > 0 ? static_cast<int64_t>(p.nbytes) / rows : 0;
        int64_t row_state_bytes = rows > 0 ? Numel(p.shape) / rows * 4 : 0;
        for (int64_t r = 0; r < rows || r == 0; r += split ? o.split_rows : std::max<int64_t>(rows, 1)) {
          std::vector<int64_t> shape = p.shape;
          if (split) shape[0] = std::min(o.split_rows, rows - r);
          add_entry(g, ptr_key(*p.data_ptr + static_cast<uint64_t>(r * row_bytes), shape), shape,
                    static_cast<uint64_t>(r * row_state_bytes));
          if (!split) break;
        }
        break;
      }
    }
  }
  NodeId group = GroupHyperparameters(b, o.algorithm, o.hyper);
  std::vector<NodeId> ids;
  for (size_t i = 0; i < params.size(); ++i) {
    ids.push_back(o.scheme == KeyScheme::kFqn ? b.Str(params[i].name) : b.Int(static_cast<int64_t>(i)));
  }
  b.Set(group, "params", b.List(ids));
  NodeId optimizer = b.Dict();
  b.Set(optimizer, "state", state);
  b.Set(optimizer, "param_groups", b.List({group}));
  NodeId root = optimizer;
  if (o.with_model) {
    NodeId model = b.Dict("collections.OrderedDict");
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t m = 0; m < groups[g].size(); ++m) {
        const ParamInfo& p = params[groups[g][m]];
        b.Set(model, p.name, b.Tensor(p.dtype, p.shape, {g, m, Field::kParam, 0, p.nbytes}));
      }
    }
    root = b.Dict();
    b.Set(root, "model", model);
    b.Set(root, "optimizer", optimizer);
  }
  cp.graph.root = root;
  for (const ParamInfo& p : params) report.param_bytes += p.nbytes;
  report.params = params.size();
  report.manifest = params;

  // Tensors computed one group at a time, as the writer asks for their bytes.
  Computed c;
  auto compute = [&](size_t g) -> Status {
    if (c.group == g) return Status();
    c = Computed();
    c.group = g;
    const int64_t n = Numel(params[groups[g].front()].shape);
    for (size_t k = 0; k < slots.size(); ++k) {
      if (slots[k].kept) c.state[k].assign(static_cast<size_t>(n), 0.0f);
    }
    OptimizerTensor fresh;
    fresh.numel = n;
    fresh.step = &c.step;
    for (size_t k = 0; k < 3; ++k) fresh.state[k] = c.state[k].empty() ? nullptr : c.state[k].data();
    InitOptimizerState(o.algorithm, o.hyper, fresh);
    std::vector<float> values(static_cast<size_t>(n)), grads(static_cast<size_t>(n));
    for (size_t member : groups[g]) {
      const ParamInfo& p = params[member];
      const size_t elem = GetDTypeInfo(p.dtype).element_size;
      std::vector<std::byte> param(static_cast<size_t>(n) * elem), grad(static_cast<size_t>(n) * elem);
      if (o.initial_values) {
        OPTSTATE_ASSIGN_OR_RETURN(std::vector<float> start, o.initial_values(member));
        if (start.size() != values.size()) {
          return InvalidArgumentError(p.name + ": " + std::to_string(start.size()) + " starting values for " +
                                      std::to_string(n) + " elements");
        }
        values = std::move(start);
      }
      Generate(values, param.data(), p.dtype, o.seed, member, 0, 0.05f, !o.initial_values);
      for (int s = 1; s <= o.steps; ++s) {
        Generate(grads, grad.data(), p.dtype, o.seed, member, s, 0.01f, true);
        OptimizerTensor t = fresh;
        t.param = param.data();
        t.grad = grad.data();
        t.dtype = p.dtype;
        t.fresh_momentum_buffer = s == 1 && member == groups[g].front();  // FSDP groups share one buffer
        OPTSTATE_RETURN_IF_ERROR(OptimizerStep(o.algorithm, std::span<const OptimizerTensor>(&t, 1), o.hyper,
                                               o.kernel));
      }
      c.params.push_back(std::move(param));
    }
    return Status();
  };
  uint64_t done = 0, total = report.state_bytes + (o.with_model ? report.param_bytes : 0);
  StorageSource source = [&](size_t index) -> StatusOr<ByteSpan> {
    const StorageJob& job = b.jobs[index];
    try {
      OPTSTATE_RETURN_IF_ERROR(compute(job.group));
    } catch (const std::bad_alloc&) {
      return LimitExceededError("out of memory computing " + params[groups[job.group].front()].name);
    }
    const std::byte* base = nullptr;
    switch (job.field) {
      case Field::kParam: base = c.params[job.member].data(); break;
      case Field::kStep: base = reinterpret_cast<const std::byte*>(&c.step); break;
      case Field::kState0: base = reinterpret_cast<const std::byte*>(c.state[0].data()); break;
      case Field::kState1: base = reinterpret_cast<const std::byte*>(c.state[1].data()); break;
      case Field::kState2: base = reinterpret_cast<const std::byte*>(c.state[2].data()); break;
    }
    done += job.nbytes;
    if (o.progress) o.progress(done, total);
    return ByteSpan(base + job.byte_offset, static_cast<size_t>(job.nbytes));
  };
  OPTSTATE_ASSIGN_OR_RETURN(report.write, WriteNewCheckpoint(cp, root, out_path, source, o.write));
  return report;
}

std::vector<ParamInfo> SyntheticParams(uint64_t bytes) {
  // Width grows with the size so that small models still have several layers.
  int64_t d = bytes >= (1ull << 30) ? 1024 : bytes >= (64ull << 20) ? 512 : bytes >= (4ull << 20) ? 128 : 32;
  int64_t vocab = 8 * d;
  auto param = [](std::string name, std::vector<int64_t> shape) {
    ParamInfo p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.dtype = DType::kFloat32;
    p.nbytes = static_cast<uint64_t>(Numel(p.shape)) * 4;
    return p;
  };
  std::vector<ParamInfo> out = {param("embed.weight", {vocab, d})};
  uint64_t used = out[0].nbytes + static_cast<uint64_t>(d) * 8;  // + the final norm
  uint64_t layer = static_cast<uint64_t>(12 * d * d + 9 * d) * 4;
  int64_t layers = std::max<int64_t>(1, static_cast<int64_t>((bytes > used ? bytes - used : 0) / layer));
  for (int64_t l = 0; l < layers; ++l) {
    std::string pre = "layers." + std::to_string(l) + ".";
    out.push_back(param(pre + "attn_norm.weight", {d}));
    out.push_back(param(pre + "attn.qkv.weight", {3 * d, d}));
    out.push_back(param(pre + "attn.qkv.bias", {3 * d}));
    out.push_back(param(pre + "attn.out.weight", {d, d}));
    out.push_back(param(pre + "mlp_norm.weight", {d}));
    out.push_back(param(pre + "mlp.up.weight", {4 * d, d}));
    out.push_back(param(pre + "mlp.down.weight", {d, 4 * d}));
    out.push_back(param(pre + "mlp.down.bias", {d}));
  }
  out.push_back(param("norm.weight", {d}));
  out.push_back(param("norm.bias", {d}));
  return out;
}

StatusOr<uint64_t> ParseSize(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.')) ++digits;
  std::string number(text.substr(0, digits));
  std::string unit(text.substr(digits));
  double value = 0;
  try {
    size_t used = 0;
    value = number.empty() ? -1 : std::stod(number, &used);
    if (used != number.size()) value = -1;
  } catch (const std::exception&) {
    value = -1;
  }
  static const std::map<std::string, double> kUnits = {
      {"", 1}, {"B", 1}, {"K", 1e3}, {"KB", 1e3}, {"M", 1e6}, {"MB", 1e6}, {"G", 1e9}, {"GB", 1e9},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  auto it = kUnits.find(unit);
  if (value < 0 || it == kUnits.end()) {
    return InvalidArgumentError("'" + std::string(text) + "' is not a size: use e.g. 4GiB, 512MiB, 10MB or 123");
  }
  return static_cast<uint64_t>(value * it->second);
}

}  // namespace optstate
