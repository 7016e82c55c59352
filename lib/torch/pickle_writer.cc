#include "torch/pickle_writer.h"

#include <algorithm>
#include <unordered_map>

#include "optstate/torch_objects.h"
#include "pickle/pickle_emitter.h"
#include "pickle/pickle_text.h"

namespace optstate {
namespace {

class Writer {
 public:
  explicit Writer(const Checkpoint& cp)
      : cp_(cp), g_(cp.graph), refs_(g_.nodes.size(), 0), storage_memo_(cp.storages.size(), kNotWritten) {}

  StatusOr<PickleOutput> Run(NodeId root, const PickleSink* sink) {
    sink_ = sink;
    OPTSTATE_RETURN_IF_ERROR(Count(root, 0));
    // Held whole: about the size of the pickle it came from (growing by
    // doubling held up to twice that, a 32 MB pickle at 10^5 parameters);
    // pages never written stay unmapped. Streamed: a piece at a time.
    e_.bytes().reserve(sink_ ? kPieceBytes + (64u << 10) : cp_.pickle_bytes + cp_.pickle_bytes / 8);
    e_.Raw("\x80\x02");
    OPTSTATE_RETURN_IF_ERROR(Emit(root));
    e_.Op('.');
    if (sink_) {
      OPTSTATE_RETURN_IF_ERROR(Flush());
    } else {
      out_.bytes = std::move(e_.bytes());
    }
    return std::move(out_);
  }

 private:
  // References per node, so that only shared objects are memoized. A node
  // reached again while it is still being counted closes a cycle (torch 1.13's
  // OneCycleLR: the scheduler's __dict__ holds a bound method of the scheduler):
  // every node on that cycle is then memoized, so that writing it reaches a
  // memo entry the second time round instead of going round for ever.
  Status Count(NodeId id, uint32_t depth) {
    if (depth > 2000) return UnsupportedError("objects nested too deeply to write");
    if (refs_[id] > 0) {
      refs_[id] = 2;
      if (on_path_[id]) {
        for (size_t i = path_.size(); i-- > 0 && path_[i] != id;) refs_[path_[i]] = 2;
      }
      return Status();
    }
    refs_[id] = 1;
    const Node& n = g_.at(id);
    if (n.kind == NodeKind::kTensor) return Status();  // written from its TensorRef
    on_path_[id] = 1;
    path_.push_back(id);
    Status s = ForEachChildUntilError(n, [this, depth](NodeId c) { return Count(c, depth + 1); });
    path_.pop_back();
    on_path_[id] = 0;
    return s;
  }

  void Op(char c) { e_.Op(c); }
  void Int(int64_t v) { e_.Int(v); }
  void Str(const std::string& s) { e_.Str(s); }
  void IntTuple(const std::vector<int64_t>& v) { e_.IntTuple(v); }
  // Memoizes the object just written if it is referenced again later.
  // None, booleans, () and the ints and strs the reader shared never are:
  // the pickler wrote them afresh each time (see Node::shared).
  void Remember(NodeId id) {
    const Node& n = g_.at(id);
    bool singleton = n.shared || n.kind == NodeKind::kNone || n.kind == NodeKind::kBool ||
                     (n.kind == NodeKind::kTuple && n.items.empty() && n.class_name().empty());
    if (refs_[id] <= 1 || singleton) return;
    // Written a second time inside its own arguments (a cycle through a call
    // or tuple), it is memoized already: as Python's pickler does, the copy
    // just made is popped and the memoized one used.
    auto [it, added] = memo_.try_emplace(id, 0);
    if (added) {
      it->second = e_.Put();
    } else {
      Op('0');
      e_.Get(it->second);
    }
  }
  // Globals torch 2.6's weights_only unpickler would refuse are listed once each.
  void Global(std::string_view module, std::string_view name) {
    if (!e_.Global(module, name)) return;
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
  // ('storage', torch.XStorage, key, location, numel), memoized per storage.
  void StorageId(int64_t index, bool untyped) {
    uint32_t& memo = storage_memo_[static_cast<size_t>(index)];
    if (memo != kNotWritten) {
      e_.Get(memo);
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
      memo = e_.Put();
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
    if (s.ok() && sink_ && e_.bytes().size() >= kPieceBytes) return Flush();
    return s;
  }

  Status Flush() {
    Status s = (*sink_)(e_.bytes());
    e_.bytes().clear();
    return s;
  }

  Status EmitNode(NodeId id) {
    auto memo = memo_.find(id);
    if (memo != memo_.end()) {
      e_.Get(memo->second);
      return Status();
    }
    const Node& n = g_.at(id);
    switch (n.kind) {
      case NodeKind::kNone: Op('N'); break;
      case NodeKind::kBool: Op(n.bool_value ? '\x88' : '\x89'); break;
      case NodeKind::kInt: Int(n.int_value); break;
      case NodeKind::kBigInt: e_.Long(DecimalToLittleEndian(n.text)); break;
      case NodeKind::kFloat: e_.Float(n.float_value); break;
      case NodeKind::kStr: Str(n.text); break;
      case NodeKind::kBytes: {
        // Protocol 2 spells bytes as _codecs.encode(latin-1 text, 'latin1').
        bool bytearray = n.class_name() == "builtins.bytearray";
        if (bytearray) Global("builtins", "bytearray");
        Global("_codecs", "encode");
        Str(Latin1ToUtf8(n.text));
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
        if (n.class_name() == "torch.Size") Global("torch", "Size");
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
        if (n.class_name() == "torch.Size") {
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
        if (n.class_name().empty()) {
          Op('}');
        } else {
          size_t dot = n.class_name().rfind('.');
          Global(n.class_name().substr(0, dot), n.class_name().substr(dot + 1));
          Op(')');
          Op('R');
        }
        Remember(id);
        OPTSTATE_RETURN_IF_ERROR(Entries(n.entries));
        if (n.state() != kNoNode) {
          OPTSTATE_RETURN_IF_ERROR(Emit(n.state()));
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
      case NodeKind::kGlobal: Global(n.module(), n.name()); return Status();
      case NodeKind::kTensor:
        // A DTensor node keeps the call that built it (_rebuild_from_type_v2 with
        // the mesh, placements and local tensor): written back as that call, the
        // local tensor inside it as an ordinary tensor.
        if (cp_.tensors[n.tensor].is_dtensor) {
          if (n.callable() == kNoNode) return UnsupportedError("a DTensor without the call that built it");
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
    OPTSTATE_RETURN_IF_ERROR(Emit(n.callable()));
    if (n.args() != kNoNode) {
      OPTSTATE_RETURN_IF_ERROR(Emit(n.args()));
    } else {
      Op(')');
    }
    if (n.call == CallOpcode::kNewObjEx) {
      if (n.kwargs() != kNoNode) {
        OPTSTATE_RETURN_IF_ERROR(Emit(n.kwargs()));
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
    if (n.state() != kNoNode) {
      OPTSTATE_RETURN_IF_ERROR(Emit(n.state()));
      Op('b');
    }
    return Status();
  }

  static constexpr size_t kPieceBytes = 1u << 20;
  const Checkpoint& cp_;
  const ObjectGraph& g_;
  const PickleSink* sink_ = nullptr;
  // 0, 1, or 2 for "more than once": all that memoizing needs, a byte a node.
  std::vector<uint8_t> refs_;
  std::vector<uint8_t> on_path_ = std::vector<uint8_t>(g_.nodes.size(), 0);  // Count's current path
  std::vector<NodeId> path_;
  static constexpr uint32_t kMaxEmitDepth = 500;  // 8 MiB of stack holds it even under ASan
  uint32_t emit_depth_ = 0;
  std::unordered_map<NodeId, uint32_t> memo_;
  // Memo index of each storage's persistent id once written, by storage index
  // (a hash map of 4 * 10^5 entries at 10^5 parameters held 17 MB).
  static constexpr uint32_t kNotWritten = UINT32_MAX;
  std::vector<uint32_t> storage_memo_;
  PickleEmitter e_;
  PickleOutput out_;
};

}  // namespace

StatusOr<PickleOutput> WriteTorchPickle(const Checkpoint& checkpoint, NodeId root) {
  Writer w(checkpoint);
  return w.Run(root, nullptr);
}

StatusOr<PickleOutput> WriteTorchPickle(const Checkpoint& checkpoint, NodeId root, const PickleSink& sink) {
  Writer w(checkpoint);
  return w.Run(root, &sink);
}

}  // namespace optstate
