#include "terminal_safe_stream.h"

#include <cstdint>
#include <cstdio>

namespace optstate::tools {
namespace {

void AppendHexByte(std::string& out, unsigned char b) {
  char buf[5];
  std::snprintf(buf, sizeof buf, "\\x%02x", b);
  out += buf;
}

void AppendCodePoint(std::string& out, uint32_t cp) {
  char buf[16];  // \u and up to 8 hex digits as far as the compiler knows; 4 in practice
  std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
  out += buf;
}

bool IsInvisibleControl(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// Length of the valid UTF-8 sequence at text[i] and its code point, or 0 when
// the bytes there are not one (overlong forms, surrogates and values past
// U+10FFFF included, as the Unicode standard defines validity).
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t& cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char b0 = byte(i);
  size_t len;
  uint32_t min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    unsigned char b = byte(i + k);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

std::string EscapeForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if (b == '\n' || b == '\t' || (b >= 0x20 && b != 0x7F)) {
        out += static_cast<char>(b);
      } else if (b == '\r') {
        out += "\\r";
      } else {
        AppendHexByte(out, b);
      }
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = DecodeUtf8(text, i, cp);
    if (len == 0) {
      AppendHexByte(out, b);
      ++i;
    } else if (IsInvisibleControl(cp)) {
      AppendCodePoint(out, cp);
      i += len;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string OneLine(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (char c : field) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

TerminalSafeBuf::int_type TerminalSafeBuf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  pending_ += traits_type::to_char_type(c);
  if (pending_.back() == '\n') ForwardCompleteLines();
  return c;
}

std::streamsize TerminalSafeBuf::xsputn(const char* s, std::streamsize n) {
  pending_.append(s, static_cast<size_t>(n));
  ForwardCompleteLines();
  return n;
}

void TerminalSafeBuf::ForwardCompleteLines() {
  size_t end = pending_.rfind('\n');
  if (end == std::string::npos) return;
  std::string safe = EscapeForTerminal(std::string_view(pending_).substr(0, end + 1));
  sink_->sputn(safe.data(), static_cast<std::streamsize>(safe.size()));
  pending_.erase(0, end + 1);
}

int TerminalSafeBuf::sync() {
  if (!pending_.empty()) {
    std::string safe = EscapeForTerminal(pending_);
    sink_->sputn(safe.data(), static_cast<std::streamsize>(safe.size()));
    pending_.clear();
  }
  return sink_->pubsync();
}

}  // namespace optstate::tools
