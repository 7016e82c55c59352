#include "torch/pickle_writer.h"

#include <algorithm>
#include <bit>
#include <unordered_map>

#include "optstate/torch_objects.h"
#include "pickle/pickle_text.h"

namespace optstate {
namespace {

// Decimal digits (with '-') to minimal little-endian two's complement bytes.
std::string DecimalToLong(const std::string& digits) {
  bool negative = !digits.empty() && digits[0] == '-';
  std::vector<uint8_t> mag;  // little-endian magnitude
  for (char c : digits.substr(negative ? 1 : 0)) {
    unsigned carry = static_cast<unsigned>(c - '0');
    for (uint8_t& b : mag) {
      unsigned v = b * 10u + carry;
      b = static_cast<uint8_t>(v);
      carry = v >> 8;
    }
    while (carry) {
      mag.push_back(static_cast<uint8_t>(carry));
      carry >>= 8;
    }
  }
  mag.push_back(0);  // room for the sign bit
  if (negative) NegateLittleEndian(mag);
  // Drop redundant sign bytes.
  while (mag.size() > 1 && ((mag.back() == 0 && !(mag[mag.size() - 2] & 0x80)) ||
                            (mag.back() == 0xFF && (mag[mag.size() - 2] & 0x80)))) {
    mag.pop_back();
  }
  return std::string(mag.begin(), mag.end());
}

class Writer {
 public:
  explicit Writer(const Checkpoint& cp) : cp_(cp), g_(cp.graph), refs_(g_.nodes.size(), 0) {}

  StatusOr<PickleOutput> Run(NodeId root) {
    OPTSTATE_RETURN_IF_ERROR(Count(root, 0));
    out_.bytes = "\x80\x02";
    OPTSTATE_RETURN_IF_ERROR(Emit(root));
    out_.bytes += '.';
    return std::move(out_);
  }

 private:
  // References per node, so that only shared objects are memoized.
  Status Count(NodeId id, uint32_t depth) {
    if (depth > 2000) return UnsupportedError("objects nested too deeply to write");
    if (refs_[id]++ > 0) return Status();
    const Node& n = g_.at(id);
    if (n.kind == NodeKind::kTensor) return Status();  // written from its TensorRef
    for (NodeId c : {n.callable, n.args, n.kwargs, n.state}) {
      if (c != kNoNode) OPTSTATE_RETURN_IF_ERROR(Count(c, depth + 1));
    }
    for (NodeId c : n.items) OPTSTATE_RETURN_IF_ERROR(Count(c, depth + 1));
    for (auto [k, v] : n.entries) {
      OPTSTATE_RETURN_IF_ERROR(Count(k, depth + 1));
      OPTSTATE_RETURN_IF_ERROR(Count(v, depth + 1));
    }
    return Status();
  }

  void Op(char c) { out_.bytes += c; }
  void Raw(const void* p, size_t n) { out_.bytes.append(static_cast<const char*>(p), n); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.bytes += static_cast<char>((v >> (8 * i)) & 0xFF);
  }

  void Put() {
    uint32_t index = next_memo_++;
    if (index < 256) {
      Op('q');
      Op(static_cast<char>(index));
    } else {
      Op('r');
      U32(index);
    }
  }
  void Get(uint32_t index) {
    if (index < 256) {
      Op('h');
      Op(static_cast<char>(index));
    } else {
      Op('j');
      U32(index);
    }
  }
  // Memoizes the object just written if it is referenced again later.
  void Remember(NodeId id) {
    if (refs_[id] > 1) {
      memo_[id] = next_memo_;
      Put();
    }
  }

  void Int(int64_t v) {
    if (v >= 0 && v < 256) {
      Op('K');
      Op(static_cast<char>(v));
    } else if (v >= 0 && v < 65536) {
      Op('M');
      Op(static_cast<char>(v & 0xFF));
      Op(static_cast<char>(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      Op('J');
      U32(static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
      Long(DecimalToLong(std::to_string(v)));
    }
  }
  void Long(const std::string& le) {
    if (le.size() < 256) {
      Op('\x8a');
      Op(static_cast<char>(le.size()));
    } else {
      Op('\x8b');
      U32(static_cast<uint32_t>(le.size()));
    }
    out_.bytes += le;
  }
  void Str(const std::string& s) {
    Op('X');
    U32(static_cast<uint32_t>(s.size()));
    out_.bytes += s;
  }
  void Global(std::string_view module, std::string_view name) {
    std::string key = std::string(module) + "\n" + std::string(name);
    auto it = globals_.find(key);
    if (it != globals_.end()) return Get(it->second);
    Op('c');
    out_.bytes += key;
    Op('\n');
    globals_[key] = next_memo_;
    Put();
    if (!IsWeightsOnlyAllowed(module, name)) {
      std::string full = std::string(module) + "." + std::string(name);
      if (std::find(out_.unsafe_globals.begin(), out_.unsafe_globals.end(), full) == out_.unsafe_globals.end()) {
        out_.unsafe_globals.push_back(full);
      }
      out_.only_dtensor_globals_unsafe =
          (out_.unsafe_globals.size() == 1 || out_.only_dtensor_globals_unsafe) &&
          IsAllowedOnceDistributedTensorImported(module, name);
    }
  }
  void EmptyOrderedDict() {
    Global("collections", "OrderedDict");
    Op(')');
    Op('R');
  }
  void IntTuple(const std::vector<int64_t>& v) {
    if (v.empty()) return Op(')');
    Op('(');
    for (int64_t x : v) Int(x);
    Op('t');
  }

  // ('storage', torch.XStorage, key, location, numel), memoized per storage.
  void StorageId(int64_t index, bool untyped) {
    auto it = storage_memo_.find(index);
    if (it != storage_memo_.end()) {
      Get(it->second);
    } else {
      const StorageRef& s = cp_.storages[static_cast<size_t>(index)];
      Op('(');
      Str("storage");
      if (untyped) {
        Global("torch.storage", "UntypedStorage");
      } else {
        Global("torch", GetDTypeInfo(s.dtype).storage_class);
      }
      Str(std::to_string(out_.storages.size()));
      out_.storages.push_back(static_cast<size_t>(index));
      Str(s.location.empty() ? "cpu" : s.location);
      Int(static_cast<int64_t>(untyped ? s.nbytes : s.numel));
      Op('t');
      storage_memo_[index] = next_memo_;
      Put();
    }
    Op('Q');
  }

  Status Tensor(const TensorRef& t) {
    if (t.is_parameter) {  // _rebuild_parameter(data, requires_grad, hooks)
      Global("torch._utils", "_rebuild_parameter");
      Op('(');
    }
    if (t.storage < 0) {
      Global("torch._utils", "_rebuild_meta_tensor_no_storage");
      Op('(');
      Global("torch", GetDTypeInfo(t.dtype).name);
      IntTuple(t.sizes);
      IntTuple(t.strides);
      Op(t.requires_grad && !t.is_parameter ? '\x88' : '\x89');
      Op('t');
      Op('R');
    } else {
      bool v3 = GetDTypeInfo(t.dtype).storage_class.empty();
      Global("torch._utils", v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
      Op('(');
      StorageId(t.storage, v3);
      Int(static_cast<int64_t>(t.storage_offset));
      IntTuple(t.sizes);
      IntTuple(t.strides);
      Op(t.requires_grad && !t.is_parameter ? '\x88' : '\x89');
      EmptyOrderedDict();
      if (v3) Global("torch", GetDTypeInfo(t.dtype).name);
      Op('t');
      Op('R');
    }
    if (t.is_parameter) {
      Op(t.requires_grad ? '\x88' : '\x89');
      EmptyOrderedDict();
      Op('t');
      Op('R');
    }
    return Status();
  }

  Status Items(const std::vector<NodeId>& items, char op) {
    for (size_t i = 0; i < items.size(); i += 1000) {
      Op('(');
      for (size_t j = i; j < std::min(items.size(), i + 1000); ++j) OPTSTATE_RETURN_IF_ERROR(Emit(items[j]));
      Op(op);
    }
    return Status();
  }

  Status Entries(const std::vector<std::pair<NodeId, NodeId>>& entries) {
    for (size_t i = 0; i < entries.size(); i += 1000) {
      Op('(');
      for (size_t j = i; j < std::min(entries.size(), i + 1000); ++j) {
        OPTSTATE_RETURN_IF_ERROR(Emit(entries[j].first));
        OPTSTATE_RETURN_IF_ERROR(Emit(entries[j].second));
      }
      Op('u');
    }
    return Status();
  }

  // Bounded recursion: Count's depth check sees each shared node only on the
  // first path that reaches it, and APPEND/BUILD after creation can hang a
  // long chain below a node the reader already measured, so the path Emit
  // takes may be far deeper (a fuzzed pickle reached 14,000 levels and
  // overflowed the stack).
  Status Emit(NodeId id) {
    if (emit_depth_ >= kMaxEmitDepth) {
      return UnsupportedError("objects nested more than " + std::to_string(kMaxEmitDepth) +
                              " levels deep (below the one made at pickle offset " +
                              std::to_string(g_.at(id).offset) + "); not written");
    }
    ++emit_depth_;
    Status s = EmitNode(id);
    --emit_depth_;
    return s;
  }

  Status EmitNode(NodeId id) {
    auto memo = memo_.find(id);
    if (memo != memo_.end()) {
      Get(memo->second);
      return Status();
    }
    const Node& n = g_.at(id);
    switch (n.kind) {
      case NodeKind::kNone: Op('N'); break;
      case NodeKind::kBool: Op(n.bool_value ? '\x88' : '\x89'); break;
      case NodeKind::kInt: Int(n.int_value); break;
      case NodeKind::kBigInt: Long(DecimalToLong(n.text)); break;
      case NodeKind::kFloat: {
        Op('G');
        uint64_t bits = std::bit_cast<uint64_t>(n.float_value);
        for (int i = 7; i >= 0; --i) out_.bytes += static_cast<char>((bits >> (8 * i)) & 0xFF);
        break;
      }
      case NodeKind::kStr: Str(n.text); break;
      case NodeKind::kBytes: {
        // Protocol 2 spells bytes as _codecs.encode(latin-1 text, 'latin1').
        bool bytearray = n.class_name == "builtins.bytearray";
        if (bytearray) Global("builtins", "bytearray");
        Global("_codecs", "encode");
        std::string latin1;
        for (char c : n.text) {
          auto b = static_cast<uint8_t>(c);
          if (b < 0x80) {
            latin1 += c;
          } else {
            latin1 += static_cast<char>(0xC0 | (b >> 6));
            latin1 += static_cast<char>(0x80 | (b & 0x3F));
          }
        }
        Str(latin1);
        Str("latin1");
        Op('\x86');
        Op('R');
        if (bytearray) {
          Op('\x85');
          Op('R');
        }
        break;
      }
      case NodeKind::kTuple: {
        if (n.class_name == "torch.Size") Global("torch", "Size");
        if (n.items.empty()) {
          Op(')');
        } else if (n.items.size() <= 3) {
          for (NodeId i : n.items) OPTSTATE_RETURN_IF_ERROR(Emit(i));
          Op(static_cast<char>(0x84 + n.items.size()));
        } else {
          Op('(');
          for (NodeId i : n.items) OPTSTATE_RETURN_IF_ERROR(Emit(i));
          Op('t');
        }
        if (n.class_name == "torch.Size") {
          Op('\x85');
          Op('R');
        }
        break;
      }
      case NodeKind::kList:
        Op(']');
        Remember(id);
        OPTSTATE_RETURN_IF_ERROR(Items(n.items, 'e'));
        return Status();
      case NodeKind::kDict:
        if (n.class_name.empty()) {
          Op('}');
        } else {
          size_t dot = n.class_name.rfind('.');
          Global(n.class_name.substr(0, dot), n.class_name.substr(dot + 1));
          Op(')');
          Op('R');
        }
        Remember(id);
        OPTSTATE_RETURN_IF_ERROR(Entries(n.entries));
        if (n.state != kNoNode) {
          OPTSTATE_RETURN_IF_ERROR(Emit(n.state));
          Op('b');
        }
        return Status();
      case NodeKind::kSet:
      case NodeKind::kFrozenSet:
        Global("builtins", n.kind == NodeKind::kSet ? "set" : "frozenset");
        Op(']');
        OPTSTATE_RETURN_IF_ERROR(Items(n.items, 'e'));
        Op('\x85');
        Op('R');
        break;
      case NodeKind::kGlobal: Global(n.module, n.name); return Status();
      case NodeKind::kTensor:
        // A DTensor node keeps the call that built it (_rebuild_from_type_v2 with
        // the mesh, placements and local tensor): written back as that call, the
        // local tensor inside it as an ordinary tensor.
        if (cp_.tensors[n.tensor].is_dtensor) {
          if (n.callable == kNoNode) return UnsupportedError("a DTensor without the call that built it");
          return Call(id, n);
        }
        OPTSTATE_RETURN_IF_ERROR(Tensor(cp_.tensors[n.tensor]));
        break;
      case NodeKind::kObject: return Call(id, n);
      case NodeKind::kPersistentId:
      case NodeKind::kStorage:
        return UnsupportedError("a bare storage reference outside a tensor");
    }
    Remember(id);
    return Status();
  }

  // An unperformed call as the pickle asked for it, with its APPENDs, SETITEMs and BUILD.
  Status Call(NodeId id, const Node& n) {
    OPTSTATE_RETURN_IF_ERROR(Emit(n.callable));
    if (n.args != kNoNode) {
      OPTSTATE_RETURN_IF_ERROR(Emit(n.args));
    } else {
      Op(')');
    }
    if (n.call == CallOpcode::kNewObjEx) {
      if (n.kwargs != kNoNode) {
        OPTSTATE_RETURN_IF_ERROR(Emit(n.kwargs));
      } else {
        Op('}');
      }
      Op('\x92');
    } else {
      Op(n.call == CallOpcode::kNewObj ? '\x81' : 'R');
    }
    Remember(id);
    if (!n.items.empty()) OPTSTATE_RETURN_IF_ERROR(Items(n.items, 'e'));
    if (!n.entries.empty()) OPTSTATE_RETURN_IF_ERROR(Entries(n.entries));
    if (n.state != kNoNode) {
      OPTSTATE_RETURN_IF_ERROR(Emit(n.state));
      Op('b');
    }
    return Status();
  }

  const Checkpoint& cp_;
  const ObjectGraph& g_;
  std::vector<uint32_t> refs_;
  static constexpr uint32_t kMaxEmitDepth = 500;  // 8 MiB of stack holds it even under ASan
  uint32_t emit_depth_ = 0;
  std::unordered_map<NodeId, uint32_t> memo_;
  std::unordered_map<std::string, uint32_t> globals_;
  std::unordered_map<int64_t, uint32_t> storage_memo_;
  uint32_t next_memo_ = 0;
  PickleOutput out_;
};

}  // namespace

StatusOr<PickleOutput> WriteTorchPickle(const Checkpoint& checkpoint, NodeId root) {
  Writer w(checkpoint);
  return w.Run(root);
}

}  // namespace optstate
