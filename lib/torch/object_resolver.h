// The resolver of torch's rebuild calls: it walks an object graph children first
// and rewrites each storage's persistent id and each tensor's rebuild call into
// a kStorage or kTensor node (torch_objects.cc: the walk and the calls;
// tensor_rebuild.cc: what each call makes of a tensor). Internal to lib/torch.
#ifndef OPTSTATE_LIB_TORCH_OBJECT_RESOLVER_H_
#define OPTSTATE_LIB_TORCH_OBJECT_RESOLVER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "optstate/torch_objects.h"

namespace optstate::torch_internal {

inline std::string At(const Node& n) { return "offset " + std::to_string(n.offset) + ": "; }

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

  StatusOr<TorchObjects> Run();

 private:
  enum : uint8_t { kUnseen, kActive, kDone };

  Status Resolve(NodeId id, uint32_t depth);

  // Every storage is a persistent id and every tensor a call, so their counts
  // bound the two arrays. Reserving them once spares the copies that doubling
  // makes (half the arrays' peak at 4 * 10^5 tensors); capacity never used is
  // never touched, so it costs address space, not memory.
  void ReserveForTheGraph();

  // --- small accessors over argument tuples ---
  const Node& N(NodeId id) const { return g_.at(id); }
  bool IsTuple(NodeId id) const { return id != kNoNode && N(id).kind == NodeKind::kTuple; }
  const CompactList<NodeId>& Args(const Node& call) const;

  StatusOr<int64_t> IntArg(const Node& call, NodeId id, const char* what) const;

  StatusOr<std::vector<int64_t>> IntTuple(const Node& call, NodeId id, const char* what) const;

  bool BoolArg(NodeId id) const { return id != kNoNode && N(id).kind == NodeKind::kBool && N(id).bool_value; }

  // The callable's "module.name" (module normalized), compared without being
  // built: 4 * 10^4 tensor calls in a small checkpoint each compared it with a
  // dozen names, and building it was an allocation per call.
  struct DottedName {
    std::string_view module, name;
    bool empty() const { return module.empty() && name.empty(); }
    bool operator==(std::string_view dotted) const {
      return dotted.size() == module.size() + 1 + name.size() && dotted.starts_with(module) &&
             dotted[module.size()] == '.' && dotted.ends_with(name);
    }
    std::string str() const { return std::string(module) + "." + std::string(name); }
  };
  // Empty when the call's callable is not a global.
  DottedName CallName(const Node& call) const;

  // --- storages ---
  Status ResolveStorage(NodeId id);

  // --- calls ---
  Status ResolveCall(NodeId id);

  // The local shard from the DTensor's state, the global shape, placements
  // and mesh from the rest of the call (dtensor.h).
  Status RebuildDTensor(NodeId id, const std::vector<NodeId>& a);

  // FSDP1's ShardedTensor (dtensor.h) as this rank's one local shard with its
  // block's offsets, or as no block at all on a rank past the tensor's rows.
  // false, leaving it an object named as its class, when it holds several
  // local shards or lacks what is needed to place one: what optstate cannot
  // place it does not pretend to.
  StatusOr<bool> RebuildShardedTensor(NodeId id, const std::vector<NodeId>& a);

  // Python's str.encode(codec) for the codecs a pickle can name to make bytes;
  // nullopt for another codec or a character the codec cannot encode.
  static std::optional<std::string> EncodeText(const std::string& utf8, std::string codec);

  Status RebuildTensor(NodeId id, const DottedName& name);

  // torch._tensor._rebuild_from_type_v2(func, type, args, state): a Parameter,
  // DTensor or ShardedTensor made from a plain tensor. `a` is a copy of the
  // call's arguments: resolving the inner call appends to the node arena.
  Status RebuildFromType(NodeId id, const std::vector<NodeId>& a);

  Status RebuildMeta(NodeId id);

  // The view's last element must lie inside the storage.
  Status CheckExtent(const Node& n, const TensorRef& t, const StorageRef& s) const;

  Status BecomeTensor(NodeId id, TensorRef t);

  ObjectGraph& g_;
  const StorageLocator& locate_;
  uint32_t max_depth_;
  std::vector<uint8_t> state_;
  StorageKeys by_key_{0};
  TorchObjects out_;
};

}  // namespace optstate::torch_internal

#endif  // OPTSTATE_LIB_TORCH_OBJECT_RESOLVER_H_
