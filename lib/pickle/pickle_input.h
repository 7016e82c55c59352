// How the bytes of a pickle reach the unpickler, FRAMEs included.
//
// A FRAME says "the next n bytes are one frame". Pickle readers differ in what
// they do when an opcode's argument runs past a frame's end, and the difference
// is what a FRAME trick uses:
//   kStream     pickle.loads(bytes), or a file with peek() (torch.load of a
//               legacy file by path): bytes in order, frames only a hint.
//   kFileNoPeek CPython's C unpickler reading a file without peek(), which is
//               how torch.load reads a zip's data.pkl (an io.BytesIO): a FRAME
//               fills its buffer with the frame; a read the rest of the buffer
//               cannot satisfy drops that rest and reads on from the file after
//               the frame (a text line likewise); BINBYTES and BYTEARRAY8 data
//               (_Unpickler_ReadInto) take the rest first and go on in order.
// Either way a crossing is recorded: no pickler writes one, and the other
// reader sees other opcodes.
// Internal to lib/pickle.
#ifndef OPTSTATE_LIB_PICKLE_INPUT_H_
#define OPTSTATE_LIB_PICKLE_INPUT_H_

#include <string>
#include <string_view>
#include <vector>

#include "io/byte_cursor.h"
#include "pickle/pickle_vm.h"

namespace optstate::pickle_internal {

class PickleInput {
 public:
  PickleInput(ByteCursor& cursor, PickleReadMode mode, std::vector<PickleAnomaly>& anomalies)
      : in_(cursor), mode_(mode), anomalies_(anomalies) {}

  uint64_t offset() const { return in_.offset(); }
  size_t remaining() const { return in_.remaining(); }
  bool at_end() const { return in_.at_end(); }

  // The opcode being read (for the anomalies' offsets).
  void StartOpcode(uint64_t at) { opcode_at_ = at; }

  // One fixed-size field: one read of the C unpickler's buffer.
  StatusOr<uint8_t> ReadU8(std::string_view what) { return Fixed<uint8_t, &ByteCursor::ReadU8>(what); }
  StatusOr<uint16_t> ReadU16LE(std::string_view what) { return Fixed<uint16_t, &ByteCursor::ReadU16LE>(what); }
  StatusOr<uint32_t> ReadU32LE(std::string_view what) { return Fixed<uint32_t, &ByteCursor::ReadU32LE>(what); }
  StatusOr<int32_t> ReadI32LE(std::string_view what) { return Fixed<int32_t, &ByteCursor::ReadI32LE>(what); }
  StatusOr<uint64_t> ReadU64LE(std::string_view what) { return Fixed<uint64_t, &ByteCursor::ReadU64LE>(what); }
  StatusOr<double> ReadF64BE(std::string_view what) { return Fixed<double, &ByteCursor::ReadF64BE>(what); }
  // `in_order`: the C unpickler's _Unpickler_ReadInto (BINBYTES, BYTEARRAY8).
  StatusOr<ByteSpan> ReadBytes(uint64_t n, std::string_view what, bool in_order = false) {
    if (in_order) {
      Crossing(n);  // recorded, nothing dropped
    } else {
      OPTSTATE_RETURN_IF_ERROR(Fetch(n));
    }
    return Done(in_.ReadBytes(n, what));
  }
  StatusOr<std::string_view> ReadLine(std::string_view what) {
    if (frame_end_ != 0) {
      const std::string_view rest = AsChars(in_.data().subspan(in_.position(), frame_end_ - in_.offset()));
      if (rest.find('\n') == std::string_view::npos) OPTSTATE_RETURN_IF_ERROR(Fetch(rest.size() + 1));
    }
    return Done(in_.ReadLine(what));
  }

  // After FRAME's length n was read (frame_at: the FRAME opcode's offset).
  Status Frame(uint64_t n, uint64_t frame_at) {
    if (frame_end_ != 0) {
      Record("a FRAME inside the frame of offset " + std::to_string(frame_at_) + ", which ends at offset " +
             std::to_string(frame_end_));
      if (mode_ == PickleReadMode::kFileNoPeek) {
        if (n <= frame_end_ - in_.offset()) return Status();  // served from the buffered frame; its end stays
        OPTSTATE_RETURN_IF_ERROR(Drop());
      }
    }
    if (n > in_.remaining()) {
      return TruncatedError("offset " + std::to_string(frame_at) + ": frame of " + std::to_string(n) + " bytes, " +
                            std::to_string(in_.remaining()) + " left");
    }
    frame_at_ = frame_at;
    frame_end_ = n == 0 ? 0 : in_.offset() + n;
    return Status();
  }

 private:
  template <typename T, StatusOr<T> (ByteCursor::*Read)(std::string_view)>
  StatusOr<T> Fixed(std::string_view what) {
    OPTSTATE_RETURN_IF_ERROR(Fetch(sizeof(T)));
    return Done((in_.*Read)(what));
  }

  // Before a read of n bytes through the C unpickler's buffer.
  Status Fetch(uint64_t n) {
    if (!Crossing(n) || mode_ == PickleReadMode::kStream) return Status();
    return Drop();
  }

  // Whether a read of n bytes runs past the open frame's end (recorded).
  bool Crossing(uint64_t n) {
    if (frame_end_ == 0 || n <= frame_end_ - in_.offset()) return false;
    Record(mode_ == PickleReadMode::kStream
               ? "the FRAME at offset " + std::to_string(frame_at_) + " ends at offset " + std::to_string(frame_end_) +
                     ", inside this opcode: Python's own unpickler refuses it, its C unpickler reads on"
               : "the FRAME at offset " + std::to_string(frame_at_) + " ends at offset " + std::to_string(frame_end_) +
                     ", inside this opcode: torch.load (CPython's C unpickler on a zip record) skips the " +
                     std::to_string(frame_end_ - in_.offset()) +
                     " byte(s) left of the frame and reads on after it, where a reader of the whole pickle "
                     "does not");
    return true;
  }

  Status Drop() {
    const uint64_t left = frame_end_ - in_.offset();
    frame_end_ = 0;
    return in_.Skip(left, "the rest of a FRAME");
  }

  template <typename T>
  T Done(T value) {
    if (frame_end_ != 0 && in_.offset() >= frame_end_) frame_end_ = 0;  // the frame is used up
    return value;
  }

  void Record(std::string what) { anomalies_.push_back({opcode_at_, std::move(what)}); }

  ByteCursor& in_;
  PickleReadMode mode_;
  std::vector<PickleAnomaly>& anomalies_;
  uint64_t opcode_at_ = 0;
  uint64_t frame_at_ = 0;   // offset of the FRAME opcode whose frame is open
  uint64_t frame_end_ = 0;  // absolute offset where it ends; 0 when none is open
};

}  // namespace optstate::pickle_internal

#endif  // OPTSTATE_LIB_PICKLE_INPUT_H_
