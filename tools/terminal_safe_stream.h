// Everything optstate prints passes through here, because names, keys and
// strings in a checkpoint are chosen by whoever wrote it: a key holding ESC
// sequences could clear the screen or retitle the terminal, a CR or a bidi
// override could make a line read "findings: none". Escaping at the sink covers
// every renderer at once, including ones written later.
//
// What is rewritten (everything else, valid UTF-8 included, passes unchanged):
//   C0 controls except \n and \t, and DEL     -> \r, \x1b, \x7f ...
//   bytes that are not valid UTF-8             -> \xff ...
//   C1 controls (U+0080..U+009F), bidi controls (U+061C, U+200E, U+200F,
//   U+202A..U+202E, U+2066..U+2069)            -> \u0085, \u202e ...
// JSON is unaffected in meaning: its writer already escapes C0 controls and
// replaces invalid UTF-8, and \uXXXX inside a JSON string is the same character.
#ifndef OPTSTATE_TOOLS_TERMINAL_SAFE_STREAM_H_
#define OPTSTATE_TOOLS_TERMINAL_SAFE_STREAM_H_

#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

namespace optstate::tools {

// The rewriting above, for one complete piece of text.
std::string EscapeForTerminal(std::string_view text);

// One field of a report on one line: newlines and tabs in it (a key, a name,
// a message quoting either, all from the file) become \n and \t, so a key
// cannot print a line of its own. The sink's filter does the rest.
std::string OneLine(std::string_view field);

// A streambuf that escapes what is written to it and forwards it to `sink`.
// Text is held until a newline (no UTF-8 sequence spans one) or a flush, so a
// multi-byte character split across two writes is judged whole.
class TerminalSafeBuf : public std::streambuf {
 public:
  explicit TerminalSafeBuf(std::streambuf* sink) : sink_(sink) {}
  ~TerminalSafeBuf() override { sync(); }

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  void ForwardCompleteLines();

  std::streambuf* sink_;
  std::string pending_;
};

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_TERMINAL_SAFE_STREAM_H_
