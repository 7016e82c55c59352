#include "io/byte_cursor.h"

#include <bit>
#include <cstring>
#include <string>

namespace optstate {

Status ByteCursor::Need(uint64_t n, std::string_view what) const {
  if (n <= remaining()) return Status();
  return TruncatedError("offset " + std::to_string(offset()) + ": need " + std::to_string(n) +
                        " bytes for " + std::string(what) + ", " + std::to_string(remaining()) +
                        " left");
}

StatusOr<uint8_t> ByteCursor::ReadU8(std::string_view what) {
  OPTSTATE_RETURN_IF_ERROR(Need(1, what));
  return static_cast<uint8_t>(data_[pos_++]);
}

namespace {

// A little-endian unsigned integer of sizeof(T) bytes at `p` (bounds already checked).
template <typename T>
T LoadLE(const std::byte* p) {
  if constexpr (sizeof(T) == 2) return LoadU16LEUnchecked(p);
  if constexpr (sizeof(T) == 4) return LoadU32LEUnchecked(p);
  if constexpr (sizeof(T) == 8) return LoadU64LEUnchecked(p);
}

}  // namespace

template <typename T>
StatusOr<T> ByteCursor::ReadLE(std::string_view what) {
  OPTSTATE_RETURN_IF_ERROR(Need(sizeof(T), what));
  T v = LoadLE<T>(data_.data() + pos_);
  pos_ += sizeof(T);
  return v;
}

StatusOr<uint16_t> ByteCursor::ReadU16LE(std::string_view what) { return ReadLE<uint16_t>(what); }
StatusOr<uint32_t> ByteCursor::ReadU32LE(std::string_view what) { return ReadLE<uint32_t>(what); }
StatusOr<uint64_t> ByteCursor::ReadU64LE(std::string_view what) { return ReadLE<uint64_t>(what); }

StatusOr<int32_t> ByteCursor::ReadI32LE(std::string_view what) {
  OPTSTATE_ASSIGN_OR_RETURN(uint32_t v, ReadU32LE(what));
  return static_cast<int32_t>(v);  // two's complement, defined since C++20
}

StatusOr<int64_t> ByteCursor::ReadI64LE(std::string_view what) {
  OPTSTATE_ASSIGN_OR_RETURN(uint64_t v, ReadU64LE(what));
  return static_cast<int64_t>(v);
}

StatusOr<double> ByteCursor::ReadF64BE(std::string_view what) {
  OPTSTATE_RETURN_IF_ERROR(Need(8, what));
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits = bits << 8 | static_cast<uint8_t>(data_[pos_ + i]);
  pos_ += 8;
  return std::bit_cast<double>(bits);
}

StatusOr<ByteSpan> ByteCursor::ReadBytes(uint64_t n, std::string_view what) {
  OPTSTATE_RETURN_IF_ERROR(Need(n, what));
  ByteSpan out = data_.subspan(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return out;
}

StatusOr<std::string_view> ByteCursor::ReadLine(std::string_view what) {
  // An empty span may have a null data(), which memchr must not be given.
  const void* nl = remaining() == 0 ? nullptr : std::memchr(data_.data() + pos_, '\n', remaining());
  if (nl == nullptr) {
    return TruncatedError("offset " + std::to_string(offset()) + ": no end of line for " +
                          std::string(what) + " in the " + std::to_string(remaining()) +
                          " bytes left");
  }
  size_t len = static_cast<size_t>(static_cast<const std::byte*>(nl) - (data_.data() + pos_));
  std::string_view line(reinterpret_cast<const char*>(data_.data() + pos_), len);
  pos_ += len + 1;
  return line;
}

Status ByteCursor::Skip(uint64_t n, std::string_view what) {
  OPTSTATE_RETURN_IF_ERROR(Need(n, what));
  pos_ += static_cast<size_t>(n);
  return Status();
}

Status ByteCursor::Seek(uint64_t position, std::string_view what) {
  if (position > data_.size()) {
    return TruncatedError("offset " + std::to_string(base_offset_ + position) + ": " +
                          std::string(what) + " lies past the end of the data (" +
                          std::to_string(base_offset_ + data_.size()) + ")");
  }
  pos_ = static_cast<size_t>(position);
  return Status();
}

StatusOr<ByteCursor> ByteCursor::Slice(uint64_t position, uint64_t length,
                                       std::string_view what) const {
  // Written to avoid overflow: position + length may exceed 2^64 for hostile input.
  if (position > data_.size() || length > data_.size() - position) {
    return TruncatedError("offset " + std::to_string(base_offset_ + position) + ": " +
                          std::string(what) + " of " + std::to_string(length) +
                          " bytes ends past the end of the data (" +
                          std::to_string(base_offset_ + data_.size()) + ")");
  }
  return ByteCursor(data_.subspan(static_cast<size_t>(position), static_cast<size_t>(length)),
                    base_offset_ + position);
}

}  // namespace optstate
