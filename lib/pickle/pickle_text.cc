#include "pickle/pickle_text.h"

#include <algorithm>
#include <charconv>
#include <vector>

namespace optstate {
namespace {

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

StatusOr<uint32_t> ParseHex(std::string_view text, size_t pos, size_t n) {
  if (pos + n > text.size()) return CorruptError("escape sequence cut short");
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    int d = HexValue(text[pos + i]);
    if (d < 0) return CorruptError("bad hex digit in escape sequence");
    v = v << 4 | static_cast<uint32_t>(d);
  }
  return v;
}

}  // namespace

StatusOr<DecimalInt> ParseDecimalInt(std::string_view text) {
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return CorruptError("'" + std::string(text.substr(0, 40)) + "' is not an integer");
  }
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  DecimalInt out;
  if (negative && digits != "0") out.digits.push_back('-');
  out.digits.append(digits);
  auto [end, ec] = std::from_chars(out.digits.data(), out.digits.data() + out.digits.size(), out.value);
  out.fits = ec == std::errc() && end == out.digits.data() + out.digits.size();
  return out;
}

std::optional<int64_t> LittleEndianToInt64(ByteSpan bytes) {
  while (bytes.size() > 8) {
    uint8_t top = static_cast<uint8_t>(bytes[bytes.size() - 1]);
    bool next_negative = static_cast<uint8_t>(bytes[bytes.size() - 2]) & 0x80;
    if (!((top == 0x00 && !next_negative) || (top == 0xFF && next_negative))) return std::nullopt;
    bytes = bytes.first(bytes.size() - 1);
  }
  uint64_t u = 0;
  for (size_t i = 0; i < bytes.size(); ++i) u |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (!bytes.empty() && bytes.size() < 8 && (static_cast<uint8_t>(bytes.back()) & 0x80)) {
    u |= ~uint64_t{0} << (8 * bytes.size());  // sign-extend
  }
  return static_cast<int64_t>(u);
}

std::string LittleEndianToDecimal(ByteSpan bytes) {
  if (bytes.empty()) return "0";
  // Magnitude as little-endian bytes, negated when the sign bit is set.
  std::vector<uint8_t> mag(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) mag[i] = static_cast<uint8_t>(bytes[i]);
  bool negative = (mag.back() & 0x80) != 0;
  if (negative) NegateLittleEndian(mag);
  // Repeated division by 10^9 over 32-bit limbs, most significant first:
  // quadratic in the length, which the pickle VM caps (max_long_bytes).
  std::vector<uint32_t> limbs((mag.size() + 3) / 4, 0);
  for (size_t i = 0; i < mag.size(); ++i) limbs[i / 4] |= static_cast<uint32_t>(mag[i]) << (8 * (i % 4));
  while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
  std::string digits;  // least significant first
  while (!limbs.empty()) {
    uint64_t rem = 0;
    for (size_t i = limbs.size(); i-- > 0;) {
      uint64_t cur = rem << 32 | limbs[i];
      limbs[i] = static_cast<uint32_t>(cur / 1000000000u);
      rem = cur % 1000000000u;
    }
    while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
    for (int k = 0; k < 9 && (rem != 0 || !limbs.empty()); ++k, rem /= 10) digits += static_cast<char>('0' + rem % 10);
  }
  if (digits.empty()) digits = "0";
  if (negative) digits += '-';
  std::reverse(digits.begin(), digits.end());
  return digits;
}

// Digits are folded in one at a time (magnitude = magnitude * 10 + digit).
std::string DecimalToLittleEndian(const std::string& digits) {
  bool negative = !digits.empty() && digits[0] == '-';
  std::vector<uint8_t> mag;  // little-endian magnitude
  for (char c : digits.substr(negative ? 1 : 0)) {
    unsigned carry = static_cast<unsigned>(c - '0');
    for (uint8_t& b : mag) {
      unsigned v = b * 10u + carry;
      b = static_cast<uint8_t>(v);
      carry = v >> 8;
    }
    while (carry) {
      mag.push_back(static_cast<uint8_t>(carry));
      carry >>= 8;
    }
  }
  mag.push_back(0);  // room for the sign bit
  if (negative) NegateLittleEndian(mag);
  // Drop redundant sign bytes.
  while (mag.size() > 1 && ((mag.back() == 0 && !(mag[mag.size() - 2] & 0x80)) ||
                            (mag.back() == 0xFF && (mag[mag.size() - 2] & 0x80)))) {
    mag.pop_back();
  }
  return std::string(mag.begin(), mag.end());
}

StatusOr<std::string> DecodeStringRepr(std::string_view quoted) {
  if (quoted.size() < 2 || (quoted.front() != '\'' && quoted.front() != '"') ||
      quoted.back() != quoted.front()) {
    return CorruptError("STRING argument is not quoted");
  }
  std::string_view body = quoted.substr(1, quoted.size() - 2);
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= body.size()) return CorruptError("STRING argument ends in a backslash");
    char e = body[i];
    // Python's one-character escapes, each followed by the byte it stands for
    // (the even positions are the escapes, so a match there is one).
    static constexpr std::string_view kSimpleEscapes("\\\\''\"\"n\nr\rt\ta\ab\bf\fv\v", 20);
    if (size_t at = kSimpleEscapes.find(e); at != std::string_view::npos && at % 2 == 0) {
      out += kSimpleEscapes[at + 1];
      continue;
    }
    switch (e) {
      case 'x': {
        OPTSTATE_ASSIGN_OR_RETURN(uint32_t v, ParseHex(body, i + 1, 2));
        out += static_cast<char>(v);
        i += 2;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {  // up to three octal digits
          unsigned v = 0;
          size_t n = 0;
          while (n < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7') {
            v = v * 8 + static_cast<unsigned>(body[i] - '0');
            ++i;
            ++n;
          }
          --i;
          out += static_cast<char>(v & 0xFF);
        } else {
          out += '\\';  // Python keeps unknown escapes as they are
          out += e;
        }
    }
  }
  return out;
}

StatusOr<std::string> DecodeRawUnicodeEscape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == 'u' || text[i + 1] == 'U')) {
      size_t n = text[i + 1] == 'u' ? 4 : 8;
      OPTSTATE_ASSIGN_OR_RETURN(uint32_t cp, ParseHex(text, i + 2, n));
      if (cp > 0x10FFFF) return CorruptError("code point beyond U+10FFFF in UNICODE argument");
      AppendUtf8(out, cp);
      i += 1 + n;
    } else {
      AppendUtf8(out, static_cast<uint8_t>(text[i]));
    }
  }
  return out;
}

void NegateLittleEndian(std::vector<uint8_t>& bytes) {
  unsigned carry = 1;
  for (uint8_t& b : bytes) {
    unsigned v = static_cast<uint8_t>(~b) + carry;
    b = static_cast<uint8_t>(v);
    carry = v >> 8;
  }
}

std::string Latin1ToUtf8(std::string_view latin1) {
  std::string out;
  out.reserve(latin1.size());
  for (char c : latin1) AppendUtf8(out, static_cast<uint8_t>(c));
  return out;
}

}  // namespace optstate
