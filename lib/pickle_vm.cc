// The pickle machine: a stack, a mark stack and a memo, as in Python's pickle
// module, except that nothing is ever imported or called. Opcode semantics follow
// the pickle specification (Lib/pickletools.py documents each opcode).
#include "optstate/pickle_vm.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "pickle_text.h"

namespace optstate {
namespace {

std::string OpName(uint8_t op) {
  static const char* kHex = "0123456789abcdef";
  std::string hex = "0x";
  hex += kHex[op >> 4];
  hex += kHex[op & 15];
  if (op >= 0x20 && op < 0x7f) return hex + " '" + static_cast<char>(op) + "'";
  return hex;
}

class Machine {
 public:
  Machine(ByteCursor& cursor, const PickleLimits& limits) : in_(cursor), limits_(limits) {}

  StatusOr<PickleResult> Run() {
    while (true) {
      at_ = in_.offset();
      if (in_.at_end()) {
        return TruncatedError("offset " + std::to_string(at_) + ": pickle ends without STOP");
      }
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t op, in_.ReadU8("opcode"));
      op_ = op;
      if (op == '.') break;
      OPTSTATE_RETURN_IF_ERROR(Step(op));
    }
    OPTSTATE_ASSIGN_OR_RETURN(NodeId root, Pop());
    if (!stack_.empty() || !marks_.empty()) {
      return CorruptError(Where() + "STOP with " + std::to_string(stack_.size()) +
                          " objects and " + std::to_string(marks_.size()) + " marks left over");
    }
    result_.graph.root = root;
    result_.end_offset = in_.offset();
    return std::move(result_);
  }

 private:
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
    n.offset = at_;
    graph().nodes.push_back(std::move(n));
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
    uint32_t d = graph().at(child).depth + 1;
    Node& p = graph().at(parent);
    if (d > p.depth) p.depth = d;
    if (p.depth > limits_.max_depth) {
      return LimitExceededError(Where() + "objects nested deeper than " +
                                std::to_string(limits_.max_depth) + " levels (limit max_depth)");
    }
    return Status();
  }

  Status MakeSequence(NodeKind kind, const std::vector<NodeId>& items) {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(kind));
    for (NodeId item : items) OPTSTATE_RETURN_IF_ERROR(Nest(id, item));
    graph().at(id).items = items;
    return Push(id);
  }

  Status AddEntries(NodeId target, const std::vector<NodeId>& flat) {
    if (flat.size() % 2 != 0) return Corrupt("odd number of items for key/value pairs");
    NodeKind k = graph().at(target).kind;
    if (k != NodeKind::kDict && k != NodeKind::kObject) {
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
    if (k != want && k != NodeKind::kObject) {
      return Corrupt("appends to a " + TypeName(graph(), target));
    }
    for (NodeId item : items) {
      OPTSTATE_RETURN_IF_ERROR(Nest(target, item));
      graph().at(target).items.push_back(item);
    }
    return Status();
  }

  Status PushInt(int64_t v) {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kInt));
    graph().at(id).int_value = v;
    return Push(id);
  }

  Status PushText(NodeKind kind, std::string text) {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(kind));
    graph().at(id).text = std::move(text);
    return Push(id);
  }

  // A little-endian two's complement integer of any length (LONG1 / LONG4).
  Status PushLong(ByteSpan bytes) {
    if (bytes.size() <= 8) {
      uint64_t u = 0;
      for (size_t i = 0; i < bytes.size(); ++i) u |= static_cast<uint64_t>(bytes[i]) << (8 * i);
      if (!bytes.empty() && bytes.size() < 8 && (static_cast<uint8_t>(bytes.back()) & 0x80)) {
        u |= ~uint64_t{0} << (8 * bytes.size());  // sign-extend
      }
      return PushInt(static_cast<int64_t>(u));
    }
    return PushText(NodeKind::kBigInt, LittleEndianToDecimal(bytes));
  }

  StatusOr<std::string> ReadSized(uint64_t n, const char* what) {
    if (n > limits_.max_string_bytes) {
      return LimitExceededError(Where() + what + " of " + std::to_string(n) + " bytes exceeds " +
                                std::to_string(limits_.max_string_bytes) + " (limit max_string_bytes)");
    }
    OPTSTATE_ASSIGN_OR_RETURN(ByteSpan b, in_.ReadBytes(n, what));
    return std::string(AsChars(b));
  }

  Status Memoize(uint64_t index, NodeId id) {
    if (memo_.size() >= limits_.max_memo && !memo_.contains(index)) {
      return LimitExceededError(Where() + "more than " + std::to_string(limits_.max_memo) +
                                " memo entries (limit max_memo)");
    }
    memo_[index] = id;
    return Status();
  }

  Status MemoGet(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) {
      return Corrupt("memo index " + std::to_string(index) + " was never stored");
    }
    return Push(it->second);
  }

  Status PushGlobal(std::string module, std::string name) {
    result_.globals.push_back({module, name, at_, OpName(op_)});
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kGlobal));
    graph().at(id).module = std::move(module);
    graph().at(id).name = std::move(name);
    return Push(id);
  }

  Status PushCall(CallOpcode call, NodeId callable, NodeId args, NodeId kwargs) {
    OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kObject));
    Node& n = graph().at(id);
    n.call = call;
    n.callable = callable;
    n.args = args;
    n.kwargs = kwargs;
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

  ByteCursor& in_;
  const PickleLimits& limits_;
  PickleResult result_;
  std::vector<NodeId> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, NodeId> memo_;
  uint64_t at_ = 0;
  uint8_t op_ = 0;
};

Status Machine::Step(uint8_t op) {
  switch (op) {
    // Framing and protocol.
    case 0x80: {  // PROTO
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t v, in_.ReadU8("PROTO version"));
      if (v > 5) return UnsupportedError(Where() + "pickle protocol " + std::to_string(v));
      result_.protocol = v;
      return Status();
    }
    case 0x95: {  // FRAME: a length hint; the frame's opcodes follow inline
      OPTSTATE_ASSIGN_OR_RETURN(uint64_t n, in_.ReadU64LE("FRAME length"));
      if (n > in_.remaining()) {
        return TruncatedError(Where() + "frame of " + std::to_string(n) + " bytes, " +
                              std::to_string(in_.remaining()) + " left");
      }
      return Status();
    }
    // Stack manipulation.
    case '(':
      if (marks_.size() >= limits_.max_depth) {
        return LimitExceededError(Where() + "more than " + std::to_string(limits_.max_depth) +
                                  " open marks (limit max_depth)");
      }
      marks_.push_back(stack_.size());
      return Status();
    case '0':  // POP: an empty frame above a mark pops the mark itself
      if (!marks_.empty() && marks_.back() == stack_.size()) {
        marks_.pop_back();
        return Status();
      }
      return Pop().status();
    case '1': return PopMark().status();  // POP_MARK
    case '2': {                           // DUP
      OPTSTATE_ASSIGN_OR_RETURN(NodeId top, Top());
      return Push(top);
    }
    // Scalars.
    case 'N': return PushNew(NodeKind::kNone);
    case 0x88:
    case 0x89: {
      OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kBool));
      graph().at(id).bool_value = op == 0x88;
      return Push(id);
    }
    case 'J': {
      OPTSTATE_ASSIGN_OR_RETURN(int32_t v, in_.ReadI32LE("BININT argument"));
      return PushInt(v);
    }
    case 'K': {
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t v, in_.ReadU8("BININT1 argument"));
      return PushInt(v);
    }
    case 'M': {
      OPTSTATE_ASSIGN_OR_RETURN(uint16_t v, in_.ReadU16LE("BININT2 argument"));
      return PushInt(v);
    }
    case 0x8a: {  // LONG1
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t n, in_.ReadU8("LONG1 length"));
      OPTSTATE_ASSIGN_OR_RETURN(ByteSpan b, in_.ReadBytes(n, "LONG1 digits"));
      return PushLong(b);
    }
    case 0x8b: {  // LONG4
      OPTSTATE_ASSIGN_OR_RETURN(int32_t n, in_.ReadI32LE("LONG4 length"));
      if (n < 0) return Corrupt("negative length " + std::to_string(n));
      if (static_cast<uint64_t>(n) > limits_.max_string_bytes) {
        return LimitExceededError(Where() + "integer of " + std::to_string(n) +
                                  " bytes (limit max_string_bytes)");
      }
      OPTSTATE_ASSIGN_OR_RETURN(ByteSpan b, in_.ReadBytes(static_cast<uint64_t>(n), "LONG4 digits"));
      return PushLong(b);
    }
    case 'G': {
      OPTSTATE_ASSIGN_OR_RETURN(double v, in_.ReadF64BE("BINFLOAT argument"));
      OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kFloat));
      graph().at(id).float_value = v;
      return Push(id);
    }
    // Text-mode scalars (protocol 0).
    case 'I':
    case 'L': {
      OPTSTATE_ASSIGN_OR_RETURN(std::string line, LineArg(op == 'I' ? "INT argument" : "LONG argument"));
      if (op == 'I' && (line == "00" || line == "01")) {  // protocol 0 booleans
        OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kBool));
        graph().at(id).bool_value = line == "01";
        return Push(id);
      }
      if (op == 'L' && !line.empty() && line.back() == 'L') line.pop_back();
      OPTSTATE_ASSIGN_OR_RETURN(DecimalInt v, ParseDecimalInt(line));
      if (v.fits) return PushInt(v.value);
      return PushText(NodeKind::kBigInt, std::move(v.digits));
    }
    case 'F': {
      OPTSTATE_ASSIGN_OR_RETURN(std::string line, LineArg("FLOAT argument"));
      char* end = nullptr;
      double v = std::strtod(line.c_str(), &end);
      if (line.empty() || end != line.c_str() + line.size()) {
        return Corrupt("'" + line.substr(0, 40) + "' is not a float");
      }
      OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kFloat));
      graph().at(id).float_value = v;
      return Push(id);
    }
    case 'S': {
      OPTSTATE_ASSIGN_OR_RETURN(std::string line, LineArg("STRING argument"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, DecodeStringRepr(line));
      return PushText(NodeKind::kStr, Latin1ToUtf8(s));
    }
    case 'V': {
      OPTSTATE_ASSIGN_OR_RETURN(std::string line, LineArg("UNICODE argument"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, DecodeRawUnicodeEscape(line));
      return PushText(NodeKind::kStr, std::move(s));
    }
    // Strings and bytes with binary lengths.
    case 'T': {  // BINSTRING: Python 2 str, decoded as latin-1 here
      OPTSTATE_ASSIGN_OR_RETURN(int32_t n, in_.ReadI32LE("BINSTRING length"));
      if (n < 0) return Corrupt("negative length " + std::to_string(n));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(static_cast<uint64_t>(n), "BINSTRING"));
      return PushText(NodeKind::kStr, Latin1ToUtf8(s));
    }
    case 'U': {
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t n, in_.ReadU8("SHORT_BINSTRING length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, "SHORT_BINSTRING"));
      return PushText(NodeKind::kStr, Latin1ToUtf8(s));
    }
    case 'X': {
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t n, in_.ReadU32LE("BINUNICODE length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, "BINUNICODE"));
      return PushText(NodeKind::kStr, std::move(s));
    }
    case 0x8c: {
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t n, in_.ReadU8("SHORT_BINUNICODE length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, "SHORT_BINUNICODE"));
      return PushText(NodeKind::kStr, std::move(s));
    }
    case 0x8d: {
      OPTSTATE_ASSIGN_OR_RETURN(uint64_t n, in_.ReadU64LE("BINUNICODE8 length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, "BINUNICODE8"));
      return PushText(NodeKind::kStr, std::move(s));
    }
    case 'B': {
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t n, in_.ReadU32LE("BINBYTES length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, "BINBYTES"));
      return PushText(NodeKind::kBytes, std::move(s));
    }
    case 'C': {
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t n, in_.ReadU8("SHORT_BINBYTES length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, "SHORT_BINBYTES"));
      return PushText(NodeKind::kBytes, std::move(s));
    }
    case 0x8e:
    case 0x96: {  // BINBYTES8, BYTEARRAY8
      OPTSTATE_ASSIGN_OR_RETURN(uint64_t n, in_.ReadU64LE("BINBYTES8 length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, op == 0x8e ? "BINBYTES8" : "BYTEARRAY8"));
      OPTSTATE_RETURN_IF_ERROR(PushText(NodeKind::kBytes, std::move(s)));
      if (op == 0x96) graph().at(stack_.back()).class_name = "builtins.bytearray";
      return Status();
    }
    case 0x97:
    case 0x98:
      return UnsupportedError(Where() + "out-of-band pickle buffers cannot come from a file");
    // Containers.
    case ')': return MakeSequence(NodeKind::kTuple, {});
    case 't': {
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> items, PopMark());
      return MakeSequence(NodeKind::kTuple, items);
    }
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1..3
      std::vector<NodeId> items(static_cast<size_t>(op - 0x84));
      for (size_t i = items.size(); i-- > 0;) {
        OPTSTATE_ASSIGN_OR_RETURN(items[i], Pop());
      }
      return MakeSequence(NodeKind::kTuple, items);
    }
    case ']': return MakeSequence(NodeKind::kList, {});
    case 'l': {
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> items, PopMark());
      return MakeSequence(NodeKind::kList, items);
    }
    case 'a': {
      OPTSTATE_ASSIGN_OR_RETURN(NodeId item, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId list, Top());
      return AddItems(list, {item}, NodeKind::kList);
    }
    case 'e': {
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> items, PopMark());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId list, Top());
      return AddItems(list, items, NodeKind::kList);
    }
    case '}': return PushNew(NodeKind::kDict);
    case 'd': {
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> flat, PopMark());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId dict, New(NodeKind::kDict));
      OPTSTATE_RETURN_IF_ERROR(AddEntries(dict, flat));
      return Push(dict);
    }
    case 's': {
      OPTSTATE_ASSIGN_OR_RETURN(NodeId value, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId key, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId dict, Top());
      return AddEntries(dict, {key, value});
    }
    case 'u': {
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> flat, PopMark());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId dict, Top());
      return AddEntries(dict, flat);
    }
    case 0x8f: return PushNew(NodeKind::kSet);
    case 0x90: {  // ADDITEMS
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> items, PopMark());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId set, Top());
      return AddItems(set, items, NodeKind::kSet);
    }
    case 0x91: {  // FROZENSET
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> items, PopMark());
      return MakeSequence(NodeKind::kFrozenSet, items);
    }
    // Memo.
    case 'g': {
      OPTSTATE_ASSIGN_OR_RETURN(uint64_t i, DecimalLine("GET index"));
      return MemoGet(i);
    }
    case 'h': {
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t i, in_.ReadU8("BINGET index"));
      return MemoGet(i);
    }
    case 'j': {
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t i, in_.ReadU32LE("LONG_BINGET index"));
      return MemoGet(i);
    }
    case 'p': {
      OPTSTATE_ASSIGN_OR_RETURN(uint64_t i, DecimalLine("PUT index"));
      OPTSTATE_ASSIGN_OR_RETURN(NodeId top, Top());
      return Memoize(i, top);
    }
    case 'q': {
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t i, in_.ReadU8("BINPUT index"));
      OPTSTATE_ASSIGN_OR_RETURN(NodeId top, Top());
      return Memoize(i, top);
    }
    case 'r': {
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t i, in_.ReadU32LE("LONG_BINPUT index"));
      OPTSTATE_ASSIGN_OR_RETURN(NodeId top, Top());
      return Memoize(i, top);
    }
    case 0x94: {  // MEMOIZE
      OPTSTATE_ASSIGN_OR_RETURN(NodeId top, Top());
      return Memoize(memo_.size(), top);
    }
    // Globals and calls: recorded, never performed.
    case 'c': {
      OPTSTATE_ASSIGN_OR_RETURN(std::string module, LineArg("GLOBAL module"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string name, LineArg("GLOBAL name"));
      return PushGlobal(std::move(module), std::move(name));
    }
    case 0x93: {  // STACK_GLOBAL
      OPTSTATE_ASSIGN_OR_RETURN(NodeId name, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId module, Pop());
      if (graph().at(name).kind != NodeKind::kStr || graph().at(module).kind != NodeKind::kStr) {
        return Corrupt("module and name must be strings, found " + TypeName(graph(), module) +
                       " and " + TypeName(graph(), name));
      }
      return PushGlobal(graph().at(module).text, graph().at(name).text);
    }
    case 'i': {  // INST: module and name inline, arguments above the mark
      OPTSTATE_ASSIGN_OR_RETURN(std::string module, LineArg("INST module"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string name, LineArg("INST name"));
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> items, PopMark());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId args, TupleOf(items));
      OPTSTATE_RETURN_IF_ERROR(PushGlobal(std::move(module), std::move(name)));
      OPTSTATE_ASSIGN_OR_RETURN(NodeId cls, Pop());
      return PushCall(CallOpcode::kInst, cls, args, kNoNode);
    }
    case 'o': {  // OBJ: class and arguments above the mark
      OPTSTATE_ASSIGN_OR_RETURN(std::vector<NodeId> items, PopMark());
      if (items.empty()) return Corrupt("OBJ without a class");
      NodeId cls = items.front();
      OPTSTATE_ASSIGN_OR_RETURN(NodeId args, TupleOf({items.begin() + 1, items.end()}));
      return PushCall(CallOpcode::kObj, cls, args, kNoNode);
    }
    case 'R': {
      OPTSTATE_ASSIGN_OR_RETURN(NodeId args, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId callable, Pop());
      return PushCall(CallOpcode::kReduce, callable, args, kNoNode);
    }
    case 0x81: {
      OPTSTATE_ASSIGN_OR_RETURN(NodeId args, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId cls, Pop());
      return PushCall(CallOpcode::kNewObj, cls, args, kNoNode);
    }
    case 0x92: {
      OPTSTATE_ASSIGN_OR_RETURN(NodeId kwargs, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId args, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId cls, Pop());
      return PushCall(CallOpcode::kNewObjEx, cls, args, kwargs);
    }
    case 'b': {  // BUILD
      OPTSTATE_ASSIGN_OR_RETURN(NodeId state, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId target, Top());
      OPTSTATE_RETURN_IF_ERROR(Nest(target, state));
      graph().at(target).state = state;
      return Status();
    }
    case 0x82:
    case 0x83:
    case 0x84: {  // EXT1/2/4: a code in copyreg's extension registry, which we cannot see
      uint32_t code = 0;
      if (op == 0x82) {
        OPTSTATE_ASSIGN_OR_RETURN(code, in_.ReadU8("EXT1 code"));
      } else if (op == 0x83) {
        OPTSTATE_ASSIGN_OR_RETURN(code, in_.ReadU16LE("EXT2 code"));
      } else {
        OPTSTATE_ASSIGN_OR_RETURN(code, in_.ReadU32LE("EXT4 code"));
      }
      return PushGlobal("copyreg._extension_registry", std::to_string(code));
    }
    // Persistent ids: torch's storage references.
    case 'P': {
      OPTSTATE_ASSIGN_OR_RETURN(std::string line, LineArg("PERSID argument"));
      OPTSTATE_RETURN_IF_ERROR(PushText(NodeKind::kStr, std::move(line)));
      [[fallthrough]];
    }
    case 'Q': {
      OPTSTATE_ASSIGN_OR_RETURN(NodeId pid, Pop());
      OPTSTATE_ASSIGN_OR_RETURN(NodeId id, New(NodeKind::kPersistentId));
      graph().at(id).args = pid;
      OPTSTATE_RETURN_IF_ERROR(Nest(id, pid));
      return Push(id);
    }
    default:
      return Corrupt("unknown opcode");
  }
}

}  // namespace

StatusOr<PickleResult> ReadPickle(ByteCursor& cursor, const PickleLimits& limits) {
  Machine machine(cursor, limits);
  return machine.Run();
}

}  // namespace optstate
