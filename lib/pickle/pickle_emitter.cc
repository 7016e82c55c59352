#include "pickle/pickle_emitter.h"

#include <bit>

#include "pickle/pickle_text.h"

namespace optstate {

void PickleEmitter::U32(uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes_ += static_cast<char>((v >> (8 * i)) & 0xFF);
}

namespace {

// A memo opcode with its index: the one-byte form (BINPUT 'q', BINGET 'h')
// below 256, else the four-byte one (LONG_BINPUT 'r', LONG_BINGET 'j').
void MemoOp(PickleEmitter& e, char one_byte_op, char four_byte_op, uint32_t index) {
  if (index < 256) {
    e.Op(one_byte_op);
    e.Op(static_cast<char>(index));
  } else {
    e.Op(four_byte_op);
    e.U32(index);
  }
}

}  // namespace

uint32_t PickleEmitter::Put() {
  uint32_t index = next_memo_++;
  MemoOp(*this, 'q', 'r', index);
  return index;
}

void PickleEmitter::Get(uint32_t index) { MemoOp(*this, 'h', 'j', index); }

void PickleEmitter::Int(int64_t v) {
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
    Long(DecimalToLittleEndian(std::to_string(v)));
  }
}

void PickleEmitter::Long(const std::string& little_endian) {
  if (little_endian.size() < 256) {
    Op('\x8a');
    Op(static_cast<char>(little_endian.size()));
  } else {
    Op('\x8b');
    U32(static_cast<uint32_t>(little_endian.size()));
  }
  bytes_ += little_endian;
}

void PickleEmitter::Float(double v) {
  Op('G');
  uint64_t bits = std::bit_cast<uint64_t>(v);
  for (int i = 7; i >= 0; --i) bytes_ += static_cast<char>((bits >> (8 * i)) & 0xFF);
}

void PickleEmitter::Str(const std::string& s) {
  Op('X');
  U32(static_cast<uint32_t>(s.size()));
  bytes_ += s;
}

void PickleEmitter::IntTuple(const std::vector<int64_t>& v) {
  if (v.empty()) return Op(')');
  Op('(');
  for (int64_t x : v) Int(x);
  Op('t');
}

bool PickleEmitter::Global(std::string_view module, std::string_view name) {
  std::string key = std::string(module) + "\n" + std::string(name);
  auto it = globals_.find(key);
  if (it != globals_.end()) {
    Get(it->second);
    return false;
  }
  Op('c');
  bytes_ += key;
  Op('\n');
  globals_[key] = Put();
  return true;
}

}  // namespace optstate
