// param_groups and the `heavyball` entry as HeavyBall 3.2 saves them, per
// legacy family: field lists in 3.2's own order, read from checkpoints real
// 3.2.0 wrote (testdata/heavyball/migrate/3.2.0/{adamw,soap}).
#include <bit>
#include <cstring>
#include <set>
#include <span>

#include "state/migrate_layout.h"

namespace optstate {
namespace {

// How a field of the new group gets its value.
enum class Fill {
  kCarry,        // the old group's value when it has the field, else the default
  kFixed,        // always the default (3.x-only features, off)
  kMultiTensor,  // the old group's `foreach`
  kParamCount,   // elements in the group's parameters (3.x computes it on its first step)
  kLr,           // the group's lr (3.x's base_lr and prev_lr start as lr)
  kParams,       // the indices the remap gave the group
};

struct GroupField {
  const char* name;
  Fill fill;
  char type;  // default's type: 'b' bool, 'i' int, 'f' float, 's' str, 'n' None, '-' none needed
  double number = 0;
  const char* text = nullptr;
};

constexpr GroupField kAdamWFields[] = {
    {"caution", Fill::kCarry, 'b'},          {"lr", Fill::kCarry, 'f', 0.0025},
    {"warmup_steps", Fill::kCarry, 'i'},     {"weight_decay", Fill::kCarry, 'i'},
    {"eps", Fill::kCarry, 'f', 1e-8},        {"betas", Fill::kCarry, '-'},
    {"cautious_weight_decay", Fill::kFixed, 'b'},
    {"multi_tensor", Fill::kMultiTensor, 'b', 1},
    {"storage_dtype", Fill::kCarry, 's', 0, "float32"},
    {"mars", Fill::kCarry, 'b'},             {"mars_gamma", Fill::kCarry, 'f', 0.0025},
    {"beta2_scale", Fill::kCarry, 'f', 0.8}, {"ecc", Fill::kFixed, 'n'},
    {"param_ecc", Fill::kFixed, 'n'},        {"param_count", Fill::kParamCount, '-'},
    {"is_preconditioning", Fill::kFixed, 'b'},
    {"base_lr", Fill::kLr, '-'},             {"step", Fill::kFixed, 'n'},
    {"prev_lr", Fill::kLr, '-'},             {"params", Fill::kParams, '-'},
};

constexpr GroupField kSoapFields[] = {
    {"caution", Fill::kCarry, 'b'},          {"lr", Fill::kCarry, 'f', 3e-3},
    {"warmup_steps", Fill::kCarry, 'i'},     {"weight_decay", Fill::kCarry, 'f', 0.01},
    {"eps", Fill::kCarry, 'f', 1e-8},        {"betas", Fill::kCarry, '-'},
    {"shampoo_beta", Fill::kCarry, 'f', 0.95},
    {"cautious_weight_decay", Fill::kFixed, 'b'},
    {"max_precond_dim", Fill::kCarry, 'i', 2048},
    {"merge_dims", Fill::kCarry, 'b', 1},    {"precondition_1d", Fill::kCarry, 'b'},
    {"split", Fill::kCarry, 'b'},            {"multi_tensor", Fill::kMultiTensor, 'b', 1},
    {"mars", Fill::kCarry, 'b'},             {"mars_gamma", Fill::kCarry, 'f', 0.0025},
    {"beta2_scale", Fill::kCarry, 'f', 0.8}, {"storage_dtype", Fill::kCarry, 's', 0, "float32"},
    {"precond_grad_accum", Fill::kFixed, 'b'},
    {"ecc", Fill::kFixed, 'n'},              {"param_ecc", Fill::kFixed, 'n'},
    {"param_count", Fill::kParamCount, '-'}, {"is_preconditioning", Fill::kFixed, 'b'},
    {"base_lr", Fill::kLr, '-'},             {"step", Fill::kFixed, 'n'},
    {"prev_lr", Fill::kLr, '-'},             {"params", Fill::kParams, '-'},
};

// Old fields with no 3.x counterpart, each with why leaving it out is safe.
constexpr FieldNote kAdamWLeftOut[] = {
    {"k", "the counter, now the state's step"},
    {"train_mode", "schedule-free bookkeeping AdamW never read"},
    {"weight_sum", "schedule-free bookkeeping AdamW never read"},
    {"lr_max", "schedule-free bookkeeping AdamW never read"},
    {"stochastic_schedule", "removed in 3.x, which ignores it"},
    {"foreach", "now multi_tensor"},
    {"params", "renumbered"},
};
constexpr FieldNote kSoapLeftOut[] = {
    {"precondition_frequency", "now the heavyball entry's precond_schedule"},
    {"normalize_grads", "HeavyBall's SOAP step never read it (0.24.4, 1.4.0, 2.3.1); 3.x has no such option"},
    {"correct_bias", "HeavyBall's SOAP step never read it (0.24.4, 1.4.0, 2.3.1); 3.x always corrects"},
    {"use_precond_schedule", "3.x keeps the schedule in the heavyball entry"},
    {"data_format", "1.4.0's SOAP step never read it; 3.x has no such option"},
    {"stochastic_schedule", "removed in 3.x, which ignores it"},
    {"foreach", "now multi_tensor"},
    {"params", "renumbered"},
};
// 1.x group entries 3.x neither saves nor reads: the defaults' sentinel
// objects and the optimizer class itself (pickled: weights_only refuses them).
constexpr const char* kPickledSentinels[] = {"gradient_clipping", "update_clipping", "palm", "__class__"};

NodeId Default(const GroupField& f, GraphBuilder& b) {
  switch (f.type) {
    case 'b': return b.Bool(f.number != 0);
    case 'i': return b.Int(static_cast<int64_t>(f.number));
    case 'f': return b.Float(f.number);
    case 's': return b.Str(f.text);
    default: return b.New(NodeKind::kNone);
  }
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

void RewriteGroupsAs3x(LegacyFamily family, const OptimizerState& st, const std::vector<ParamInfo>& params,
                       NodeId state_node, GraphBuilder& b, ObjectGraph& g, std::vector<std::string>& notes) {
  const bool soap = IsSoap(family);
  std::span<const GroupField> fields = soap ? std::span<const GroupField>(kSoapFields) : kAdamWFields;
  std::span<const FieldNote> left_out_known = soap ? std::span<const FieldNote>(kSoapLeftOut) : kAdamWLeftOut;
  NodeId groups = DictLookup(g, state_node, "param_groups");
  std::vector<NodeId> items = g.at(groups).items;
  std::set<std::string> carried, defaulted, left_known, left_unknown, sentinels;
  size_t next = 0;
  for (size_t gi = 0; gi < items.size(); ++gi) {
    NodeId old = items[gi];
    uint64_t numel = 0;
    size_t count = gi < st.group_params.size() ? st.group_params[gi].size() : 0;
    for (size_t p = next; p < next + count && p < params.size(); ++p) {
      uint64_t n = 1;
      for (int64_t d : params[p].shape) n *= static_cast<uint64_t>(d);
      numel += n;
    }
    next += count;
    NodeId lr = DictLookup(g, old, "lr");
    if (lr == kNoNode) lr = b.Float(soap ? 3e-3 : 0.0025);
    NodeId d = b.Dict();
    for (const GroupField& f : fields) {
      NodeId v = kNoNode;
      switch (f.fill) {
        case Fill::kCarry:
          v = DictLookup(g, old, f.name);
          (v != kNoNode ? carried : defaulted).insert(f.name);
          if (v == kNoNode) v = Default(f, b);
          break;
        case Fill::kFixed: v = Default(f, b); break;
        case Fill::kMultiTensor:
          v = DictLookup(g, old, "foreach");
          if (v == kNoNode) v = Default(f, b);
          break;
        case Fill::kParamCount: v = b.Int(static_cast<int64_t>(numel)); break;
        case Fill::kLr: v = lr; break;
        case Fill::kParams: v = DictLookup(g, old, "params"); break;
      }
      b.Set(d, f.name, v);
    }
    std::vector<std::pair<NodeId, NodeId>> old_entries = g.at(old).entries;
    for (auto [k, v] : old_entries) {
      std::string name = StrValue(g, k);
      if (DictLookup(g, d, name) != kNoNode) continue;
      bool known = false;
      for (const FieldNote& l : left_out_known) known |= name == l.field;
      bool sentinel = false;
      for (const char* f : kPickledSentinels) sentinel |= name == f;
      (sentinel ? sentinels : known ? left_known : left_unknown).insert(name);
    }
    g.at(groups).items[gi] = d;
  }
  notes.push_back("param_groups: " + Join({carried.begin(), carried.end()}) + " carried over" +
                  (defaulted.empty() ? "" : "; " + Join({defaulted.begin(), defaulted.end()}) +
                                                " absent from the old groups, HeavyBall 3.2's defaults") +
                  "; foreach became multi_tensor; the rest are what 3.2 itself starts a group with");
  for (const FieldNote& l : left_out_known) {
    if (left_known.count(l.field) && std::string(l.field) != "params" && std::string(l.field) != "foreach") {
      notes.push_back(std::string("param_groups field '") + l.field + "' left out: " + l.note);
    }
  }
  if (!sentinels.empty()) {
    notes.push_back("param_groups: " + Join({sentinels.begin(), sentinels.end()}) +
                    " (pickled default sentinels and the optimizer class, which torch.load(weights_only=True) "
                    "refuses and 3.x does not save) left out");
  }
  for (const std::string& f : left_unknown) {
    notes.push_back("param_groups field '" + f + "' has no HeavyBall 3.2 counterpart and was left out");
  }
}

namespace {

// pickle.dumps(x) of a float at protocol 4, as 3.x stores precond_schedule:
// PROTO 4, FRAME 10, BINFLOAT (big-endian double), STOP.
std::string PickledFloat(double x) {
  std::string out("\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00G", 12);
  auto bits = std::bit_cast<uint64_t>(x);
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  out.push_back('.');
  return out;
}

}  // namespace

void AddHeavyballEntry(LegacyFamily family, NodeId state_node, const PreconditionSchedule& schedule,
                       GraphBuilder& b, ObjectGraph& g, std::vector<std::string>& notes) {
  NodeId d = b.Dict();
  NodeId inner = b.Dict();
  b.Set(d, "inner_group", inner);
  b.Set(d, "use_ema", b.Bool(false));
  b.Set(d, "ema_decay", b.Float(0.001));
  b.Set(d, "compile_step", b.Bool(false));
  b.Set(d, "hessian_approx", b.Bool(false));
  if (!IsSoap(family) || schedule.known) {
    NodeId bytes = b.New(NodeKind::kBytes);
    g.at(bytes).text = IsSoap(family) ? PickledFloat(schedule.probability) : std::string("\x80\x04N.", 4);
    b.Set(d, "precond_schedule", bytes);
  }
  if (IsSoap(family) && schedule.known) {
    b.Set(inner, "cumulative_prob_prob_step", b.Int(schedule.prob_step));
    b.Set(inner, "cumulative_prob", b.Float(schedule.cumulative));
  }
  b.Set(d, "fallback_to_finite_differences", b.Bool(true));
  b.Set(d, "_fallback_enabled", b.Bool(false));
  b.Set(d, "hvp_interval", b.Int(1));
  NodeId key = b.Str("heavyball");
  g.at(state_node).entries.emplace_back(key, d);
  if (IsSoap(family)) {
    notes.push_back(schedule.known ? "heavyball entry: " + schedule.note
                                   : "heavyball entry written without precond_schedule (" + schedule.note +
                                         "): 3.x keeps its constructor's");
  } else {
    notes.push_back("heavyball entry: precond_schedule None (AdamW never preconditions), as 3.2 saves it");
  }
}

std::optional<std::optional<double>> PickledNumber(const std::string& bytes) {
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  if (bytes.size() >= 2 && at(0) == 0x80 && at(1) >= 2 && at(1) <= 5) i = 2;  // PROTO
  if (bytes.size() >= i + 9 && at(i) == 0x95) i += 9;                          // FRAME <8-byte length>
  if (bytes.size() == i + 2 && bytes[i] == 'N' && bytes[i + 1] == '.') return std::optional<double>();
  if (bytes.size() == i + 10 && bytes[i] == 'G' && bytes[i + 9] == '.') {
    uint64_t bits = 0;
    for (size_t k = 0; k < 8; ++k) bits = (bits << 8) | at(i + 1 + k);
    return std::optional<double>(std::bit_cast<double>(bits));
  }
  return std::nullopt;
}

}  // namespace optstate
