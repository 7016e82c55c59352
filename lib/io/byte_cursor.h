// ByteCursor: the one place where reads from untrusted bytes are bounds-checked.
//
// Every parser in optstate (zip directory, pickle opcodes, legacy records, DCP
// metadata) reads through a ByteCursor. Each Read* call either returns the value
// and advances, or returns kTruncated naming what was being read, the absolute
// byte offset and how many bytes were needed and left, and does not advance.
// Lengths read from the file are passed to ReadBytes/Skip, which compare them with
// the bytes actually present before anything is touched, so a declared size can
// never cause an allocation or a read past the end.
//
// A cursor does not own its bytes: the caller keeps the buffer (usually a
// MappedFile) alive for as long as the cursor and any span it returned.
//
// `base_offset` is the absolute file offset of data[0]; it only affects the
// offsets reported in errors and by offset(), so a cursor over one zip record or
// one DCP item still reports positions in the file the user has.
#ifndef OPTSTATE_BYTE_CURSOR_H_
#define OPTSTATE_BYTE_CURSOR_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "optstate/file_io.h"
#include "optstate/status.h"

namespace optstate {

class ByteCursor {
 public:
  explicit ByteCursor(ByteSpan data, uint64_t base_offset = 0)
      : data_(data), base_offset_(base_offset) {}

  // Absolute offset of the next byte to read.
  uint64_t offset() const { return base_offset_ + pos_; }
  // Position relative to the start of this cursor's data.
  size_t position() const { return pos_; }
  size_t size() const { return data_.size(); }
  size_t remaining() const { return data_.size() - pos_; }
  bool at_end() const { return pos_ == data_.size(); }
  ByteSpan data() const { return data_; }
  uint64_t base_offset() const { return base_offset_; }

  // `what` names the field for the error message ("BININT argument").
  StatusOr<uint8_t> ReadU8(std::string_view what);
  StatusOr<uint16_t> ReadU16LE(std::string_view what);
  StatusOr<uint32_t> ReadU32LE(std::string_view what);
  StatusOr<uint64_t> ReadU64LE(std::string_view what);
  StatusOr<int32_t> ReadI32LE(std::string_view what);
  StatusOr<int64_t> ReadI64LE(std::string_view what);
  // An IEEE-754 double stored big-endian (pickle BINFLOAT).
  StatusOr<double> ReadF64BE(std::string_view what);

  // The next n bytes. n comes from untrusted input: it is compared with what is
  // left before anything else happens.
  StatusOr<ByteSpan> ReadBytes(uint64_t n, std::string_view what);
  // The bytes up to and excluding the next '\n', which is consumed; kTruncated if
  // there is no '\n' before the end. For pickle's text opcodes.
  StatusOr<std::string_view> ReadLine(std::string_view what);
  Status Skip(uint64_t n, std::string_view what);
  // Moves to `position` (relative to this cursor's data; may equal size()).
  Status Seek(uint64_t position, std::string_view what);

  // A cursor over [position, position + length) of this cursor's data, reporting
  // absolute offsets; checked against size().
  StatusOr<ByteCursor> Slice(uint64_t position, uint64_t length, std::string_view what) const;

 private:
  // Succeeds when n bytes are left; else the kTruncated error for `what`.
  Status Need(uint64_t n, std::string_view what) const;
  // A little-endian unsigned T (2, 4 or 8 bytes), checked and consumed.
  template <typename T>
  StatusOr<T> ReadLE(std::string_view what);

  ByteSpan data_;
  size_t pos_ = 0;
  uint64_t base_offset_;
};

// Unchecked little-endian loads. Only for use right after one up-front check that
// the whole fixed-size structure is present (as ByteCursor does internally).
inline uint16_t LoadU16LEUnchecked(const std::byte* p) {
  return static_cast<uint16_t>(static_cast<uint16_t>(p[0]) | static_cast<uint16_t>(p[1]) << 8);
}
inline uint32_t LoadU32LEUnchecked(const std::byte* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
inline uint64_t LoadU64LEUnchecked(const std::byte* p) {
  return static_cast<uint64_t>(LoadU32LEUnchecked(p)) |
         static_cast<uint64_t>(LoadU32LEUnchecked(p + 4)) << 32;
}

}  // namespace optstate

#endif  // OPTSTATE_BYTE_CURSOR_H_
