// Raw DEFLATE (RFC 1951), the zip method 8 that torch's zip reader (miniz)
// accepts in a checkpoint although torch.save never writes it. Only the
// security scan needs it: a deflated data.pkl is unpickled by torch.load like
// a stored one, so its pickle must be scanned too. Written for clarity over
// speed (a pickle is small): canonical Huffman codes decoded bit by bit, every
// read bounds-checked, the output capped before it grows.
#include "zip/inflate.h"

#include <array>
#include <cstdint>
#include <string>

namespace optstate {
namespace {

constexpr int kMaxBits = 15;

class BitReader {
 public:
  explicit BitReader(ByteSpan in) : in_(in) {}

  StatusOr<uint32_t> Bits(int n) {
    uint32_t v = bit_buffer_;
    while (bit_count_ < n) {
      if (pos_ >= in_.size()) return TruncatedError("deflate stream ends inside a block at byte " + Where());
      v |= static_cast<uint32_t>(static_cast<uint8_t>(in_[pos_++])) << bit_count_;
      bit_count_ += 8;
    }
    bit_buffer_ = v >> n;
    bit_count_ -= n;
    return v & ((1u << n) - 1);
  }

  // Stored blocks start at a byte boundary: the rest of the current byte is dropped.
  void AlignToByte() { bit_buffer_ = 0, bit_count_ = 0; }

  StatusOr<ByteSpan> Bytes(size_t n) {
    if (n > in_.size() - pos_) return TruncatedError("stored deflate block runs past the data at byte " + Where());
    ByteSpan out = in_.subspan(pos_, n);
    pos_ += n;
    return out;
  }

  std::string Where() const { return std::to_string(pos_); }

 private:
  ByteSpan in_;
  size_t pos_ = 0;
  uint32_t bit_buffer_ = 0;
  int bit_count_ = 0;
};

// A canonical Huffman code: how many codes of each length, and the symbols in
// code order.
struct Huffman {
  std::array<uint16_t, kMaxBits + 1> count{};
  std::array<uint16_t, 320> symbol{};
};

// Over-subscribed lengths are corrupt; an incomplete code is allowed (RFC 1951
// permits one distance code), decoding then fails only if the gap is used.
Status BuildHuffman(Huffman& h, const uint8_t* lengths, int n) {
  h.count.fill(0);
  for (int i = 0; i < n; ++i) ++h.count[lengths[i]];
  h.count[0] = 0;
  int left = 1;
  for (int len = 1; len <= kMaxBits; ++len) {
    left = (left << 1) - h.count[len];
    if (left < 0) return CorruptError("deflate: over-subscribed Huffman code lengths");
  }
  std::array<uint16_t, kMaxBits + 2> offsets{};
  for (int len = 1; len <= kMaxBits; ++len) offsets[len + 1] = offsets[len] + h.count[len];
  for (int i = 0; i < n; ++i) {
    if (lengths[i] != 0) h.symbol[offsets[lengths[i]]++] = static_cast<uint16_t>(i);
  }
  return Status();
}

StatusOr<int> Decode(BitReader& in, const Huffman& h) {
  int code = 0, first = 0, index = 0;
  for (int len = 1; len <= kMaxBits; ++len) {
    OPTSTATE_ASSIGN_OR_RETURN(uint32_t bit, in.Bits(1));
    code |= static_cast<int>(bit);
    int count = h.count[len];
    if (code - first < count) return h.symbol[index + (code - first)];
    index += count;
    first = (first + count) << 1;
    code <<= 1;
  }
  return CorruptError("deflate: a code that no Huffman table holds at byte " + in.Where());
}

constexpr std::array<uint16_t, 29> kLengthBase = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                                  31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::array<uint8_t, 29> kLengthExtra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                                  2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr std::array<uint16_t, 30> kDistBase = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,
                                                33,  49,  65,  97,  129, 193,  257,  385,  513,  769,
                                                1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr std::array<uint8_t, 30> kDistExtra = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

class Inflater {
 public:
  Inflater(ByteSpan in, uint64_t cap) : in_(in), cap_(cap) {}

  StatusOr<std::vector<std::byte>> Run() {
    bool last = false;
    while (!last) {
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t final_bit, in_.Bits(1));
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t type, in_.Bits(2));
      last = final_bit != 0;
      if (type == 0) {
        OPTSTATE_RETURN_IF_ERROR(Stored());
      } else if (type == 1) {
        OPTSTATE_RETURN_IF_ERROR(Fixed());
      } else if (type == 2) {
        OPTSTATE_RETURN_IF_ERROR(Dynamic());
      } else {
        return CorruptError("deflate: block type 3 (reserved) at byte " + in_.Where());
      }
    }
    return std::move(out_);
  }

 private:
  Status Emit(std::byte b) {
    if (out_.size() >= cap_) return LimitExceededError("deflate output exceeds " + std::to_string(cap_) + " bytes");
    out_.push_back(b);
    return Status();
  }

  Status Stored() {
    in_.AlignToByte();
    OPTSTATE_ASSIGN_OR_RETURN(ByteSpan header, in_.Bytes(4));
    uint16_t len = static_cast<uint16_t>(static_cast<uint8_t>(header[0]) | (static_cast<uint8_t>(header[1]) << 8));
    uint16_t nlen = static_cast<uint16_t>(static_cast<uint8_t>(header[2]) | (static_cast<uint8_t>(header[3]) << 8));
    if (len != static_cast<uint16_t>(~nlen)) return CorruptError("deflate: stored block length check fails");
    OPTSTATE_ASSIGN_OR_RETURN(ByteSpan data, in_.Bytes(len));
    for (std::byte b : data) OPTSTATE_RETURN_IF_ERROR(Emit(b));
    return Status();
  }

  Status Fixed() {
    std::array<uint8_t, 288> lengths{};
    for (int i = 0; i < 144; ++i) lengths[i] = 8;
    for (int i = 144; i < 256; ++i) lengths[i] = 9;
    for (int i = 256; i < 280; ++i) lengths[i] = 7;
    for (int i = 280; i < 288; ++i) lengths[i] = 8;
    Huffman lit, dist;
    OPTSTATE_RETURN_IF_ERROR(BuildHuffman(lit, lengths.data(), 288));
    std::array<uint8_t, 30> dist_lengths;
    dist_lengths.fill(5);
    OPTSTATE_RETURN_IF_ERROR(BuildHuffman(dist, dist_lengths.data(), 30));
    return Codes(lit, dist);
  }

  Status Dynamic() {
    OPTSTATE_ASSIGN_OR_RETURN(uint32_t hlit, in_.Bits(5));
    OPTSTATE_ASSIGN_OR_RETURN(uint32_t hdist, in_.Bits(5));
    OPTSTATE_ASSIGN_OR_RETURN(uint32_t hclen, in_.Bits(4));
    const int nlit = static_cast<int>(hlit) + 257, ndist = static_cast<int>(hdist) + 1;
    if (nlit > 286 || ndist > 30) return CorruptError("deflate: too many length or distance codes");
    static constexpr std::array<uint8_t, 19> kOrder = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    std::array<uint8_t, 19> code_lengths{};
    for (uint32_t i = 0; i < hclen + 4; ++i) {
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t v, in_.Bits(3));
      code_lengths[kOrder[i]] = static_cast<uint8_t>(v);
    }
    Huffman lengths_code;
    OPTSTATE_RETURN_IF_ERROR(BuildHuffman(lengths_code, code_lengths.data(), 19));
    std::array<uint8_t, 316> lengths{};
    for (int i = 0; i < nlit + ndist;) {
      OPTSTATE_ASSIGN_OR_RETURN(int sym, Decode(in_, lengths_code));
      if (sym < 16) {
        lengths[i++] = static_cast<uint8_t>(sym);
        continue;
      }
      uint8_t value = 0;
      uint32_t repeat = 0;
      if (sym == 16) {
        if (i == 0) return CorruptError("deflate: a length repeat with nothing before it");
        value = lengths[i - 1];
        OPTSTATE_ASSIGN_OR_RETURN(uint32_t r, in_.Bits(2));
        repeat = 3 + r;
      } else if (sym == 17) {
        OPTSTATE_ASSIGN_OR_RETURN(uint32_t r, in_.Bits(3));
        repeat = 3 + r;
      } else {
        OPTSTATE_ASSIGN_OR_RETURN(uint32_t r, in_.Bits(7));
        repeat = 11 + r;
      }
      if (i + static_cast<int>(repeat) > nlit + ndist) return CorruptError("deflate: code lengths repeat too far");
      while (repeat-- > 0) lengths[i++] = value;
    }
    if (lengths[256] == 0) return CorruptError("deflate: no end-of-block code");
    Huffman lit, dist;
    OPTSTATE_RETURN_IF_ERROR(BuildHuffman(lit, lengths.data(), nlit));
    OPTSTATE_RETURN_IF_ERROR(BuildHuffman(dist, lengths.data() + nlit, ndist));
    return Codes(lit, dist);
  }

  Status Codes(const Huffman& lit, const Huffman& dist) {
    while (true) {
      OPTSTATE_ASSIGN_OR_RETURN(int sym, Decode(in_, lit));
      if (sym < 256) {
        OPTSTATE_RETURN_IF_ERROR(Emit(static_cast<std::byte>(sym)));
        continue;
      }
      if (sym == 256) return Status();
      sym -= 257;
      if (sym >= 29) return CorruptError("deflate: length code " + std::to_string(sym + 257) + " does not exist");
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t extra, in_.Bits(kLengthExtra[sym]));
      const uint32_t length = kLengthBase[sym] + extra;
      OPTSTATE_ASSIGN_OR_RETURN(int dsym, Decode(in_, dist));
      if (dsym >= 30) return CorruptError("deflate: distance code " + std::to_string(dsym) + " does not exist");
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t dextra, in_.Bits(kDistExtra[dsym]));
      const uint32_t distance = kDistBase[dsym] + dextra;
      if (distance > out_.size()) return CorruptError("deflate: a match reaches before the start of the output");
      for (uint32_t k = 0; k < length; ++k) OPTSTATE_RETURN_IF_ERROR(Emit(out_[out_.size() - distance]));
    }
  }

  BitReader in_;
  uint64_t cap_;
  std::vector<std::byte> out_;
};

}  // namespace

StatusOr<std::vector<std::byte>> InflateRaw(ByteSpan deflated, uint64_t cap) {
  return Inflater(deflated, cap).Run();
}

}  // namespace optstate
