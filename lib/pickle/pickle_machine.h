// The pickle machine's state and the helpers its opcodes share: the stack, the
// mark stack, the memo, node creation under limits, and depth bookkeeping.
// Internal to lib/; the opcode table (Machine::Step) is in pickle_vm.cc.
#ifndef OPTSTATE_LIB_PICKLE_MACHINE_H_
#define OPTSTATE_LIB_PICKLE_MACHINE_H_

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/file_io.h"
#include "pickle/pickle_input.h"
#include "pickle/pickle_memo.h"
#include "pickle/pickle_text.h"
#include "pickle/pickle_vm.h"
#include "pickle/recent_values.h"

namespace optstate::pickle_internal {

inline std::string OpName(uint8_t op) {
  static const char* kHex = "0123456789abcdef";
  std::string hex = "0x";
  hex += kHex[op >> 4];
  hex += kHex[op & 15];
  if (op >= 0x20 && op < 0x7f) return hex + " '" + static_cast<char>(op) + "'";
  return hex;
}

class Machine {
 public:
  Machine(ByteCursor& cursor, const PickleLimits& limits, PickleReadMode mode)
      : limits_(limits), in_(cursor, mode, result_.anomalies) {}

  // After Run failed: the objects built and globals named before the error,
  // which CPython's unpickler would already have made (and called).
  PickleResult TakePartial() { return std::move(result_); }

  StatusOr<PickleResult> Run() {
    start_ = in_.offset();
    while (true) {
      at_ = in_.offset();
      in_.StartOpcode(at_);
      if (in_.at_end()) {
        return TruncatedError("offset " + std::to_string(at_) + ": pickle ends without STOP");
      }
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t op, in_.ReadU8("opcode"));
      op_ = op;
      // A pickle of 10^6 parameters is ~10^8 opcodes and seconds of work: Ctrl-C
      // (RequestCancellation) is looked at every 2^16 of them, a relaxed load.
      if ((++opcodes_run_ & 0xffff) == 0 && CancellationRequested()) return CancelledError(Where() + "cancelled");
      result_.opcodes.set(op);
      if (op == '.') break;
      OPTSTATE_RETURN_IF_ERROR(Step(op));
    }
    // STOP returns the top of the stack, as CPython's unpicklers do: objects and
    // marks left beneath it are dropped, not an error (torch.load accepts them).
    OPTSTATE_ASSIGN_OR_RETURN(NodeId root, Pop());
    if (!stack_.empty() || !marks_.empty()) {
      Anomaly("STOP leaves " + std::to_string(stack_.size()) + " object(s) and " + std::to_string(marks_.size()) +
              " mark(s) beneath the result, which the unpickler built (and called) all the same");
    }
    result_.leftover_objects = stack_.size();
    result_.leftover_marks = marks_.size();
    result_.graph.root = root;
    result_.end_offset = in_.offset();
    return std::move(result_);
  }

 private:
  uint64_t opcodes_run_ = 0;
  std::string Where() const { return "offset " + std::to_string(at_) + ": " + OpName(op_) + ": "; }
  Status Corrupt(const std::string& what) const { return CorruptError(Where() + what); }

  ObjectGraph& graph() { return result_.graph; }

  StatusOr<NodeId> New(NodeKind kind) {
    if (graph().nodes.size() >= limits_.max_nodes) {
      return LimitExceededError(Where() + "more than " + std::to_string(limits_.max_nodes) +
                                " objects (limit max_nodes)");
    }
    Node n;
    n.kind = kind;
    n.set_offset(at_);
    graph().nodes.push_back(std::move(n));
    graph().calls_made += kind == NodeKind::kObject;
    graph().persistent_ids_made += kind == NodeKind::kPersistentId;
    depth_.push_back(1);
    return static_cast<NodeId>(graph().nodes.size() - 1);
  }

  Status Push(NodeId id) {
    if (stack_.size() >= limits_.max_stack) {
      return LimitExceededError(Where() + "stack deeper than " + std::to_string(limits_.max_stack) +
                                " (limit max_stack)");
    }
    stack_.push_back(id);
    return Status();
  }

  Status PushNew(NodeKind kind) {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(kind));
    return Push(id);
  }

  StatusOr<NodeId> Pop() {
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Corrupt("needs an object, but the stack is empty");
    NodeId id = stack_.back();
    stack_.pop_back();
    return id;
  }

  StatusOr<NodeId> Top() {
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Corrupt("needs an object, but the stack is empty");
    return stack_.back();
  }

  StatusOr<std::vector<NodeId>> PopMark() {
    if (marks_.empty()) return Corrupt("needs a MARK, but none is open");
    size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<NodeId> items(stack_.begin() + static_cast<ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  // Records that `child` now lives inside `parent`, keeping depth bounded so that
  // every later recursive walk of the graph is bounded too.
  Status Nest(NodeId parent, NodeId child) {
    const uint32_t limit = std::min(limits_.max_depth, kMaxPickleDepth);
    const uint32_t d = depth_[child] + 1u;
    if (d > limit) {
      return LimitExceededError(Where() + "objects nested deeper than " + std::to_string(limit) +
                                " levels (limit max_depth)");
    }
    if (d > depth_[parent]) depth_[parent] = static_cast<uint16_t>(d);
    return Status();
  }

  Status MakeSequence(NodeKind kind, const std::vector<NodeId>& items) {
    // A short tuple of shared ints, strs, None and booleans is as immutable as
    // they are: a tensor's size and stride, a key's shape, (16, 8) four times
    // a parameter. So is a 1-tuple of such a tuple: torch.Size's REDUCE
    // arguments, three per chunk of a DCP .metadata. Tuples holding anything
    // else keep their own node, (ptr, (16, 8)) state keys among them.
    auto shared_value = [&](NodeId i) {
      const Node& n = graph().at(i);
      return n.shared && n.kind != NodeKind::kTuple;
    };
    auto shared_value_tuple = [&](NodeId i) {
      const Node& n = graph().at(i);
      return n.shared && n.kind == NodeKind::kTuple && !n.items.empty() &&
             std::all_of(n.items.begin(), n.items.end(), shared_value);
    };
    const bool value_tuple =
        kind == NodeKind::kTuple && !items.empty() &&
        ((items.size() <= RecentValues::kMaxTupleItems && std::all_of(items.begin(), items.end(), shared_value)) ||
         (items.size() == 1 && shared_value_tuple(items[0])));
    if (value_tuple) {
      NodeId known = recent_.FindTuple(items);
      if (known != kNoNode) return Push(known);
    }
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(kind));
    if (value_tuple) {
      graph().at(id).shared = true;
      recent_.KeepTuple(items, id);
    }
    for (NodeId item : items) OPTSTATE_RETURN_IF_ERROR(Nest(id, item));
    graph().at(id).items = items;
    return Push(id);
  }

  Status AddEntries(NodeId target, const std::vector<NodeId>& flat) {
    if (flat.size() % 2 != 0) return Corrupt("odd number of items for key/value pairs");
    NodeKind k = graph().at(target).kind;
    // A global may be a live mapping (sys.modules, os.environ): CPython sets
    // the items on it, so they are kept on its node for the security scan.
    if (k != NodeKind::kDict && k != NodeKind::kObject && k != NodeKind::kGlobal) {
      return Corrupt("sets items on a " + TypeName(graph(), target) + ", which is not a mapping");
    }
    for (size_t i = 0; i < flat.size(); i += 2) {
      OPTSTATE_RETURN_IF_ERROR(Nest(target, flat[i]));
      OPTSTATE_RETURN_IF_ERROR(Nest(target, flat[i + 1]));
      graph().at(target).entries.emplace_back(flat[i], flat[i + 1]);
    }
    return Status();
  }

  Status AddItems(NodeId target, const std::vector<NodeId>& items, NodeKind want) {
    NodeKind k = graph().at(target).kind;
    if (k != want && k != NodeKind::kObject && k != NodeKind::kGlobal) {  // a global: see AddEntries
      return Corrupt("appends to a " + TypeName(graph(), target));
    }
    for (NodeId item : items) {
      OPTSTATE_RETURN_IF_ERROR(Nest(target, item));
      graph().at(target).items.push_back(item);
    }
    return Status();
  }

  // None, True, False and () are one object each in CPython, and a
  // torch.save file holds ten of them per parameter: each is one node, made
  // where it first occurs (its offset is that occurrence's). Recurring ints
  // and strs share nodes too (RecentValues). Nothing can change any of them
  // but BUILD, which gets a node of its own (UnshareTop).
  Status PushShared(NodeId& slot, NodeKind kind, bool value) {
    if (slot == kNoNode) {
      OPTSTATE_ASSIGN_OR_RETURN(slot, New(kind));
      graph().at(slot).bool_value = value;
      graph().at(slot).shared = true;
    }
    return Push(slot);
  }
  bool IsShared(NodeId id) const { return id != kNoNode && result_.graph.at(id).shared; }
  StatusOr<NodeId> UnshareTop() {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId fresh, New(NodeKind::kNone));
    Node& copy = graph().at(fresh);
    copy = graph().at(stack_.back());  // a value or a tuple of them: no extra; the arena never moves nodes
    copy.shared = false;
    copy.set_offset(at_);
    depth_[fresh] = depth_[stack_.back()];
    stack_.back() = fresh;
    return fresh;
  }

  Status PushInt(int64_t v) {
    NodeId id = recent_.FindInt(v);
    if (id == kNoNode) {
      OPTSTATE_ASSIGN_OR_RETURN(id, New(NodeKind::kInt));
      graph().at(id).int_value = v;
      graph().at(id).shared = true;
      recent_.KeepInt(v, id);
    }
    return Push(id);
  }

  Status PushText(NodeKind kind, std::string text) {
    NodeId id = kind == NodeKind::kStr ? recent_.FindStr(text) : kNoNode;
    if (id == kNoNode) {
      OPTSTATE_ASSIGN_OR_RETURN(id, New(kind));
      if (kind == NodeKind::kStr && text.size() <= RecentValues::kMaxStrBytes) {
        recent_.KeepStr(text, id);
        graph().at(id).shared = true;
      }
      graph().at(id).text = std::move(text);
    }
    return Push(id);
  }

  // LONG1 / LONG4: an int whenever it fits (LittleEndianToInt64), else its digits.
  Status PushLong(ByteSpan bytes) {
    if (std::optional<int64_t> v = LittleEndianToInt64(bytes)) return PushInt(*v);
    return PushText(NodeKind::kBigInt, LittleEndianToDecimal(bytes));
  }

  // `in_order`: BINBYTES and BYTEARRAY8 data (see PickleInput::ReadBytes).
  StatusOr<std::string> ReadSized(uint64_t n, const char* what, bool in_order = false) {
    if (n > limits_.max_string_bytes) {
      return LimitExceededError(Where() + what + " of " + std::to_string(n) + " bytes exceeds " +
                                std::to_string(limits_.max_string_bytes) + " (limit max_string_bytes)");
    }
    OPTSTATE_ASSIGN_OR_RETURN(ByteSpan b, in_.ReadBytes(n, what, in_order));
    return std::string(AsChars(b));
  }

  // PUT, BINPUT, LONG_BINPUT, MEMOIZE: the top of the stack under `index`.
  Status MemoizeTop(uint64_t index);
  Status Memoize(uint64_t index, NodeId id) {
    if (memo_.size() >= limits_.max_memo && !memo_.contains(index)) {
      return LimitExceededError(Where() + "more than " + std::to_string(limits_.max_memo) +
                                " memo entries (limit max_memo)");
    }
    memo_.Set(index, id);
    // A memoized int or str is one object the pickle refers to again by index
    // (torch 2.x memoizes 'exp_avg' once for all its state dicts): its node
    // becomes that object's alone, so the writer memoizes it in turn, and later
    // unmemoized occurrences of the value get a node of their own. A short
    // tuple of such values stays shared: torch's pickler memoizes every tuple
    // but reads back almost none (each tensor's size and stride, DCP's chunk
    // offsets are new objects), and a value tuple written afresh where the
    // input said BINGET is equal, if a few bytes longer.
    Node& n = graph().at(id);
    if (n.shared && n.kind == NodeKind::kInt) {
      recent_.ForgetInt(n.int_value);
      n.shared = false;
    } else if (n.shared && n.kind == NodeKind::kStr) {
      recent_.ForgetStr(n.text);
      n.shared = false;
    }
    return Status();
  }

  Status MemoGet(uint64_t index) {
    std::optional<NodeId> it = memo_.Get(index);
    if (!it) {
      return Corrupt("memo index " + std::to_string(index) + " was never stored");
    }
    CountRepeat(*it);
    return Push(*it);
  }

  // See PickleResult::compound_repeats. Values and globals are leaves.
  void CountRepeat(NodeId id) {
    switch (graph().at(id).kind) {
      case NodeKind::kTuple:
      case NodeKind::kList:
      case NodeKind::kDict:
      case NodeKind::kSet:
      case NodeKind::kFrozenSet:
      case NodeKind::kObject: ++result_.compound_repeats; break;
      default: break;
    }
  }

  void Anomaly(std::string what) { result_.anomalies.push_back({at_, std::move(what)}); }

  Status PushGlobal(std::string module, std::string name) {
    result_.globals.push_back({module, name, at_, OpName(op_)});
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kGlobal));
    graph().at(id).set_global(module, name);
    return Push(id);
  }

  Status PushCall(CallOpcode call, NodeId callable, NodeId args, NodeId kwargs) {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kObject));
    Node& n = graph().at(id);
    n.call = call;
    n.set_callable(callable);
    n.set_args(args);
    if (kwargs != kNoNode) n.extra().kwargs = kwargs;
    for (NodeId child : {callable, args, kwargs}) {
      if (child != kNoNode) OPTSTATE_RETURN_IF_ERROR(Nest(id, child));
    }
    return Push(id);
  }

  StatusOr<NodeId> TupleOf(const std::vector<NodeId>& items) {
    OPTSTATE_RETURN_IF_ERROR(MakeSequence(NodeKind::kTuple, items));
    return Pop();
  }

  StatusOr<std::string> LineArg(const char* what) {
    OPTSTATE_ASSIGN_OR_RETURN(std::string_view line, in_.ReadLine(what));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return std::string(line);
  }

  StatusOr<uint64_t> DecimalLine(const char* what) {
    OPTSTATE_ASSIGN_OR_RETURN(std::string line, LineArg(what));
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || end != line.data() + line.size()) {
      return Corrupt(std::string(what) + " '" + line.substr(0, 40) + "' is not a decimal number");
    }
    return v;
  }

  Status Step(uint8_t op);

  const PickleLimits& limits_;
  PickleResult result_;  // before in_, which records anomalies into it
  PickleInput in_;
  uint64_t start_ = 0;  // offset of the first opcode
  bool seen_proto_ = false;
  std::vector<NodeId> stack_;
  std::vector<size_t> marks_;
  // Nesting depth below and including each node, by NodeId (at most
  // kMaxPickleDepth, so 16 bits): only Nest reads it, so it lives here for the
  // parse rather than in every node for good.
  std::vector<uint16_t> depth_;
  Memo memo_;
  NodeId none_ = kNoNode, true_ = kNoNode, false_ = kNoNode, empty_tuple_ = kNoNode;  // see PushShared
  RecentValues recent_;
  uint64_t at_ = 0;
  uint8_t op_ = 0;
};

}  // namespace optstate::pickle_internal

#endif  // OPTSTATE_LIB_PICKLE_MACHINE_H_
