// Pickle opcodes written out, protocol 2: the encoding half of pickle writing,
// with no idea of what the objects mean (torch/pickle_writer.cc decides that).
// Integers take the shortest opcode that holds them, strings are BINUNICODE,
// and globals are memoized so each module.name is spelled once.
#ifndef OPTSTATE_PICKLE_PICKLE_EMITTER_H_
#define OPTSTATE_PICKLE_PICKLE_EMITTER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace optstate {

class PickleEmitter {
 public:
  // One opcode byte (or any single byte of an argument).
  void Op(char c) { bytes_ += c; }
  // Bytes appended as they are.
  void Raw(std::string_view bytes) { bytes_ += bytes; }
  void U32(uint32_t v);

  // BINPUT/LONG_BINPUT of the object on top of the stack under the next memo
  // index, which it returns.
  uint32_t Put();
  // BINGET/LONG_BINGET of a memo index.
  void Get(uint32_t index);

  void Int(int64_t v);
  // LONG1/LONG4 of little-endian two's complement bytes.
  void Long(const std::string& little_endian);
  void Float(double v);  // BINFLOAT, big-endian
  void Str(const std::string& s);
  void IntTuple(const std::vector<int64_t>& v);
  // GLOBAL module.name, or a BINGET of it when it was written before. True the
  // first time a module.name is written.
  bool Global(std::string_view module, std::string_view name);

  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
  uint32_t next_memo_ = 0;
  std::unordered_map<std::string, uint32_t> globals_;
};

}  // namespace optstate

#endif  // OPTSTATE_PICKLE_PICKLE_EMITTER_H_
