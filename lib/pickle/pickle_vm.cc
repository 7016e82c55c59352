// The pickle machine: a stack, a mark stack and a memo, as in Python's pickle
// module, except that nothing is ever imported or called. Opcode semantics follow
// the pickle specification (Lib/pickletools.py documents each opcode).
#include "pickle/pickle_vm.h"

#include <cstdlib>
#include <string>

#include "io/byte_cursor.h"
#include "pickle/pickle_machine.h"

namespace optstate {
namespace pickle_internal {
namespace {

// An opcode whose operand is one number: `act` on it once read, or the read's error.
template <typename T, typename Act>
Status WithOperand(StatusOr<T> operand, Act act) {
  if (!operand.ok()) return std::move(operand).status();
  return act(*operand);
}

}  // namespace

Status Machine::MemoizeTop(uint64_t index) {
  OPTSTATE_ASSIGN_OR_RETURN(NodeId top, Top());
  return Memoize(index, top);
}

Status Machine::Step(uint8_t op) {
  switch (op) {
    // Framing and protocol.
    case 0x80: {  // PROTO
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t v, in_.ReadU8("PROTO version"));
      if (v > 5) return UnsupportedError(Where() + "pickle protocol " + std::to_string(v));
      // Picklers write one PROTO, first (protocol 2 and later); both unpicklers
      // take any number anywhere, and scanners that stop at a second one miss
      // what follows.
      if (at_ != start_) {
        Anomaly(seen_proto_ ? "a second PROTO (protocol " + std::to_string(v) + ")"
                            : "PROTO " + std::to_string(v) + " is not the first opcode");
      }
      seen_proto_ = true;
      result_.protocol = v;
      return Status();
    }
    case 0x95: {  // FRAME: a length hint; the frame's opcodes follow inline
      OPTSTATE_ASSIGN_OR_RETURN(uint64_t n, in_.ReadU64LE("FRAME length"));
      return in_.Frame(n, at_);
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
      CountRepeat(top);
      return Push(top);
    }
    // Scalars.
    case 'N': return PushShared(none_, NodeKind::kNone, false);
    case 0x88: return PushShared(true_, NodeKind::kBool, true);
    case 0x89: return PushShared(false_, NodeKind::kBool, false);
    case 'J': return WithOperand(in_.ReadI32LE("BININT argument"), [this](int64_t v) { return PushInt(v); });
    case 'K': return WithOperand(in_.ReadU8("BININT1 argument"), [this](int64_t v) { return PushInt(v); });
    case 'M': return WithOperand(in_.ReadU16LE("BININT2 argument"), [this](int64_t v) { return PushInt(v); });
    case 0x8a: {  // LONG1
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t n, in_.ReadU8("LONG1 length"));
      OPTSTATE_ASSIGN_OR_RETURN(ByteSpan b, in_.ReadBytes(n, "LONG1 digits"));
      return PushLong(b);
    }
    case 0x8b: {  // LONG4
      OPTSTATE_ASSIGN_OR_RETURN(int32_t n, in_.ReadI32LE("LONG4 length"));
      if (n < 0) return Corrupt("negative length " + std::to_string(n));
      if (static_cast<uint64_t>(n) > limits_.max_long_bytes) {
        return LimitExceededError(Where() + "integer of " + std::to_string(n) +
                                  " bytes (limit max_long_bytes, " + std::to_string(limits_.max_long_bytes) + ")");
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
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, "BINBYTES", /*in_order=*/true));
      return PushText(NodeKind::kBytes, std::move(s));
    }
    case 'C': {
      OPTSTATE_ASSIGN_OR_RETURN(uint8_t n, in_.ReadU8("SHORT_BINBYTES length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, "SHORT_BINBYTES", /*in_order=*/true));
      return PushText(NodeKind::kBytes, std::move(s));
    }
    case 0x8e:
    case 0x96: {  // BINBYTES8, BYTEARRAY8
      OPTSTATE_ASSIGN_OR_RETURN(uint64_t n, in_.ReadU64LE("BINBYTES8 length"));
      OPTSTATE_ASSIGN_OR_RETURN(std::string s, ReadSized(n, op == 0x8e ? "BINBYTES8" : "BYTEARRAY8", /*in_order=*/true));
      OPTSTATE_RETURN_IF_ERROR(PushText(NodeKind::kBytes, std::move(s)));
      if (op == 0x96) graph().at(stack_.back()).set_class_name(CompactText::Common("builtins.bytearray"));
      return Status();
    }
    case 0x97:
    case 0x98:
      return UnsupportedError(Where() + "out-of-band pickle buffers cannot come from a file");
    // Containers.
    case ')': return PushShared(empty_tuple_, NodeKind::kTuple, false);
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
    case 'g': return WithOperand(DecimalLine("GET index"), [this](uint64_t i) { return MemoGet(i); });
    case 'h': return WithOperand(in_.ReadU8("BINGET index"), [this](uint64_t i) { return MemoGet(i); });
    case 'j': return WithOperand(in_.ReadU32LE("LONG_BINGET index"), [this](uint64_t i) { return MemoGet(i); });
    case 'p': return WithOperand(DecimalLine("PUT index"), [this](uint64_t i) { return MemoizeTop(i); });
    case 'q': return WithOperand(in_.ReadU8("BINPUT index"), [this](uint64_t i) { return MemoizeTop(i); });
    case 'r': return WithOperand(in_.ReadU32LE("LONG_BINPUT index"), [this](uint64_t i) { return MemoizeTop(i); });
    case 0x94: return MemoizeTop(memo_.size());  // MEMOIZE
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
      if (IsShared(target)) {
        OPTSTATE_ASSIGN_OR_RETURN(target, UnshareTop());
      }
      OPTSTATE_RETURN_IF_ERROR(Nest(target, state));
      graph().at(target).extra().state = state;
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
      graph().at(id).set_args(pid);
      OPTSTATE_RETURN_IF_ERROR(Nest(id, pid));
      return Push(id);
    }
    default:
      return Corrupt("unknown opcode");
  }
}

}  // namespace pickle_internal

StatusOr<PickleResult> ReadPickle(ByteCursor& cursor, const PickleLimits& limits, PickleResult* partial,
                                  PickleReadMode mode) {
  pickle_internal::Machine machine(cursor, limits, mode);
  StatusOr<PickleResult> result = machine.Run();
  if (!result.ok() && partial != nullptr) *partial = machine.TakePartial();
  return result;
}

}  // namespace optstate
