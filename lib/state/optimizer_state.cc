#include "optstate/params.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

#include "pickle/graph_walk.h"

namespace optstate {
namespace {

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IntTuple(const ObjectGraph& g, NodeId id, std::vector<int64_t>& out) {
  const Node& n = g.at(id);
  if (n.kind != NodeKind::kTuple) return false;
  out.clear();
  for (NodeId i : n.items) {
    if (g.at(i).kind != NodeKind::kInt) return false;
    out.push_back(g.at(i).int_value);
  }
  return true;
}

uint64_t TensorBytesBelow(const Checkpoint& cp, NodeId id, int depth = 0) {
  const Node& n = cp.graph.at(id);
  if (n.kind == NodeKind::kTensor) return cp.tensors[n.tensor].nbytes();
  if (depth > 8) return 0;
  uint64_t sum = 0;
  for (auto [k, v] : n.entries) sum += TensorBytesBelow(cp, v, depth + 1);
  for (NodeId i : n.items) sum += TensorBytesBelow(cp, i, depth + 1);
  return sum;
}

void Classify(const Checkpoint& cp, size_t param_count, StateKey& k) {
  const ObjectGraph& g = cp.graph;
  const Node& n = g.at(k.key);
  k.text = KeyText(g, k.key);
  switch (n.kind) {
    case NodeKind::kInt:
      if (n.int_value >= 0 && static_cast<uint64_t>(n.int_value) < std::max<size_t>(param_count, 1)) {
        k.kind = KeyKind::kIndex;
        k.index = n.int_value;
      } else if (n.int_value >= 0) {
        k.kind = KeyKind::kBarePtr;
        k.ptr = static_cast<uint64_t>(n.int_value);
      }
      return;
    case NodeKind::kStr:
      if (AllDigits(n.text)) {
        k.kind = KeyKind::kStringIndex;
        k.index = std::stoll(n.text);
      } else {
        k.kind = KeyKind::kFqn;
        k.fqn = n.text;
      }
      return;
    case NodeKind::kTensor:
      k.kind = KeyKind::kTensor;
      k.tensor = n.tensor;
      return;
    case NodeKind::kTuple: {
      if (n.items.size() != 2) return;
      const Node& a = g.at(n.items[0]);
      const Node& b = g.at(n.items[1]);
      if (a.kind == NodeKind::kInt && a.int_value >= 0 && IntTuple(g, n.items[1], k.shape)) {
        k.kind = KeyKind::kPtrShape;
        k.ptr = static_cast<uint64_t>(a.int_value);
      } else if (a.kind == NodeKind::kTensor && b.kind == NodeKind::kInt) {
        k.kind = KeyKind::kParamView;
        k.tensor = a.tensor;
        k.view = b.int_value;
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace

namespace {

// Each key scheme's name (JSON, text) and what made such keys.
struct KeyKindText {
  KeyKind kind;
  std::string_view name;
  std::string_view origin;
};
constexpr KeyKindText kKeyKindTexts[] = {
    {KeyKind::kIndex, "index", "parameter indices, as torch.optim saves them"},
    {KeyKind::kStringIndex, "string-index", "indices as strings, as a DCP round trip returns them"},
    {KeyKind::kFqn, "fqn", "parameter names, as torch.distributed.checkpoint's state_dict saves them"},
    {KeyKind::kPtrShape, "ptr-shape", "(data_ptr, shape) tuples: HeavyBall 0.12.3-0.24"},
    {KeyKind::kBarePtr, "bare-ptr", "bare data_ptr() values: HeavyBall 0.12.0-0.12.2"},
    {KeyKind::kParamView, "param-view", "(Parameter, view_idx) tuples: HeavyBall 0.25-1.5"},
    {KeyKind::kTensor, "tensor", "tensors"},
    {KeyKind::kOther, "other", "keys of no known scheme"},
};

const KeyKindText& TextOf(KeyKind kind) {
  for (const KeyKindText& t : kKeyKindTexts) {
    if (t.kind == kind) return t;
  }
  return kKeyKindTexts[std::size(kKeyKindTexts) - 1];  // kOther
}

}  // namespace

std::string_view KeyKindName(KeyKind kind) { return TextOf(kind).name; }

std::string_view KeyKindOrigin(KeyKind kind) { return TextOf(kind).origin; }

bool IsOptimizerStateDict(const ObjectGraph& g, NodeId id) {
  NodeId state = DictLookup(g, id, "state");
  NodeId groups = DictLookup(g, id, "param_groups");
  if (state == kNoNode || groups == kNoNode) return false;
  if (g.at(state).kind != NodeKind::kDict || g.at(groups).kind != NodeKind::kList) return false;
  const auto& items = g.at(groups).items;
  return std::all_of(items.begin(), items.end(), [&](NodeId i) { return g.at(i).kind == NodeKind::kDict; });
}

namespace {

// A live optimizer pickled whole (torch 1.13's OneCycleLR keeps a bound method
// in its state dict, so the scheduler and its optimizer go in with it): its
// __dict__ has "state" and "param_groups" too, but lists the Parameters
// themselves where state_dict() lists indices. It is no state dict to check.
bool IsPickledOptimizerObject(const ObjectGraph& g, NodeId dict, const std::string& path) {
  if (path.find("(state)") == std::string::npos) return false;
  bool any = false;
  for (NodeId group : g.at(DictLookup(g, dict, "param_groups")).items) {
    NodeId params = g.at(group).kind == NodeKind::kDict ? DictLookup(g, group, "params") : kNoNode;
    if (params == kNoNode) return false;
    for (NodeId p : g.at(params).items) {
      if (g.at(p).kind != NodeKind::kTensor) return false;
      any = true;
    }
  }
  return any;
}

}  // namespace

std::vector<std::string> FindOptimizerStates(const Checkpoint& cp) {
  std::vector<std::string> out;
  WalkTree(cp.graph, cp.graph.root, 8, [&](const WalkStep& s) {
    if (!s.repeat && IsOptimizerStateDict(cp.graph, s.id)) {
      if (!IsPickledOptimizerObject(cp.graph, s.id, s.path)) out.push_back(s.path);
      return false;
    }
    return true;
  });
  return out;
}

StatusOr<OptimizerState> LocateOptimizerState(const Checkpoint& cp, const std::string& state_key) {
  if (!state_key.empty()) return ReadOptimizerState(cp, state_key);
  std::vector<std::string> found = FindOptimizerStates(cp);
  if (found.empty()) return NotFoundError("no optimizer state dict in this checkpoint");
  if (found.size() > 1) {
    std::string where;
    for (const std::string& f : found) where += (where.empty() ? "" : ", ") + (f.empty() ? "(root)" : f);
    return InvalidArgumentError(std::to_string(found.size()) + " optimizer state dicts (" + where +
                                "); choose one with --state-key");
  }
  return ReadOptimizerState(cp, found.front());
}

StatusOr<OptimizerState> ReadOptimizerState(const Checkpoint& cp, const std::string& path) {
  const ObjectGraph& g = cp.graph;
  std::optional<NodeId> node = FindPath(g, g.root, path);
  if (!node) return NotFoundError("no object at path '" + path + "'");
  if (!IsOptimizerStateDict(g, *node)) {
    return InvalidArgumentError("the object at " + (path.empty() ? std::string("the root") : "'" + path + "'") +
                                " is a " + TypeName(g, *node) +
                                ", not an optimizer state dict {'state': ..., 'param_groups': [...]}");
  }
  OptimizerState o;
  o.path = path;
  o.node = *node;
  for (NodeId group : g.at(DictLookup(g, *node, "param_groups")).items) {
    NodeId params = DictLookup(g, group, "params");
    std::vector<NodeId> ids;
    if (params != kNoNode) ids = g.at(params).items;
    o.param_count += ids.size();
    for (NodeId id : ids) o.groups_name_params |= g.at(id).kind == NodeKind::kStr;
    o.group_params.push_back(std::move(ids));
  }
  std::map<KeyKind, size_t> kinds;
  o.keys.reserve(g.at(DictLookup(g, *node, "state")).entries.size());  // one per entry: no doubling's copies
  for (auto [k, v] : g.at(DictLookup(g, *node, "state")).entries) {
    StateKey key;
    key.key = k;
    key.value = v;
    Classify(cp, o.param_count, key);
    const Node& val = g.at(v);
    key.nested_views = val.kind == NodeKind::kDict && !val.entries.empty() &&
                       std::all_of(val.entries.begin(), val.entries.end(), [&](auto e) {
                         return g.at(e.first).kind == NodeKind::kInt && g.at(e.second).kind == NodeKind::kDict;
                       });
    key.state_bytes = TensorBytesBelow(cp, v);
    ++kinds[key.kind];
    o.keys.push_back(std::move(key));
  }
  o.mixed = kinds.size() > 1;
  // No state at all (plain SGD, an optimizer never stepped): the keys it would
  // have are what param_groups lists, ints or names.
  if (o.keys.empty()) {
    for (const std::vector<NodeId>& ids : o.group_params) {
      if (ids.empty()) continue;
      if (g.at(ids.front()).kind == NodeKind::kInt) o.scheme = KeyKind::kIndex;
      if (g.at(ids.front()).kind == NodeKind::kStr) o.scheme = KeyKind::kFqn;
      break;
    }
  }
  size_t best = 0;
  for (auto [kind, n] : kinds) {
    if (n > best) {
      best = n;
      o.scheme = kind;
    }
  }
  return o;
}

std::optional<double> NumberValue(const Checkpoint& cp, ByteSpan bytes, NodeId id) {
  const Node& n = cp.graph.at(id);
  if (n.kind == NodeKind::kInt) return static_cast<double>(n.int_value);
  if (n.kind == NodeKind::kFloat) return n.float_value;
  if (n.kind != NodeKind::kTensor) return std::nullopt;
  const TensorRef& t = cp.tensors[n.tensor];
  if (t.is_dtensor || t.numel() != 1 || bytes.empty()) return std::nullopt;
  if (t.dtype == DType::kInt64 || t.dtype == DType::kInt32 || t.dtype == DType::kFloat64) {
    // HeavyBall 3.x keeps its counter as an int64 0-d tensor; some float64.
    StatusOr<std::vector<std::byte>> raw = ReadTensorBytes(bytes, cp, t);
    if (!raw.ok() || raw->size() != GetDTypeInfo(t.dtype).element_size) return std::nullopt;
    if (t.dtype == DType::kInt64) {
      int64_t x;
      std::memcpy(&x, raw->data(), sizeof x);
      return static_cast<double>(x);
    }
    if (t.dtype == DType::kInt32) {
      int32_t x;
      std::memcpy(&x, raw->data(), sizeof x);
      return static_cast<double>(x);
    }
    double x;
    std::memcpy(&x, raw->data(), sizeof x);
    return x;
  }
  StatusOr<std::vector<float>> v = ReadTensorAsFloat(bytes, cp, t);
  if (!v.ok() || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

}  // namespace optstate
