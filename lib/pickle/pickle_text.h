// Decoding helpers for pickle's text-mode arguments, and big integers both ways
// (read by the pickle machine, written by the emitter).
#ifndef OPTSTATE_LIB_PICKLE_TEXT_H_
#define OPTSTATE_LIB_PICKLE_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/status.h"

namespace optstate {

struct DecimalInt {
  bool fits = false;   // value holds it; otherwise only digits does
  int64_t value = 0;
  std::string digits;  // canonical decimal, '-' for negatives
};

// "123", "-7", "+5": kCorrupt for anything else (pickle INT / LONG arguments).
StatusOr<DecimalInt> ParseDecimalInt(std::string_view text);

// Exact decimal form of a little-endian two's complement integer (LONG1/LONG4).
std::string LittleEndianToDecimal(ByteSpan bytes);

// The same integer when it fits int64, else nullopt. Python's pickler writes the
// fewest bytes, but a longer encoding (bytes that only repeat the sign) is the
// same int: it fits whenever its value does, or a round trip through the
// writer, which writes the short form, would change its kind (found by the
// roundtrip fuzzer).
std::optional<int64_t> LittleEndianToInt64(ByteSpan bytes);

// The inverse: decimal digits (with '-') as the fewest little-endian two's
// complement bytes that hold them.
std::string DecimalToLittleEndian(const std::string& digits);

// A Python 2 str repr as protocol 0 writes it: 'abc' or "abc" with backslash
// escapes (\\ \' \" \n \r \t \xHH and octal). Returns the raw bytes.
StatusOr<std::string> DecodeStringRepr(std::string_view quoted);

// raw-unicode-escape (UNICODE opcode): \uXXXX and \UXXXXXXXX escapes, every other
// byte latin-1. Returns UTF-8.
StatusOr<std::string> DecodeRawUnicodeEscape(std::string_view text);

std::string Latin1ToUtf8(std::string_view latin1);

// Two's complement negation in place of a little-endian byte string.
void NegateLittleEndian(std::vector<uint8_t>& bytes);

}  // namespace optstate

#endif  // OPTSTATE_LIB_PICKLE_TEXT_H_
