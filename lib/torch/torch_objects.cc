// Recognises torch's rebuild calls. Argument layouts: torch/_utils.py and
// torch/_tensor.py (_reduce_ex_internal), identical in torch 1.13 and 2.6 for the
// forms handled here.
#include "optstate/torch_objects.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "torch/dtensor.h"
#include "torch/graph_builder.h"
#include "torch/object_resolver.h"

namespace optstate {
namespace torch_internal {

StatusOr<TorchObjects> Resolver::Run() {
  ReserveForTheGraph();
  if (g_.root != kNoNode) OPTSTATE_RETURN_IF_ERROR(Resolve(g_.root, 0));
  return std::move(out_);
}

Status Resolver::Resolve(NodeId id, uint32_t depth) {
  if (id == kNoNode) return Status();
  if (state_[id] != kUnseen) return Status();  // done, or a cycle back to an ancestor
  if (depth > max_depth_) {
    return LimitExceededError(At(g_.at(id)) + "objects nested deeper than " +
                              std::to_string(max_depth_) + " levels (limit max_depth)");
  }
  state_[id] = kActive;
  // Children first: a tensor's storage must be resolved before the tensor.
  // Resolving a child rewrites only that child's node (never this one, which
  // is active), and nodes do not move in the arena, so this node's lists are
  // walked in place (a copy per node was a malloc for each of 10^7 nodes).
  OPTSTATE_RETURN_IF_ERROR(
      ForEachChildUntilError(g_.at(id), [this, depth](NodeId c) { return Resolve(c, depth + 1); }));
  if (g_.at(id).kind == NodeKind::kPersistentId) OPTSTATE_RETURN_IF_ERROR(ResolveStorage(id));
  if (g_.at(id).kind == NodeKind::kObject) OPTSTATE_RETURN_IF_ERROR(ResolveCall(id));
  state_[id] = kDone;
  return Status();
}

// Every storage is a persistent id and every tensor a call, so their counts
// bound the two arrays. Reserving them once spares the copies that doubling
// makes (half the arrays' peak at 4 * 10^5 tensors); capacity never used is
// never touched, so it costs address space, not memory. The pickle machine
// counted them as it made them (a walk over the nodes here was 6% of `inspect`
// at 10^6 parameters); every graph resolved comes from it.
void Resolver::ReserveForTheGraph() {
  const size_t calls = g_.calls_made, persistent_ids = g_.persistent_ids_made;
  out_.storages.reserve(persistent_ids);
  out_.tensors.reserve(calls);
  by_key_ = StorageKeys(persistent_ids);
}

const CompactList<NodeId>& Resolver::Args(const Node& call) const {
  static const CompactList<NodeId> kEmpty;
  return IsTuple(call.args()) ? N(call.args()).items : kEmpty;
}

StatusOr<int64_t> Resolver::IntArg(const Node& call, NodeId id, const char* what) const {
  if (id == kNoNode || N(id).kind != NodeKind::kInt) {
    return CorruptError(At(call) + what + " must be an int, found " + TypeName(g_, id));
  }
  return N(id).int_value;
}

StatusOr<std::vector<int64_t>> Resolver::IntTuple(const Node& call, NodeId id, const char* what) const {
  if (id == kNoNode || (N(id).kind != NodeKind::kTuple && N(id).kind != NodeKind::kList)) {
    return CorruptError(At(call) + what + " must be a tuple of ints, found " + TypeName(g_, id));
  }
  std::vector<int64_t> out;
  for (NodeId item : N(id).items) {
    OPTSTATE_ASSIGN_OR_RETURN(int64_t v, IntArg(call, item, what));
    out.push_back(v);
  }
  return out;
}

Resolver::DottedName Resolver::CallName(const Node& call) const {
  if (call.callable() == kNoNode || N(call.callable()).kind != NodeKind::kGlobal) return {};
  const Node& gl = N(call.callable());
  // Views into the global's out-of-line text: it stays put when the node arena grows.
  return {NormalizeModule(gl.module()), gl.name()};
}

// --- storages ---
Status Resolver::ResolveStorage(NodeId id) {
  Node& n = g_.at(id);
  const Node* pid = n.args() == kNoNode ? nullptr : &N(n.args());
  if (pid == nullptr || pid->kind != NodeKind::kTuple || pid->items.size() < 5 ||
      N(pid->items[0]).kind != NodeKind::kStr || N(pid->items[0]).text != "storage") {
    return UnsupportedError(At(n) + "persistent id of type " + TypeName(g_, n.args()) +
                            " is not a torch storage reference");
  }
  const auto& it = pid->items;
  const Node& type = N(it[1]);
  if (type.kind != NodeKind::kGlobal || N(it[2]).kind != NodeKind::kStr ||
      N(it[3]).kind != NodeKind::kStr) {
    return CorruptError(At(n) + "storage reference must be ('storage', class, key, location, numel)");
  }
  OPTSTATE_ASSIGN_OR_RETURN(int64_t numel, IntArg(n, it[4], "storage numel"));
  if (numel < 0) return CorruptError(At(n) + "negative storage size " + std::to_string(numel));
  const std::string_view key = N(it[2]).text;
  std::optional<size_t> known = by_key_.Find(key);
  if (!known) {
    StorageRef s;
    s.key = key;
    s.location = N(it[3]).text;
    s.numel = static_cast<uint64_t>(numel);
    if (type.module() == "torch" && type.name().ends_with("Storage")) {
      std::optional<DType> dt = DTypeFromStorageClass(type.name());
      if (!dt) return UnsupportedError(At(n) + "storage class torch." + std::string(type.name()));
      s.dtype = *dt;
    } else if (type.module() == "torch.storage" && type.name() == "UntypedStorage") {
      s.untyped = true;  // numel counts bytes; the dtype comes with _rebuild_tensor_v3
    } else {
      return UnsupportedError(At(n) + "storage class " + GlobalName(type));
    }
    uint64_t elem = GetDTypeInfo(s.dtype).element_size;
    if (s.numel > std::numeric_limits<uint64_t>::max() / elem) {
      return CorruptError(At(n) + "storage of " + std::to_string(s.numel) + " elements overflows");
    }
    s.nbytes = s.numel * elem;
    OPTSTATE_RETURN_IF_ERROR_CTX(locate_(s), "storage '" + std::string(key) + "'");
    out_.storages.push_back(std::move(s));
    known = out_.storages.size() - 1;
    by_key_.Add(key, *known);
  }
  n.kind = NodeKind::kStorage;
  n.storage = static_cast<uint32_t>(*known);
  return Status();
}

// --- calls ---
Status Resolver::ResolveCall(NodeId id) {
  const DottedName name = CallName(N(id));
  if (name.empty()) return Status();
  // Every branch but _rebuild_from_type_v2 (which copies them) reads the
  // arguments before anything appends to the node arena.
  const CompactList<NodeId>& a = Args(N(id));
  if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor" ||
      name == "torch._utils._rebuild_tensor_v3") {
    return RebuildTensor(id, name);
  }
  if (name == "torch._utils._rebuild_meta_tensor_no_storage") return RebuildMeta(id);
  if (name == "torch._utils._rebuild_parameter" ||
      name == "torch._utils._rebuild_parameter_with_state") {
    if (a.empty() || N(a[0]).kind != NodeKind::kTensor) {
      return CorruptError(At(N(id)) + name.str() + " needs a tensor as first argument");
    }
    TensorRef t = out_.tensors[N(a[0]).tensor];
    t.is_parameter = true;
    t.requires_grad = a.size() > 1 && BoolArg(a[1]);
    return BecomeTensor(id, std::move(t));
  }
  if (name == "torch._tensor._rebuild_from_type_v2") {
    return RebuildFromType(id, std::vector<NodeId>(a.begin(), a.end()));
  }
  Node& m = g_.at(id);
  constexpr std::string_view kDictClasses[] = {"collections.OrderedDict", "collections.defaultdict",
                                               "collections.Counter"};
  if (auto dict_class = std::find(std::begin(kDictClasses), std::end(kDictClasses), name);
      dict_class != std::end(kDictClasses)) {
    // Items arrive through SETITEMS on the call's result; an argument list of
    // pairs (OrderedDict([(k, v)])) is also possible.
    if (name == "collections.OrderedDict" && !a.empty() &&
        (N(a[0]).kind == NodeKind::kList || N(a[0]).kind == NodeKind::kTuple)) {
      std::vector<std::pair<NodeId, NodeId>> pairs;
      for (NodeId p : N(a[0]).items) {
        if (!IsTuple(p) || N(p).items.size() != 2) return Status();
        pairs.emplace_back(N(p).items[0], N(p).items[1]);
      }
      m.entries.insert(m.entries.begin(), pairs.begin(), pairs.end());
    }
    // Counter.__reduce__ passes its items as one dict argument
    // (MultiStepLR's milestones: Counter({2: 1, 4: 1})).
    if (name == "collections.Counter" && a.size() == 1 && N(a[0]).kind == NodeKind::kDict) {
      m.entries.insert(m.entries.begin(), N(a[0]).entries.begin(), N(a[0]).entries.end());
    }
    m.kind = NodeKind::kDict;
    m.set_class_name(CompactText::Common(*dict_class));
    return Status();
  }
  if (name == "torch.Size" && a.size() == 1 && IsTuple(a[0])) {
    m.items = N(a[0]).items;
    m.kind = NodeKind::kTuple;
    m.set_class_name(CompactText::Common("torch.Size"));
    return Status();
  }
  if (name == "_codecs.encode" && !a.empty() && a.size() <= 2 && N(a[0]).kind == NodeKind::kStr) {
    // Protocol 2 writes bytes as encode(latin1-decoded str, 'latin1'); a
    // hand-made pickle may name another codec, and the bytes are what that
    // codec gives (a pickle hidden behind 'cp1252' is still found).
    std::string codec = a.size() == 2 && N(a[1]).kind == NodeKind::kStr ? N(a[1]).text : "utf-8";
    std::optional<std::string> raw = EncodeText(N(a[0]).text, codec);
    if (!raw) return Status();
    m.kind = NodeKind::kBytes;
    m.text = std::move(*raw);
    return Status();
  }
  if (name == "copyreg._reconstructor" && !a.empty() && N(a[0]).kind == NodeKind::kGlobal) {
    // Protocol 0/1 instances: _reconstructor(cls, base, state); name the class.
    m.set_class_name(GlobalName(N(a[0])));
    return Status();
  }
  if (name == "builtins.bytearray" && a.size() == 1 && N(a[0]).kind == NodeKind::kBytes) {
    m.kind = NodeKind::kBytes;
    m.text = N(a[0]).text;
    m.set_class_name(CompactText::Common("builtins.bytearray"));
    return Status();
  }
  if ((name == "builtins.set" || name == "builtins.frozenset") && a.size() <= 1) {
    CompactList<NodeId> items = a.empty() ? CompactList<NodeId>{} : N(a[0]).items;
    m.kind = name == "builtins.set" ? NodeKind::kSet : NodeKind::kFrozenSet;
    m.items = std::move(items);
    return Status();
  }
  return Status();
}

}  // namespace torch_internal

std::string_view NormalizeModule(std::string_view module) {
  // CPython's _compat_pickle.IMPORT_MAPPING, the entries that matter here.
  static constexpr std::pair<std::string_view, std::string_view> kPython2[] = {
      {"__builtin__", "builtins"}, {"copy_reg", "copyreg"}, {"exceptions", "builtins"},
      {"cPickle", "pickle"},       {"urllib2", "urllib.request"}, {"httplib", "http.client"},
      {"commands", "subprocess"},  {"thread", "_thread"},       {"cStringIO", "io"},
      {"StringIO", "io"},          {"Queue", "queue"},          {"SocketServer", "socketserver"},
      {"xmlrpclib", "xmlrpc.client"}, {"urlparse", "urllib.parse"}, {"UserDict", "collections"},
      {"dummy_thread", "_dummy_thread"},
  };
  for (const auto& [from, to] : kPython2) {
    if (module == from) return to;
  }
  return module;
}

std::string ShapeText(std::span<const int64_t> sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

uint64_t ShapeNumel(std::span<const int64_t> sizes) {
  uint64_t n = 1;
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return n;
}

uint64_t TensorRef::numel() const { return ShapeNumel(sizes); }

uint64_t TensorRef::nbytes() const { return numel() * GetDTypeInfo(dtype).element_size; }

StatusOr<TorchObjects> ResolveTorchObjects(ObjectGraph& graph, const StorageLocator& locate,
                                           uint32_t max_depth) {
  torch_internal::Resolver r(graph, locate, max_depth);
  return r.Run();
}

size_t ReleaseTensorCalls(ObjectGraph& graph, const std::vector<TensorRef>& tensors) {
  if (graph.root == kNoNode) return graph.nodes.size();
  auto plain_tensor = [&](const Node& n) {
    return n.kind == NodeKind::kTensor && n.tensor < tensors.size() && !tensors[n.tensor].is_dtensor;
  };
  // What the root still reaches, a plain tensor's call not counted.
  // Iterative: the graph may be as deep as max_depth allows.
  std::vector<bool> reached(graph.nodes.size(), false);
  std::vector<NodeId> todo = {graph.root};
  reached[graph.root] = true;
  auto visit = [&](NodeId c) {
    if (c != kNoNode && !reached[c]) {
      reached[c] = true;
      todo.push_back(c);
    }
  };
  while (!todo.empty()) {
    Node& n = graph.at(todo.back());
    todo.pop_back();
    if (plain_tensor(n)) {  // its call is not followed
      n.drop_extra();
      n.set_args(kNoNode);
    }
    ForEachChild(n, visit);
  }
  graph.tensor_callables.clear();  // the scans have read them
  return CompactGraph(graph, reached);
}

void LabelTensors(ObjectGraph& graph, const std::vector<TensorRef>& tensors, const std::vector<StorageRef>& storages) {
  for (Node& n : graph.nodes) {
    if (n.kind != NodeKind::kTensor || n.tensor >= tensors.size()) continue;
    const TensorRef& t = tensors[n.tensor];
    std::string label = t.is_dtensor ? t.sharded_kind() : t.is_parameter ? "Parameter" : "Tensor";
    label.append("(").append(GetDTypeInfo(t.dtype).name).append(" ").append(ShapeText(t.sizes)).append(", ");
    if (t.storage < 0 || static_cast<size_t>(t.storage) >= storages.size()) {
      label += "meta";
    } else {
      label.append("storage ").append(storages[static_cast<size_t>(t.storage)].key.view());
    }
    if (t.storage_offset != 0) label.append(" +").append(std::to_string(t.storage_offset));
    n.text = label + ")";
  }
}

}  // namespace optstate
