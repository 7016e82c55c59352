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

namespace optstate {
namespace {

std::string At(const Node& n) { return "offset " + std::to_string(n.offset) + ": "; }

// Storage keys to storage indices. torch.save names its storages "0", "1",
// ... in order, so those keys index an array (4 bytes a storage, where a hash
// map of strings took ~70 at 4 * 10^6 storages); any other key (the legacy
// format's addresses, a hand-made file's names, a number past the bound that
// keeps a hostile key from sizing the array) goes to a hash map.
class StorageKeys {
 public:
  explicit StorageKeys(size_t expected) : bound_(2 * expected + 1024) { dense_.reserve(expected); }

  std::optional<size_t> Find(std::string_view key) const {
    if (std::optional<size_t> i = DenseIndex(key)) {
      if (*i < dense_.size() && dense_[*i] != kAbsent) return dense_[*i];
      return std::nullopt;
    }
    auto it = sparse_.find(std::string(key));
    if (it == sparse_.end()) return std::nullopt;
    return it->second;
  }
  void Add(std::string_view key, size_t storage) {
    if (std::optional<size_t> i = DenseIndex(key); i && storage < kAbsent) {
      if (*i >= dense_.size()) dense_.resize(*i + 1, kAbsent);
      dense_[*i] = static_cast<uint32_t>(storage);
      return;
    }
    sparse_.emplace(std::string(key), storage);
  }

 private:
  static constexpr uint32_t kAbsent = UINT32_MAX;
  // A plain decimal (no sign, no leading zero) below the bound, else nothing.
  std::optional<size_t> DenseIndex(std::string_view key) const {
    if (key.empty() || key.size() > 9 || (key.size() > 1 && key[0] == '0')) return std::nullopt;
    size_t v = 0;
    for (char c : key) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + static_cast<size_t>(c - '0');
    }
    if (v >= bound_) return std::nullopt;
    return v;
  }

  size_t bound_;
  std::vector<uint32_t> dense_;
  std::unordered_map<std::string, size_t> sparse_;
};

class Resolver {
 public:
  Resolver(ObjectGraph& g, const StorageLocator& locate, uint32_t max_depth)
      : g_(g), locate_(locate), max_depth_(max_depth), state_(g.nodes.size(), kUnseen) {}

  StatusOr<TorchObjects> Run() {
    ReserveForTheGraph();
    if (g_.root != kNoNode) OPTSTATE_RETURN_IF_ERROR(Resolve(g_.root, 0));
    return std::move(out_);
  }

 private:
  enum : uint8_t { kUnseen, kActive, kDone };

  Status Resolve(NodeId id, uint32_t depth) {
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
  // never touched, so it costs address space, not memory.
  void ReserveForTheGraph() {
    size_t calls = 0, persistent_ids = 0;
    for (const Node& n : g_.nodes) {
      calls += n.kind == NodeKind::kObject;
      persistent_ids += n.kind == NodeKind::kPersistentId;
    }
    out_.storages.reserve(persistent_ids);
    out_.tensors.reserve(calls);
    by_key_ = StorageKeys(persistent_ids);
  }

  // --- small accessors over argument tuples ---
  const Node& N(NodeId id) const { return g_.at(id); }
  bool IsTuple(NodeId id) const { return id != kNoNode && N(id).kind == NodeKind::kTuple; }
  const CompactList<NodeId>& Args(const Node& call) const {
    static const CompactList<NodeId> kEmpty;
    return IsTuple(call.args()) ? N(call.args()).items : kEmpty;
  }

  StatusOr<int64_t> IntArg(const Node& call, NodeId id, const char* what) const {
    if (id == kNoNode || N(id).kind != NodeKind::kInt) {
      return CorruptError(At(call) + what + " must be an int, found " + TypeName(g_, id));
    }
    return N(id).int_value;
  }

  StatusOr<std::vector<int64_t>> IntTuple(const Node& call, NodeId id, const char* what) const {
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

  bool BoolArg(NodeId id) const { return id != kNoNode && N(id).kind == NodeKind::kBool && N(id).bool_value; }

  std::string CallName(const Node& call) const {
    if (call.callable() == kNoNode || N(call.callable()).kind != NodeKind::kGlobal) return "";
    const Node& gl = N(call.callable());
    return std::string(NormalizeModule(gl.module())) + "." + gl.name();
  }

  // --- storages ---
  Status ResolveStorage(NodeId id) {
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
        if (!dt) return UnsupportedError(At(n) + "storage class torch." + type.name());
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
  Status ResolveCall(NodeId id) {
    std::string name = CallName(N(id));
    if (name.empty()) return Status();
    // A copy: resolving _rebuild_from_type_v2 appends to the node arena, which
    // would invalidate references into it.
    const std::vector<NodeId> a = Args(N(id));
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor" ||
        name == "torch._utils._rebuild_tensor_v3") {
      return RebuildTensor(id, name);
    }
    if (name == "torch._utils._rebuild_meta_tensor_no_storage") return RebuildMeta(id);
    if (name == "torch._utils._rebuild_parameter" ||
        name == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || N(a[0]).kind != NodeKind::kTensor) {
        return CorruptError(At(N(id)) + name + " needs a tensor as first argument");
      }
      TensorRef t = out_.tensors[N(a[0]).tensor];
      t.is_parameter = true;
      t.requires_grad = a.size() > 1 && BoolArg(a[1]);
      return BecomeTensor(id, std::move(t));
    }
    if (name == "torch._tensor._rebuild_from_type_v2") {
      // (func, type, args, state): the tensor is func(*args); type says what class.
      if (a.size() < 3 || !IsTuple(a[2])) return Status();
      if (a.size() >= 4 && IsDTensorClass(g_, a[1])) return RebuildDTensor(id, a);
      if (a.size() >= 4 && IsShardedTensorClass(g_, a[1])) {
        OPTSTATE_ASSIGN_OR_RETURN(bool read, RebuildShardedTensor(id, a));
        if (read) return Status();
      }
      Node inner;
      inner.kind = NodeKind::kObject;
      inner.extra().callable = a[0];
      inner.extra().args = a[2];
      inner.set_offset(N(id).offset);
      g_.nodes.push_back(inner);
      state_.push_back(kActive);
      NodeId inner_id = static_cast<NodeId>(g_.nodes.size() - 1);
      OPTSTATE_RETURN_IF_ERROR(ResolveCall(inner_id));
      state_[inner_id] = kDone;
      if (N(inner_id).kind != NodeKind::kTensor) {
        // A subclass not built from a plain tensor (a ShardedTensor of several
        // local shards, through _rebuild_wrapper_subclass) stays a call, named
        // as the class it makes.
        if (N(a[1]).kind == NodeKind::kGlobal) g_.at(id).extra().class_name = GlobalName(N(a[1]));
        return Status();
      }
      TensorRef t = out_.tensors[N(inner_id).tensor];
      const Node& type = N(a[1]);
      t.is_parameter = type.kind == NodeKind::kGlobal && type.module() == "torch.nn.parameter" &&
                       type.name() == "Parameter";
      return BecomeTensor(id, std::move(t));
    }
    Node& m = g_.at(id);
    if (name == "collections.OrderedDict" || name == "collections.defaultdict" ||
        name == "collections.Counter") {
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
      m.extra().class_name = CompactText::Common(name);
      return Status();
    }
    if (name == "torch.Size" && a.size() == 1 && IsTuple(a[0])) {
      m.items = N(a[0]).items;
      m.kind = NodeKind::kTuple;
      m.extra().class_name = CompactText::Common("torch.Size");
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
      m.extra().class_name = GlobalName(N(a[0]));
      return Status();
    }
    if (name == "builtins.bytearray" && a.size() == 1 && N(a[0]).kind == NodeKind::kBytes) {
      m.kind = NodeKind::kBytes;
      m.text = N(a[0]).text;
      m.extra().class_name = CompactText::Common("builtins.bytearray");
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

  // The local shard from the DTensor's state, the global shape, placements
  // and mesh from the rest of the call (dtensor.h).
  Status RebuildDTensor(NodeId id, const std::vector<NodeId>& a) {
    DTensorParts parts = FindDTensorParts(g_, a);
    NodeId local = parts.local_tensor;
    if (local == kNoNode || N(local).kind != NodeKind::kTensor) {
      return CorruptError(At(N(id)) + "DTensor without a _local_tensor");
    }
    out_.tensors[N(local).tensor].inside_dtensor = true;
    TensorRef t = out_.tensors[N(local).tensor];
    t.inside_dtensor = false;
    t.is_dtensor = true;
    if (parts.has_global_size) {
      OPTSTATE_ASSIGN_OR_RETURN(t.layout().global_sizes, IntTuple(N(id), parts.global_size, "DTensor size"));
    }
    for (std::string& p : parts.placements) t.layout().placements.push_back(std::move(p));
    if (parts.mesh != kNoNode && N(parts.mesh).kind == NodeKind::kTensor) {
      t.layout().mesh_shape = out_.tensors[N(parts.mesh).tensor].sizes;
    }
    if (parts.coordinate != kNoNode && N(parts.coordinate).kind != NodeKind::kNone) {
      // Only layouts read it; a malformed one leaves it unknown rather than the file unreadable.
      StatusOr<std::vector<int64_t>> c = IntTuple(N(id), parts.coordinate, "mesh coordinate");
      if (c.ok()) t.layout().mesh_coordinate = std::move(*c);
    }
    return BecomeTensor(id, std::move(t));
  }

  // FSDP1's ShardedTensor (dtensor.h) as this rank's one local shard with its
  // block's offsets, or as no block at all on a rank past the tensor's rows.
  // false, leaving it an object named as its class, when it holds several
  // local shards or lacks what is needed to place one: what optstate cannot
  // place it does not pretend to.
  StatusOr<bool> RebuildShardedTensor(NodeId id, const std::vector<NodeId>& a) {
    ShardedTensorParts parts = FindShardedTensorParts(g_, a);
    if (!parts.has_global_size || parts.local_shards > 1) return false;
    StatusOr<std::vector<int64_t>> global = IntTuple(N(id), parts.global_size, "ShardedTensor size");
    if (!global.ok() || std::any_of(global->begin(), global->end(), [](int64_t d) { return d < 0; })) return false;
    TensorRef t;
    if (parts.local_shards == 1) {
      if (parts.local_tensor == kNoNode || N(parts.local_tensor).kind != NodeKind::kTensor) return false;
      StatusOr<std::vector<int64_t>> offsets = IntTuple(N(id), parts.shard_offsets, "shard offsets");
      StatusOr<std::vector<int64_t>> sizes = IntTuple(N(id), parts.shard_sizes, "shard sizes");
      if (!offsets.ok() || !sizes.ok()) return false;
      TensorRef& local = out_.tensors[N(parts.local_tensor).tensor];
      // Metadata that disagrees with its shard is not placed (torch would build
      // the object all the same; where its data belongs is then unknown).
      if (*sizes != local.sizes || offsets->size() != global->size()) return false;
      local.inside_dtensor = true;
      t = local;
      t.inside_dtensor = false;
      t.layout().block_offsets = std::move(*offsets);
    } else {  // no rows here: an empty tensor of the global's trailing shape
      const Node& dt = a[2] == kNoNode || N(a[2]).items.size() < 2 ? N(id) : N(N(a[2]).items[1]);
      std::optional<DType> d = dt.kind == NodeKind::kGlobal ? DTypeFromName(dt.name()) : std::nullopt;
      if (!d || global->empty()) return false;
      t.dtype = *d;
      t.sizes = *global;
      t.sizes[0] = 0;
      t.strides = ContiguousStrides(t.sizes);
      t.layout().holds_no_block = true;
    }
    t.is_dtensor = true;
    t.layout().explicit_block = true;
    t.layout().global_sizes = std::move(*global);
    if (parts.world_size != kNoNode && N(parts.world_size).kind == NodeKind::kInt) {
      t.layout().mesh_shape = {N(parts.world_size).int_value};
    }
    if (parts.rank != kNoNode && N(parts.rank).kind == NodeKind::kInt) {
      t.layout().mesh_coordinate = {N(parts.rank).int_value};
    }
    OPTSTATE_RETURN_IF_ERROR(BecomeTensor(id, std::move(t)));
    return true;
  }

  // Python's str.encode(codec) for the codecs a pickle can name to make bytes;
  // nullopt for another codec or a character the codec cannot encode.
  static std::optional<std::string> EncodeText(const std::string& utf8, std::string codec) {
    for (char& c : codec) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::replace(codec.begin(), codec.end(), '_', '-');
    if (codec == "utf-8" || codec == "utf8") return utf8;
    const bool latin1 = codec == "latin1" || codec == "latin-1" || codec == "iso-8859-1" || codec == "l1";
    const bool cp1252 = codec == "cp1252" || codec == "windows-1252";
    const bool ascii = codec == "ascii" || codec == "us-ascii";
    if (!latin1 && !cp1252 && !ascii) return std::nullopt;
    // cp1252's 0x80..0x9F (0 where it defines no character).
    static constexpr uint16_t kCp1252High[32] = {
        0x20AC, 0,      0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
        0x2039, 0x0152, 0,      0x017D, 0,      0,      0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
        0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0,      0x017E, 0x0178};
    std::string out;
    for (size_t i = 0; i < utf8.size();) {
      uint32_t cp = 0;
      auto c = static_cast<uint8_t>(utf8[i]);
      size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
      if (len == 0 || i + len > utf8.size()) return std::nullopt;
      cp = len == 1 ? c : c & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(utf8[i + k]) & 0x3F);
      i += len;
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (ascii) {
        return std::nullopt;
      } else if (latin1 ? cp <= 0xFF : (cp >= 0xA0 && cp <= 0xFF)) {
        out += static_cast<char>(cp);
      } else if (cp1252) {
        const uint16_t* hit = std::find(std::begin(kCp1252High), std::end(kCp1252High), cp);
        if (cp == 0 || hit == std::end(kCp1252High)) return std::nullopt;
        out += static_cast<char>(0x80 + (hit - std::begin(kCp1252High)));
      } else {
        return std::nullopt;
      }
    }
    return out;
  }

  Status RebuildTensor(NodeId id, const std::string& name) {
    const Node& n = N(id);
    const auto& a = Args(n);
    size_t need = name.ends_with("_v3") ? 7 : name.ends_with("_v2") ? 6 : 4;
    if (a.size() < need) {
      return CorruptError(At(n) + name + " needs " + std::to_string(need) + " arguments, found " +
                          std::to_string(a.size()));
    }
    if (N(a[0]).kind != NodeKind::kStorage) {
      return CorruptError(At(n) + name + ": first argument is " + TypeName(g_, a[0]) +
                          ", not a storage");
    }
    TensorRef t;
    t.storage = N(a[0]).storage;
    StorageRef& s = out_.storages[static_cast<size_t>(t.storage)];
    t.dtype = s.dtype;
    if (need == 7) {
      const Node& dt = N(a[6]);
      std::optional<DType> d = dt.kind == NodeKind::kGlobal && dt.module() == "torch"
                                   ? DTypeFromName(dt.name()) : std::nullopt;
      if (!d) return UnsupportedError(At(n) + "tensor dtype " + TypeName(g_, a[6]));
      t.dtype = *d;
      if (s.untyped && s.dtype == DType::kUInt8 && s.nbytes % GetDTypeInfo(*d).element_size == 0) {
        // An UntypedStorage counts bytes; name it by the first tensor viewing it.
        s.dtype = *d;
        s.numel = s.nbytes / GetDTypeInfo(*d).element_size;
      }
    }
    OPTSTATE_ASSIGN_OR_RETURN(int64_t offset, IntArg(n, a[1], "storage offset"));
    OPTSTATE_ASSIGN_OR_RETURN(t.sizes, IntTuple(n, a[2], "size"));
    OPTSTATE_ASSIGN_OR_RETURN(t.strides, IntTuple(n, a[3], "stride"));
    t.requires_grad = need >= 6 && BoolArg(a[4]);
    if (offset < 0) return CorruptError(At(n) + "negative storage offset");
    t.storage_offset = static_cast<uint64_t>(offset);
    OPTSTATE_RETURN_IF_ERROR(CheckExtent(n, t, s));
    return BecomeTensor(id, std::move(t));
  }

  Status RebuildMeta(NodeId id) {
    const Node& n = N(id);
    const auto& a = Args(n);
    if (a.size() < 4) return CorruptError(At(n) + "meta tensor needs 4 arguments");
    TensorRef t;
    const Node& dt = N(a[0]);
    std::optional<DType> d = dt.kind == NodeKind::kGlobal ? DTypeFromName(dt.name()) : std::nullopt;
    if (!d) return UnsupportedError(At(n) + "meta tensor dtype " + TypeName(g_, a[0]));
    t.dtype = *d;
    OPTSTATE_ASSIGN_OR_RETURN(t.sizes, IntTuple(n, a[1], "size"));
    OPTSTATE_ASSIGN_OR_RETURN(t.strides, IntTuple(n, a[2], "stride"));
    t.requires_grad = BoolArg(a[3]);
    return BecomeTensor(id, std::move(t));
  }

  // The view's last element must lie inside the storage.
  Status CheckExtent(const Node& n, const TensorRef& t, const StorageRef& s) const {
    if (t.sizes.size() != t.strides.size()) {
      return CorruptError(At(n) + "tensor has " + std::to_string(t.sizes.size()) + " sizes and " +
                          std::to_string(t.strides.size()) + " strides");
    }
    unsigned __int128 last = t.storage_offset;
    for (size_t i = 0; i < t.sizes.size(); ++i) {
      if (t.sizes[i] < 0 || t.strides[i] < 0) {
        return UnsupportedError(At(n) + "negative size or stride in a tensor view");
      }
      if (t.sizes[i] == 0) return Status();  // empty: touches nothing
      last += static_cast<unsigned __int128>(t.sizes[i] - 1) * static_cast<uint64_t>(t.strides[i]);
    }
    uint64_t elem = GetDTypeInfo(t.dtype).element_size;
    unsigned __int128 end_byte = (last + 1) * elem;
    if (end_byte > s.nbytes) {
      return CorruptError(At(n) + "tensor view ends at byte " +
                          std::to_string(static_cast<uint64_t>(end_byte)) + " of storage '" + s.key +
                          "', which has " + std::to_string(s.nbytes) + " bytes");
    }
    return Status();
  }

  Status BecomeTensor(NodeId id, TensorRef t) {
    // A short identity for keys that hold tensors, e.g. HeavyBall's
    // (Parameter, view_idx): "Parameter(float32 [16, 8], storage 0)".
    std::string where = t.storage < 0 ? "meta" : "storage " + out_.storages[static_cast<size_t>(t.storage)].key;
    if (t.storage_offset != 0) where += " +" + std::to_string(t.storage_offset);
    std::string label = std::string(t.is_dtensor ? t.sharded_kind() : t.is_parameter ? "Parameter" : "Tensor") + "(" +
                        std::string(GetDTypeInfo(t.dtype).name) + " " + ShapeText(t.sizes) + ", " + where + ")";
    out_.tensors.push_back(std::move(t));
    Node& n = g_.at(id);
    n.kind = NodeKind::kTensor;
    n.tensor = static_cast<uint32_t>(out_.tensors.size() - 1);
    n.text = std::move(label);
    // The call that built it stays until the security scans have read it
    // (_rebuild_from_type_v2 calls the class it is given); then
    // ReleaseTensorCalls lets it go.
    return Status();
  }

  ObjectGraph& g_;
  const StorageLocator& locate_;
  uint32_t max_depth_;
  std::vector<uint8_t> state_;
  StorageKeys by_key_{0};
  TorchObjects out_;
};

}  // namespace

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

std::string ShapeText(const std::vector<int64_t>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

uint64_t ShapeNumel(const std::vector<int64_t>& sizes) {
  uint64_t n = 1;
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return n;
}

uint64_t TensorRef::numel() const { return ShapeNumel(sizes); }

uint64_t TensorRef::nbytes() const { return numel() * GetDTypeInfo(dtype).element_size; }

StatusOr<TorchObjects> ResolveTorchObjects(ObjectGraph& graph, const StorageLocator& locate,
                                           uint32_t max_depth) {
  Resolver r(graph, locate, max_depth);
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
    if (plain_tensor(n)) n.drop_extra();  // its call is not followed
    ForEachChild(n, visit);
  }
  return CompactGraph(graph, reached);
}

}  // namespace optstate
